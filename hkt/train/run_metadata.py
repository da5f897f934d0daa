"""What a training run's MLflow run says of itself, beside its metrics: pure functions of the
config and the run's facts, which :mod:`hkt.train.tracking` logs. Its tags (what it is, where
and from what it ran: :func:`run_tags`, :func:`data_tags`), its params (its config, the data
actually used: :func:`run_params`), its suite run (:func:`suite_run`, from the results directory
the workflow sets, :data:`RESULTS_ENV`; an external job's experiment is :data:`EXPERIMENT_ENV`),
its model's name (:func:`model_name`), its data's digest (:func:`dataset_digest`), and the view of
its experiment's runs list with the columns a comparison needs (:data:`COMPARISON_VIEW`).
Torch-free and mlflow-free at import."""

from __future__ import annotations

import hashlib
import json
import re
import socket
from pathlib import Path
from typing import Any

import hkt
from hkt.config_compose import flatten
from hkt.data.source_warning import provenance_warning
from hkt.mlflow_store import BEST_VAL_TAG
from hkt.provenance import SuiteRun, code_digest

__all__ = ["EXPERIMENT_ENV", "RESULTS_ENV", "COMPARISON_VIEW", "comparison_view_tags",
           "results_dir_of", "suite_run", "data_tags", "run_tags", "run_params", "model_name",
           "dataset_digest"]

# The MLflow experiment of a suite's runs, for commands outside `hkt train` (external baselines):
# the workflow sets this variable to experiment_name(profile, task) for every external job.
EXPERIMENT_ENV = "HKT_MLFLOW_EXPERIMENT"
# The results directory of a suite's runs: the workflow sets it (absolute) for every job;
# config/train.yaml reads it into tracking.results_dir, external commands read it here.
RESULTS_ENV = "HKT_RESULTS_DIR"

#: The view of an experiment's runs list that a comparison needs, opened by the address
#: ``#/experiments/<id>/runs?viewStateShareKey=<key>`` (docs/tracking.md): MLflow 3.17 has no
#: default columns per experiment, but its "share view" state is an experiment tag,
#: ``mlflow.sharedViewState.<key>``, which :func:`comparison_view_tags` makes and the tracker writes. ``columns``: (kind, name), kind
#: one of attributes (the UI's own columns: Dataset, Models, Source), metrics, tags, params; the
#: UI groups them by kind, each group in alphabetical order; ``order_by``: the sort, descending.
COMPARISON_VIEW = {
    "key": "hkt-compare",
    "columns": (("attributes", "Models"), ("metrics", "test_accuracy"), ("tags", BEST_VAL_TAG),
                ("metrics", "best_step"), ("metrics", "n_params")),
    "order_by": ("metrics", "test_accuracy"),
}
SHARED_VIEW_PREFIX = "mlflow.sharedViewState."  # MLflow UI's tag of a shared view


def _column(kind: str, name: str) -> str:
    """A runs-table column as the MLflow UI names it (its ``makeCanonicalSortKey``)."""
    return f"{kind}.`{name}`"


def comparison_view_tags() -> dict[str, str]:
    """The experiment tag that holds :data:`COMPARISON_VIEW` as MLflow's UI reads a shared view:
    JSON of its search facets (the sort) and UI state (the chosen columns)."""
    state = {"selectedColumns": [_column(*c) for c in COMPARISON_VIEW["columns"]],
             "orderByKey": _column(*COMPARISON_VIEW["order_by"]), "orderByAsc": False}
    return {SHARED_VIEW_PREFIX + COMPARISON_VIEW["key"]: json.dumps(state)}


def results_dir_of(tracking_cfg: Any) -> str:
    """``tracking.results_dir``, where the workflow put it (else ``results``)."""
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
    (``execution``: precision, threads, GPU sharing; :func:`hkt.train.run_conditions.execution_tags`)."""
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


#: What MLflow 3 refuses in a logged model's name (mlflow.utils.validation)
_NOT_IN_MODEL_NAME = re.compile(r"""[/:.%"']""")


def model_name(run_name: str) -> str:
    """The name of a run's logged model: its run's name (``listops-hkt-main-s0``), each
    character MLflow refuses in a model name (``/:.%"'``) as ``_``; ``model`` for no name."""
    return _NOT_IN_MODEL_NAME.sub("_", run_name) or "model"


def dataset_digest(checksums: dict[str, str]) -> str:
    """One short digest of a prepared data directory: of its splits' SHA-256 (MLflow keeps at
    most 36 characters); two runs on other data of the same task show different ones."""
    text = "\n".join(f"{split}:{checksums[split]}" for split in sorted(checksums))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
