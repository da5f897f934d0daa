"""What a task's prepared data say of their source when it was not the official archive.

:func:`provenance_warning` heads the data card, the results summary and the tables' captions,
and tags every run trained on the data. Besides the file read and its SHA-256 it says what that
kind of copy may differ in, in the data family's own words: a family module may define
``alternative_source(meta) -> str`` (``hkt/data/families/imdb.py`` and ``cifar10.py`` do), read
from the Parquet metadata alone, so that the warning of data prepared long ago reads the same as
a fresh one's.
"""

from __future__ import annotations

from typing import Any

from hkt.data.task_config import family_module
from hkt.errors import ConfigError

#: What the warning says of a copy whose family states nothing of its own.
UNKNOWN_COPY = "a copy other than the official file can differ from it in content"


def what_differs(meta: dict[str, Any]) -> str:
    """The family's sentence on what this alternative source may differ in (its
    ``alternative_source``), or :data:`UNKNOWN_COPY`."""
    try:
        describe = getattr(family_module(meta.get("task")), "alternative_source", None)
    except ConfigError:  # data of a family this code no longer has
        describe = None
    return describe(meta) if describe is not None else UNKNOWN_COPY


def provenance_warning(meta: dict[str, Any]) -> str | None:
    """A warning when the data was prepared from something other than the official archive
    (``meta["source"]["official"]`` false: a mirror's alternative, a local directory), else
    None."""
    src = meta.get("source") or {}
    if not isinstance(src, dict) or src.get("official") is not False:
        return None
    what = src.get("file") or "a local directory"
    digest = f" (SHA-256 {src['sha256']})" if src.get("sha256") else ""
    official = f" {src['official_file']}" if src.get("official_file") else ""
    return (f"{meta.get('task_config') or meta.get('task')} was prepared from {what}{digest}, not "
            f"the official archive{official}: {what_differs(meta)}. Compare the results with "
            "published figures with care.")
