"""What a training run's MLflow run says of it beside its metrics: its tags (what it is, where
and from what it ran), its params (its config, the data actually used) and its suite run. Pure
functions of the config and the run's facts; :mod:`hkt.train.tracking` sends them."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import hkt
from hkt.config import flatten
from hkt.data.provenance import provenance_warning
from hkt.provenance import SuiteRun, code_digest

__all__ = ["results_dir_of", "suite_run", "data_tags", "run_tags", "run_params"]


def results_dir_of(tracking_cfg: Any) -> str:
    return str(tracking_cfg.get("results_dir") or "results")


def suite_run(tracking_cfg: Any) -> SuiteRun:
    """The suite run of a training run: ``$HKT_SUITE`` (the one channel by which a job learns
    its suite) and ``tracking.results_dir`` (made absolute). Its tags and record fields tell the
    run from those of other suite runs on one tracking server."""
    return SuiteRun.of_job(results_dir_of(tracking_cfg))


def data_tags(meta: dict[str, Any]) -> dict[str, str]:
    """Tags on the provenance of a run's data, from its Parquet metadata (``meta``, the train
    split's): ``data_official`` where the source says, and ``data_warning`` when the data was
    prepared from an alternative to the official archive (:func:`provenance_warning`)."""
    src = meta.get("source") if isinstance(meta.get("source"), dict) else {}
    tags = {} if "official" not in src else {"data_official": str(bool(src["official"])).lower()}
    warning = provenance_warning(meta)
    if warning:
        tags["data_warning"] = warning
    return tags


def run_tags(cfg: Any, *, device: str, git: tuple[str | None, bool | None], run_dir: Path,
             data_dir: Path, checksums: dict[str, str],
             data_meta: dict[str, Any] | None = None, execution: dict[str, str] | None = None
             ) -> dict[str, str]:
    """The MLflow tags of a training run: what it is (task, model, variant, seed, profile), its
    suite run (:func:`suite_run`), where and from what it ran (device, host, versions, git state,
    directories, data SHA-256, the data's provenance from its metadata ``data_meta``) and how
    (``execution``: precision, threads, GPU sharing; :func:`hkt.train.execution.execution_tags`)."""
    import torch  # loaded already when a run starts; this module itself stays torch-free

    git_commit, git_dirty = git
    return {
        "task": cfg.task.family, "model": cfg.tracking.model, "variant": cfg.variant,
        "seed": str(cfg.seed), "profile": cfg.train.profile, **suite_run(cfg.tracking).tags(),
        "device": device, "hostname": socket.gethostname(),
        "torch_version": torch.__version__, "cuda_version": str(torch.version.cuda),
        "hkt_version": hkt.__version__, "git_commit": str(git_commit),
        "git_dirty": str(git_dirty), "code_digest": code_digest(), "run_dir": str(run_dir.resolve()),
        "data_dir": str(data_dir.resolve()), **{f"data_sha256.{s}": h for s, h in checksums.items()},
        **data_tags(data_meta or {}), **(execution or {}),
    }


def run_params(cfg_dict: dict[str, Any], n_params: int,
               data_params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The MLflow params of a training run: its flattened config (tracking settings aside) and
    its parameter count. ``data_params`` (the ``params`` of the data's Parquet metadata: how
    ``hkt prepare`` made it) replace the task config's ``task.prepare.*`` defaults, so that the
    params describe the data actually used (smoke data has 2000 training examples, not the
    config's 96000)."""
    params = {k: v for k, v in flatten(cfg_dict).items() if not k.startswith("tracking.")}
    if data_params is not None:
        params = {k: v for k, v in params.items() if not k.startswith("task.prepare.")}
        params.update(flatten({"task": {"prepare": data_params}}))
    params["n_params"] = n_params
    return params
