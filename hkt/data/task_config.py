"""Task configs: compose ``config/task/TASK.yaml`` with Hydra and validate it before any work.

The config directory is ``<repo>/config`` (found next to the package) or ``$HKT_CONFIG_DIR``.
A task config has ``id`` (its file's name), ``family`` (the data family: listops, imdb,
cifar10), ``num_classes``, ``max_length`` and
a ``prepare`` node with every preparation parameter. Overrides use Hydra's
syntax and may be written relative to the task (``prepare.seed=1``) or with the ``task.``
prefix used by training configs (``task.prepare.seed=1``).

Validation is strict and uses the checks of :mod:`hkt.value_checks`: the family's module (a module of
:mod:`hkt.data.families`, registered in :data:`FAMILIES`) gives the schema of ``prepare``
(``PREPARE_SCHEMA``) and its cross-field checks (``check_config``). An unknown key, a missing key or a bad value raises
:class:`hkt.errors.ConfigError` naming the key (``task.prepare.splits.train``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from hkt.value_checks import check_schema, pos_int, text
from hkt.config_compose import compose, config_dir
from hkt.data.families import FAMILIES, REQUIRED
from hkt.data.taskfile import task_id_problem
from hkt.errors import ConfigError, did_you_mean

__all__ = ["FAMILIES", "available_tasks", "compose_task", "family_module", "load_task_config",
           "split_sizes", "validate_task"]


TOP_SCHEMA: dict[str, Any] = {"id": text, "family": text, "num_classes": pos_int,
                               "max_length": pos_int}


def available_tasks() -> list[str]:
    """Names of the task configs (``config/task/*.yaml``)."""
    return sorted(p.stem for p in (config_dir() / "task").glob("*.yaml"))


def family_module(name: Any) -> ModuleType:
    """The module of data family ``name`` (``PREPARE_SCHEMA``, ``check_config``, ``prepare``)."""
    if name not in FAMILIES:
        raise ConfigError(f"task.family must be one of {', '.join(FAMILIES.names())} (the data "
                          f"family), got {name!r}")
    module = sys.modules[FAMILIES[name].__module__]
    missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"data family {name!r}: {module.__name__} lacks {', '.join(missing)}")
    return module


def _normalise_override(ov: str) -> str:
    """Prefix a task-relative override with ``task.`` (keeping ``+``, ``++`` and ``~``)."""
    m = re.match(r"^(\+\+|\+|~)?(.*)$", ov)
    prefix, body = m.group(1) or "", m.group(2)
    if body.startswith("task.") or body.startswith("task="):
        return ov
    return f"{prefix}task.{body}"


def compose_task(task: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Compose ``config/task/TASK.yaml`` with overrides; return the resolved task node as a dict.

    Uses :func:`hkt.config_compose.compose`, so unknown keys, unparsable overrides and broken
    interpolations raise ConfigError naming the key. Types and values are then checked by
    :func:`validate_task`.
    """
    from omegaconf import OmegaConf

    cdir = config_dir()
    if not (cdir / "task" / f"{task}.yaml").is_file():
        known = ", ".join(available_tasks()) or "none"
        raise ConfigError(f"unknown task {task!r}: no {cdir / 'task' / (task + '.yaml')} "
                          f"(available: {known})" + did_you_mean(task, available_tasks()))
    if problem := task_id_problem(cdir / "task" / f"{task}.yaml"):
        raise ConfigError(problem)
    # types are checked with the values, by validate_task's schema
    overrides = [_normalise_override(o) for o in overrides]
    cfg = compose(f"task/{task}", overrides, check_types=False)
    return OmegaConf.to_container(cfg["task"], resolve=True)  # type: ignore[return-value]


def validate_task(raw: Any, *, for_prepare: bool = True) -> dict[str, Any]:
    """Check a composed ``task`` node against its family's schema; return it as a plain dict.

    ``for_prepare`` adds the family's cross-field checks of the preparation settings; training
    reads data already prepared (possibly with other settings), so it checks keys and values only.
    """
    module = family_module(raw.get("family") if isinstance(raw, Mapping) else None)
    cfg = check_schema(raw, {**TOP_SCHEMA, "prepare": module.PREPARE_SCHEMA}, "task")
    if for_prepare:
        module.check_config(cfg)
    return cfg


def load_task_config(task: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Compose and validate the task config ``config/task/TASK.yaml``; return a plain dict.

    Adds ``task`` (the config name) to the returned dict.
    """
    cfg = validate_task(compose_task(task, overrides))
    cfg["task"] = task
    return cfg


def split_sizes(task: Mapping[str, Any]) -> dict[str, int]:
    """Examples per split that ``hkt prepare`` will write for a task config, read from the config
    alone (before any data exists; what ``hkt plan`` counts evaluations with).

    A generated task states them (``prepare.splits``); a downloaded one has the official
    train/test counts and carves ``val_size`` from train. Empty where the config says neither.
    """
    prep = task.get("prepare") or {}
    if prep.get("splits"):
        return {str(k): int(v) for k, v in prep["splits"].items()}
    counts, val = prep.get("official_counts"), prep.get("val_size")
    if not counts:
        return {}
    sizes = {"train": int(counts["train"]), "test": int(counts["test"])}
    if val:
        sizes.update(train=sizes["train"] - int(val), val=int(val))
    return sizes
