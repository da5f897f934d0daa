"""The runs frame and validation curves from MLflow, for runs logged elsewhere (a cluster
against a tracking server): the same frame :mod:`hkt.runs_frame` builds from run records, of one
suite run (:mod:`hkt.report.suite_choice`).

Every column holds what the run's record holds (a test compares the two on real runs), except
these, which differ by nature:

* ``source``: the record's path, or ``mlflow:<run id>``;
* ``mlflow_tracking_uri``: the URI the run was logged to, or the one it was read from (the
  same unless the store moved or is reached another way, e.g. a server in front of the file);
* ``data_warning``: for a record, read from the data's metadata at aggregation (none once the
  data is deleted); in MLflow, the tag logged with the run.

Runs logged before ``hkt.train.finish.log_final`` logged what makes the rest equal fall back
to what MLflow has: ``steps`` the configured ``train.max_steps`` (an external baseline's:
none), ``created_at`` the start of the run (not the writing of its record), an external
baseline's ``wall_time_s`` none, and ``results_dir`` none (:mod:`hkt.report.suite_choice`).

Validation accuracy is one metric, ``val_accuracy``, logged at every evaluation (the curves),
and the best of it, the record's ``val_accuracy``, is the tag ``best_val_accuracy``
(:data:`hkt.mlflow_store.BEST_VAL_TAG`). Stores written before 0.2.0 are brought to that form
by ``scripts/migrate_results.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import polars as pl

from hkt.environment import DIGEST_TAG
from hkt.provenance import SuiteRun
from hkt.mlflow_store import BEST_VAL_TAG, SERIES_METRICS
from hkt.report.suite_choice import SuiteChoice, choose
from hkt.report.suite_run import EXPERIMENT_PREFIX
from hkt.runs_frame import (CURVE_COLUMNS, KEY, MIXER_FIELDS, RUN_COLUMNS, AggregateError, as_column,
                      as_float, as_int, as_str, frame, latest, run_budget, run_precision)


#: The validation curve's metric
CURVE_METRIC = SERIES_METRICS["val_acc"]


def client(uri: str) -> Any:
    """An MLflow client for the existing store ``uri`` (one error line if it cannot be read)."""
    from hkt.mlflow_store import open_client

    return open_client(uri, create=False)


def mlflow_experiments(mlflow: Any, names: Sequence[str] | None) -> list[Any]:
    """The experiments named (all ``hkt-*`` ones when ``names`` is empty)."""
    if names:
        exps = []
        for name in names:
            exp = mlflow.get_experiment_by_name(name)
            if exp is None:
                raise AggregateError(f"no MLflow experiment named '{name}' in the tracking store")
            exps.append(exp)
        return exps
    return [e for e in mlflow.search_experiments() if e.name.startswith("hkt-")
            and not e.name.startswith(EXPERIMENT_PREFIX)]  # not the suite runs' experiments


def _finished_runs(mlflow: Any, experiment_ids: list[str]) -> list[Any]:
    runs, token = [], None
    while True:
        page = mlflow.search_runs(experiment_ids, filter_string="attributes.status = 'FINISHED'",
                                  max_results=1000, page_token=token)
        runs.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return runs


def _ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")


def mixer_param(params: dict[str, Any], field: str) -> Any:
    """The run's ``model.mixer.FIELD`` param (None if it has none)."""
    return params.get(f"model.mixer.{field}")


def _param_value(text: str) -> Any:
    """An MLflow param (a string) as the value it was logged from, where it reads back as JSON
    (numbers, lists); else the string."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def best_val_accuracy(run: Any) -> float | None:
    """A run's best validation accuracy: its tag ``best_val_accuracy``."""
    return as_float(run.data.tags.get(BEST_VAL_TAG))


def mlflow_row(run: Any, uri: str, experiment: str) -> dict[str, Any] | None:
    """One runs-frame row from a finished MLflow run (None if it lacks the final metrics)."""
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    if "test_accuracy" not in metrics or "task" not in tags or "model" not in tags:
        return None
    p = params.get
    steps = as_int(metrics.get("steps", p("train.max_steps")))
    own = {k.removeprefix("model."): _param_value(v) for k, v in params.items()
           if k.startswith("model.") and k != "model.name" and "." not in k.removeprefix("model.")}
    if p("train.epochs") is not None:
        own["epochs"] = _param_value(p("train.epochs"))
    return {
        "task": tags["task"], "length": as_int(p("task.max_length")), "model": tags["model"],
        "variant": tags.get("variant", "main"),
        "seed": as_int(tags.get("seed", p("seed"))),
        "profile": tags.get("profile"), "external": tags.get("external"),
        "budget": run_budget(profile=tags.get("profile"), steps=steps,
                             batch_size=as_int(p("train.batch_size")),
                             train_examples=as_int(metrics.get("train_examples")),
                             external=tags.get("external"), settings=own),
        **SuiteRun.from_tags(tags).fields(),
        "n_params": as_int(metrics.get("n_params", p("n_params"))),
        "steps": steps,
        "best_step": as_int(metrics.get("best_step")),
        "val_accuracy": best_val_accuracy(run),
        "test_accuracy": as_float(metrics.get("test_accuracy")),
        "test_examples": as_int(metrics.get("test_examples")),
        "train_examples": as_int(metrics.get("train_examples")),
        "batch_size": as_int(p("train.batch_size")), "lr": as_float(p("optim.lr")),
        "ms_per_step": as_float(metrics.get("ms_per_step")),
        "wall_time_s": as_float(metrics.get("wall_time_s")), "device": tags.get("device"),
        "precision": run_precision(tags.get("precision"), p("train.precision"), tags.get("device")),
        "d_model": as_int(p("model.d_model")), "n_layers": as_int(p("model.n_layers")),
        "d_ffn": as_int(p("model.d_ffn")),
        **{k: as_column(mixer_param(params, k), dtype) for k, dtype in MIXER_FIELDS.items()},
        "mlflow_run_id": run.info.run_id, "mlflow_tracking_uri": uri,
        "mlflow_experiment": experiment,
        "created_at": tags.get("created_at") or _ms_iso(run.info.start_time),
        "source": f"mlflow:{run.info.run_id}",
        "env_digest": tags.get(DIGEST_TAG), "git_commit": as_str(tags.get("git_commit")),
        "data_warning": tags.get("data_warning"),
    }


def curve(mlflow: Any, run: Any) -> list[Any]:
    """The validation accuracy at every evaluation of ``run``: its metric ``val_accuracy``."""
    return mlflow.get_metric_history(run.info.run_id, CURVE_METRIC)


def runs_from_mlflow(uri: str, experiments: Sequence[str] | None = None, *,
                     choice: SuiteChoice = SuiteChoice(), curves: bool = True
                     ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The runs frame and validation curves of the finished runs in MLflow ``experiments`` that
    belong to the suite run ``choice`` names, or to the only one present.

    ``uri`` is a tracking URI (``sqlite:///results/mlflow.db``, ``http://server:5000``);
    ``experiments`` defaults to every experiment whose name starts with ``hkt-``. A run counts
    when it finished and logged ``test_accuracy`` (what ``hkt train`` logs last). Raises
    :class:`AggregateError`, listing the suite runs present, when ``choice`` matches none or
    several of them (:func:`hkt.report.suite_choice.choose`).
    """
    mlflow = client(uri)
    try:
        exps = mlflow_experiments(mlflow, experiments)
    except AggregateError:
        raise
    except Exception as exc:  # noqa: BLE001 - any store error: say where
        raise AggregateError(f"cannot read MLflow experiments at {uri}: "
                             f"{str(exc).splitlines()[0]}") from None
    found: list[tuple[Any, dict[str, Any], SuiteRun]] = []
    for exp in exps:
        for run in _finished_runs(mlflow, [exp.experiment_id]):
            row = mlflow_row(run, uri, exp.name)
            if row is not None:
                found.append((run, row, SuiteRun.from_tags(run.data.tags)))
    chosen = choose(Counter(suite_run for *_, suite_run in found), choice,
                    f"the MLflow store {uri}")
    found = [f for f in found if f[2] == chosen]
    curve_rows = []
    for run, row, _ in found:
        if curves and not run.data.tags.get("external"):
            for m in curve(mlflow, run):
                curve_rows.append({**{k: row[k] for k in (*KEY, "source")},
                                   "step": int(m.step), "val_accuracy": float(m.value)})
    runs = latest(frame([row for _, row, _ in found], RUN_COLUMNS))
    curves_df = frame(curve_rows, CURVE_COLUMNS)
    if not runs.is_empty() and not curves_df.is_empty():
        # keep only the curves of the runs kept (a rerun replaces an older run)
        curves_df = curves_df.join(runs.select("source"), on="source", how="semi")
    return runs, curves_df
