"""The report's statistical settings, from config/report/settings.yaml: the confidence of every interval
(``confidence``) and the per-example readings' (``per_example``): one place for each number."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from hkt.errors import ConfigValueError
from hkt.runs_frame import AggregateError
from hkt.value_checks import integer, number

__all__ = ["Settings", "load_settings", "confidence", "SETTINGS_FILE"]

#: The report's settings file, under config/ (the minimum budget of the claims is read there too).
SETTINGS_FILE = "report/settings.yaml"


@dataclass(frozen=True)
class Settings:
    """``confidence`` and ``per_example`` of config/report/settings.yaml."""

    confidence: float
    depth_groups: int
    length_buckets: int
    min_bucket_examples: int
    named_runs: int

    @property
    def level(self) -> str:
        """The intervals' level, ``95%``."""
        return f"{100 * self.confidence:g}%"

    @property
    def alpha(self) -> str:
        """The tests' level, ``5%``."""
        return f"{100 * (1 - self.confidence):.3g}%"


def read_mapping(path: Path, what: str = "the report's settings") -> dict[str, Any]:
    """The YAML mapping of a report config (``what`` names it in errors): one reader for
    settings.yaml and claims.yaml, whose errors name the file."""
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise AggregateError(f"cannot read {what} {path}: {e}") from e
    if not isinstance(cfg, dict):
        raise AggregateError(f"{path} is not a mapping of {what}")
    return cfg


def load_settings(path: Path | None = None) -> Settings:
    """The settings of config/report/settings.yaml (or ``path``), or an :class:`AggregateError` naming
    the key that is missing or out of range."""
    from hkt.config_compose import config_dir

    path = path or config_dir() / SETTINGS_FILE
    cfg = read_mapping(path)
    each = cfg.get("per_example") or {}
    try:
        return Settings(
            confidence=number(cfg.get("confidence"), "confidence", 0, 1, lo_open=True,
                              hi_open=True),
            depth_groups=integer(each.get("depth_groups"), "per_example.depth_groups", 2),
            length_buckets=integer(each.get("length_buckets"), "per_example.length_buckets", 1),
            min_bucket_examples=integer(each.get("min_bucket_examples"),
                                        "per_example.min_bucket_examples", 2),
            named_runs=integer(each.get("named_runs"), "per_example.named_runs", 1))
    except (ConfigValueError, AttributeError) as e:
        raise AggregateError(f"{path}: {e}") from e


@lru_cache(maxsize=1)
def confidence() -> float:
    """The confidence of every interval (config/report/settings.yaml ``confidence``), read once."""
    return load_settings().confidence
