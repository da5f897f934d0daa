"""What the grid reads straight from Hydra config files (YAML, without Hydra, so that a dry run
stays fast): a task's family and length, the model a variant file selects. Cached per path."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["read_task_info", "read_variant_model"]


@lru_cache(maxsize=None)
def read_task_info(path: Path, task: str) -> tuple[str, int]:
    """A task file's data family (``family``, else ``task``) and ``max_length`` (0 if unset)."""
    cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return str(cfg.get("family", task)), int(cfg.get("max_length", 0))


@lru_cache(maxsize=None)
def read_variant_model(path: Path) -> str | None:
    """The model a variant file selects by ``override /model: M``, or None."""
    cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    model = None
    for entry in cfg.get("defaults") or []:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if key.replace(" ", "") in ("override/model", "/model"):
                    model = str(value)
    return model
