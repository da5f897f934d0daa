"""Task configs: compose ``config/task/TASK.yaml`` with Hydra and validate it before any work.

The config directory is ``<repo>/config`` (found next to the package) or ``$HKT_CONFIG_DIR``.
A task config has ``name`` (the task family: listops, imdb, cifar10), ``num_classes``,
``max_length`` and a ``prepare`` node with every preparation parameter. Overrides use Hydra's
syntax and may be written relative to the task (``prepare.seed=1``) or with the ``task.``
prefix used by training configs (``task.prepare.seed=1``).

Validation is strict: an unknown key, a missing key or a bad value raises
:class:`hkt.errors.ConfigError` naming the key (``task.prepare.splits.train``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hkt.config import config_dir
from hkt.errors import ConfigError

Validator = Callable[[Any, str], Any]


def available_tasks() -> list[str]:
    """Names of the task configs (``config/task/*.yaml``)."""
    return sorted(p.stem for p in (config_dir() / "task").glob("*.yaml"))


def _normalise_override(ov: str) -> str:
    """Prefix a task-relative override with ``task.`` (keeping ``+``, ``++`` and ``~``)."""
    m = re.match(r"^(\+\+|\+|~)?(.*)$", ov)
    prefix, body = m.group(1) or "", m.group(2)
    if body.startswith("task.") or body.startswith("task="):
        return ov
    return f"{prefix}task.{body}"


def compose_task(task: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Compose ``config/task/TASK.yaml`` with overrides; return the resolved task node as a dict.

    Uses :func:`hkt.config.compose`, so unknown keys, unparsable overrides, broken
    interpolations and values of the wrong type raise ConfigError naming the key. Values are
    then checked by :func:`load_task_config`.
    """
    from omegaconf import OmegaConf

    from hkt.config import compose

    cdir = config_dir()
    if not (cdir / "task" / f"{task}.yaml").is_file():
        known = ", ".join(available_tasks()) or "none"
        raise ConfigError(f"unknown task {task!r}: no {cdir / 'task' / (task + '.yaml')} (available: {known})")
    cfg = compose(f"task/{task}", [_normalise_override(o) for o in overrides])
    return OmegaConf.to_container(cfg["task"], resolve=True)  # type: ignore[return-value]


# ---- validation -------------------------------------------------------------------------

def _err(key: str, what: str, value: Any) -> ConfigError:
    return ConfigError(f"task.{key} must be {what}, got {value!r}")


def pos_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _err(key, "a positive integer", value)
    return value


def nonneg_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _err(key, "an integer >= 0", value)
    return value


def boolean(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise _err(key, "true or false", value)
    return value


def probability(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise _err(key, "a number in [0, 1]", value)
    return float(value)


def text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise _err(key, "a non-empty string", value)
    return value


def optional(inner: Validator) -> Validator:
    def check(value: Any, key: str) -> Any:
        return None if value is None else inner(value, key)

    return check


def hexdigest(n: int) -> Validator:
    def check(value: Any, key: str) -> str:
        if not isinstance(value, str) or not re.fullmatch(rf"[0-9a-fA-F]{{{n}}}", value):
            raise _err(key, f"a {n}-character hex digest", value)
        return value.lower()

    return check


def str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _err(key, "a non-empty list of strings", value)
    if len(set(value)) != len(value):
        raise _err(key, "a list without duplicates", value)
    return value


def float_list(n: int) -> Validator:
    def check(value: Any, key: str) -> list[float]:
        if (not isinstance(value, list) or len(value) != n
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
            raise _err(key, f"a list of {n} numbers", value)
        return [float(v) for v in value]

    return check


def validate(cfg: Any, schema: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Check ``cfg`` against ``schema`` (key → validator or nested schema); return the checked dict."""
    where = prefix.rstrip(".") or "task"
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"task.{where} must be a mapping, got {cfg!r}" if prefix else f"task config must be a mapping, got {cfg!r}")
    unknown = sorted(set(cfg) - set(schema))
    if unknown:
        raise ConfigError(f"unknown key task.{prefix}{unknown[0]} (known keys of task.{where}: "
                          f"{', '.join(sorted(schema))})" if prefix else
                          f"unknown key task.{unknown[0]} (known keys: {', '.join(sorted(schema))})")
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        full = f"{prefix}{key}"
        if key not in cfg:
            raise ConfigError(f"missing key task.{full}")
        if isinstance(spec, Mapping):
            out[key] = validate(cfg[key], spec, prefix=f"{full}.")
        else:
            out[key] = spec(cfg[key], full)
    return out


TOP_SCHEMA: dict[str, Any] = {"name": text, "num_classes": pos_int, "max_length": pos_int}


def load_task_config(task: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Compose and validate the task config ``config/task/TASK.yaml``; return a plain dict.

    The family (``name``) selects the preparer, whose ``PREPARE_SCHEMA`` validates ``prepare``.
    Adds ``task`` (the config name) to the returned dict.
    """
    from hkt.data.prepare import family_module

    raw = compose_task(task, overrides)
    name = raw.get("name") if isinstance(raw, Mapping) else None
    module = family_module(name)  # raises ConfigError for an unknown family
    schema = dict(TOP_SCHEMA)
    schema["prepare"] = module.PREPARE_SCHEMA
    cfg = validate(raw, schema)
    module.check_config(cfg)
    cfg["task"] = task
    return cfg
