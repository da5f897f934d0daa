"""Compose and validate the workflow's training configs before any job runs, and digest them.

The workflow calls :func:`train_config_digests` once when it starts, over the overrides of every
training job of the DAG: a bad ``train_overrides`` entry, a broken variant file or an impossible
model setting stops it with one ``hkt: error:``-style message before the first data is prepared.
Each digest is a training job's rerun trigger (a Snakemake param): it changes exactly when the
composed config changes, whichever file the change was in, without the workflow knowing which
files Hydra composes.

Hydra composition costs a fraction of a second per config, so configs are composed once per
distinct override set, without the seed (it only sets the ``seed`` key, and is part of the job's
output path anyway).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from hkt.errors import ConfigError

__all__ = ["seedless", "config_digest", "train_config_digest", "train_config_digests", "check_analysable",
           "job_configs"]


def seedless(overrides: Sequence[str]) -> tuple[str, ...]:
    """The overrides without ``seed=…``: the key under which a config is composed once."""
    return tuple(o for o in overrides if not o.startswith("seed="))


def config_digest(cfg: Any) -> str:
    """A digest of what defines a run in a training config, composed or saved (a run's
    ``config.yaml``, a record's ``config``): tracking settings excluded, as when ``hkt train``
    compares configs. Every key counts under its current name: a key renamed or added changes
    every digest (``scripts/migrate_results.py`` brings an older results directory along)."""
    from hkt.train.run_config import strip_for_compare

    text = json.dumps(strip_for_compare(cfg), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def train_config_digest(overrides: Sequence[str]) -> str:
    """Compose and validate the training config of ``overrides``; return its
    :func:`config_digest`.

    Raises :class:`ConfigError` naming the key, exactly as ``hkt train`` would.
    """
    from hkt.train.run_config import load_config

    return config_digest(load_config(list(overrides)))


def train_config_digests(override_sets: Iterable[Sequence[str]]) -> dict[tuple[str, ...], str]:
    """:func:`train_config_digest` of each distinct :func:`seedless` override set.

    The first failure raises :class:`ConfigError` whose message starts with the ``hkt train``
    overrides that failed, so the user sees which job's config is wrong.
    """
    digests: dict[tuple[str, ...], str] = {}
    for overrides in override_sets:
        key = seedless(overrides)
        if key in digests:
            continue
        try:
            digests[key] = train_config_digest(key)
        except ConfigError as exc:
            raise ConfigError(f"hkt train {' '.join(key)}: {exc}") from None
    return digests


def check_analysable(models: Iterable[str]) -> None:
    """Refuse, before any job runs, an ``analyze.models`` entry whose mixer exposes no
    queries, keys or scores (``supports_internals``): ``hkt analyze`` could not read it. A model
    is a model file's name; its mixer is the one that file builds (a copy of ``mha.yaml``
    builds ``mha``)."""
    from hkt.config_compose import config_dir
    from hkt.mixers.catalog import mixer_class
    from hkt.workflow.grid import read_model_mixer

    for model in models:
        mixer = read_model_mixer(config_dir() / "model" / f"{model}.yaml")
        if not getattr(mixer_class(mixer), "supports_internals", False):
            builds = f" ({mixer})" if mixer != model else ""
            raise ConfigError(f"analyze.models names '{model}', whose token mixer{builds} exposes "
                              "no queries, keys or scores, so `hkt analyze` cannot analyse it; "
                              "remove it from analyze.models")


def job_configs(grid: Any, jobs: Iterable[Any] | None = None) -> dict[Any, Any]:
    """The composed ``hkt train`` config (tracking off) of each of ``jobs`` (default: every
    training job of ``grid``, a :class:`~hkt.workflow.grid.Grid`), composed once per seedless
    override set; the suite's prepare overrides of a task's splits apply to its evaluation
    sizes. What ``hkt plan`` and ``hkt doctor`` time: the workflow's own jobs."""
    from hkt.train.run_config import load_config

    composed: dict[tuple[str, ...], Any] = {}
    out = {}
    for job in grid.train_jobs() if jobs is None else jobs:
        prep = [f"task.{o}" for o in (grid.tasks[job.task] or {}).get("prepare", [])
                if str(o).startswith("prepare.splits.")]
        key = (*seedless(grid.train_overrides(job)), *prep)
        if key not in composed:
            composed[key] = load_config([*key, "tracking.enabled=false"])
        out[job] = composed[key]
    return out
