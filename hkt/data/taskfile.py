"""A task file, ``config/task/NAME.yaml``, read as plain YAML (no Hydra, no torch), so that the
workflow's dry run stays fast: its ``id`` check and what the job grid needs of it.

A task file's ``id`` is its file name: ``config/task/NAME.yaml`` says ``id: NAME``. The id names
the MLflow experiment and the runs (``hkt-<profile>-<id>``), so a copied task file that keeps its
original's ``id`` would log into the original's experiment without a word. A file that builds
on another (``defaults: [listops, _self_]``) states its own ``id``: the inherited one is stale.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["task_id_problem", "read_task_info"]


def task_id_problem(path: str | Path) -> str | None:
    """What is wrong with the ``id`` of task file ``path`` (a message naming the file and the
    key), or None when it is the file's name."""
    path = Path(path)
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    got = raw.get("id") if isinstance(raw, dict) else None
    if got == path.stem:
        return None
    said = "has no key `id`" if got is None else f"has `id: {got}`"
    return (f"task config {path} {said}; a task's id must be its file name (`id: {path.stem}`): "
            "it names the MLflow experiment and the runs")


@lru_cache(maxsize=None)
def read_task_info(paths: tuple[Path, ...], task: str) -> tuple[str, int]:
    """A task's data family (``family``, else ``task``) and ``max_length`` (0 if unset), from
    its file and the files it builds on (``paths``, its own first: the first that sets a key
    gives it, as Hydra's ``_self_`` last does); cached (the grid asks once per job)."""
    found: dict[str, object] = {}
    for path in paths:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        for key in ("family", "max_length"):
            if isinstance(cfg, dict) and key in cfg:
                found.setdefault(key, cfg[key])
    return str(found.get("family", task)), int(found.get("max_length", 0))
