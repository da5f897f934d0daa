"""The claims' titles and thresholds, config/report/claims.yaml: one entry per claim, keyed by its
file under hkt/report/claims/, in the order the summary's rows take; each entry holds its
``section`` (``paper``: the paper's claims; ``limits``: what limits our values), its ``title``
and the keys its file declares (:data:`KEYS` of the claim's module). A missing or extra key is
refused naming the file, the claim and the key."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from hkt.report.report_settings import read_mapping
from hkt.runs_frame import AggregateError

__all__ = ["CLAIMS_CONFIG", "SECTIONS", "load_claims_config", "claim_config", "check_entry"]

#: The claims' file, under config/.
CLAIMS_CONFIG = "report/claims.yaml"
#: The two parts of the claims table, in order.
SECTIONS = ("paper", "limits")


def _path() -> Path:
    from hkt.config_compose import config_dir

    return config_dir() / CLAIMS_CONFIG


def load_claims_config(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every claim's entry, in the file's order (``path``: config/report/claims.yaml), each a
    mapping with a ``section`` of :data:`SECTIONS` and a ``title``."""
    path = path or _path()
    cfg = read_mapping(path, "the claims' settings (claim name -> its settings)")
    for name, entry in cfg.items():
        if not isinstance(entry, dict):
            raise AggregateError(f"{path}: claim '{name}' is not a mapping of its settings "
                                 "(section, title, ...)")
        if entry.get("section") not in SECTIONS:
            raise AggregateError(f"{path}: claim '{name}' key 'section' is "
                                 f"{entry.get('section')!r}; set it to one of {', '.join(SECTIONS)}")
        if not isinstance(entry.get("title"), str) or not entry["title"]:
            raise AggregateError(f"{path}: claim '{name}' has no key 'title' (the claim's words "
                                 "in the table); add it")
    return cfg


def check_entry(name: str, entry: dict[str, Any], keys: tuple[str, ...],
                path: Path | None = None) -> None:
    """Refuse a claim's entry whose keys are not ``section``, ``title`` and ``keys``."""
    want = {"section", "title", *keys}
    where = path or _path()
    if missing := sorted(want - set(entry)):
        raise AggregateError(f"{where}: claim '{name}' has no key '{missing[0]}'; add it "
                             f"(hkt/report/claims/{name}.py reads it)")
    if extra := sorted(set(entry) - want):
        raise AggregateError(f"{where}: claim '{name}' has a key '{extra[0]}' its file does not "
                             f"read (it reads {', '.join(sorted(want))}); remove it")


@lru_cache(maxsize=1)
def _default() -> dict[str, dict[str, Any]]:
    return load_claims_config()


def claim_config(name: str) -> dict[str, Any]:
    """Claim ``name``'s entry of config/report/claims.yaml (read once)."""
    cfg = _default()
    if name not in cfg:
        raise AggregateError(f"{_path()} has no entry for claim '{name}' "
                             f"(hkt/report/claims/{name}.py); add one")
    return cfg[name]
