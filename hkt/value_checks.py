"""The value checks every config uses, and the schema walker for plain config nodes.

Each check takes ``(value, key, options…)`` and returns the value, or raises
:class:`hkt.errors.ConfigValueError` naming the key. The typed module configs (``HKTConfig``,
``EncoderConfig``, …) call them in ``__post_init__``; plain nodes (task, optim, train budget)
map each key to one (bound with :func:`spec`) and are checked by :func:`check_schema`.
Floats must be finite and within float32's range (torch computes in it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hkt.errors import ConfigError, ConfigValueError, did_you_mean

__all__ = ["Check", "integer", "number", "choice", "boolean", "text", "label", "hexdigest",
           "str_list", "number_list", "spec", "optional", "pos_int", "nonneg_int", "probability",
           "check_schema"]

Check = Callable[[Any, str], Any]
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def integer(value: Any, key: str, lo: int | None = None) -> int:
    """An int (not a bool), >= ``lo`` when given."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigValueError(key, value, "must be an integer")
    if lo is not None and value < lo:
        raise ConfigValueError(key, value, f"must be >= {lo}")
    return value


def number(value: Any, key: str, lo: float | None = None, hi: float | None = None, *,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite int or float within the bounds; float32 must hold it (torch computes in it)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigValueError(key, value, "must be a number")
    if not math.isfinite(value) or abs(value) > _FLOAT32_MAX:
        raise ConfigValueError(key, value, "must be a finite number (nan, inf and values beyond "
                                           "float32's range ±3.4e38 are not usable)")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ConfigValueError(key, value, f"must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and (value >= hi if hi_open else value > hi):
        raise ConfigValueError(key, value, f"must be {'<' if hi_open else '<='} {hi}")
    return value


_FLOAT32_MAX = 3.4028234663852886e38


def choice(value: Any, key: str, options: Sequence[Any]) -> Any:
    if value not in options:
        raise ConfigValueError(key, value, f"must be one of {', '.join(map(str, options))}"
                               + did_you_mean(value, options))
    return value


def boolean(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigValueError(key, value, "must be true or false")
    return value


def text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigValueError(key, value, "must be a non-empty string")
    return value


def label(value: Any, key: str) -> str:
    if not isinstance(value, str) or not _LABEL.match(value):
        raise ConfigValueError(key, value, "must be a non-empty label of letters, digits, "
                                           "'_', '-', '.', '+'")
    return value


def hexdigest(value: Any, key: str, n: int) -> str:
    if not isinstance(value, str) or not re.fullmatch(rf"[0-9a-fA-F]{{{n}}}", value):
        raise ConfigValueError(key, value, f"must be a {n}-character hex digest")
    return value.lower()


def str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigValueError(key, value, "must be a non-empty list of strings")
    if len(set(value)) != len(value):
        raise ConfigValueError(key, value, "must be a list without duplicates")
    return value


def number_list(value: Any, key: str, n: int, lo: float | None = None,
                hi: float | None = None, *, hi_open: bool = False) -> list[float]:
    if not isinstance(value, list) or len(value) != n:
        raise ConfigValueError(key, value, f"must be a list of {n} numbers")
    return [float(number(v, f"{key}[{i}]", lo, hi, hi_open=hi_open)) for i, v in enumerate(value)]


def spec(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Check:
    """A schema entry: ``check`` with its options bound, called as ``(value, key)``."""
    return lambda value, key: check(value, key, *args, **kwargs)


def optional(inner: Check) -> Check:
    """``inner``, or null."""
    return lambda value, key: None if value is None else inner(value, key)


# ready-made schema entries
pos_int: Check = spec(integer, lo=1)
nonneg_int: Check = spec(integer, lo=0)
probability: Check = spec(number, lo=0, hi=1)


def check_schema(cfg: Any, schema: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Check the mapping ``cfg`` at ``prefix`` against ``schema`` (key -> check or nested schema).

    Every key must be known and present. Returns the checked values as a plain dict.
    """
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    if not isinstance(cfg, Mapping):
        raise ConfigValueError(prefix, cfg, "must be a mapping")
    unknown = sorted(set(cfg) - set(schema))
    if unknown:
        where = f" of {prefix}" if prefix else ""
        raise ConfigError(f"unknown config key '{prefix + '.' if prefix else ''}{unknown[0]}' "
                          f"(known keys{where}: {', '.join(sorted(schema))})"
                          + did_you_mean(unknown[0], schema, f"{prefix}." if prefix else ""))
    out: dict[str, Any] = {}
    for key, entry in schema.items():
        full = f"{prefix}.{key}" if prefix else key
        if key not in cfg:
            raise ConfigError(f"config key '{full}' is missing (the config files are incomplete)")
        out[key] = (check_schema(cfg[key], entry, full) if isinstance(entry, Mapping)
                    else entry(cfg[key], full))
    return out
