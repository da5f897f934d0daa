"""The MLflow audit: every run record's MLflow run exists, holds the record's final metrics and
belongs to the record's suite run. Runs are looked up by the id in each record, not by
experiment, so other suite runs on the same server do not enter it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from hkt.provenance import RESULTS_DIR_TAG, SUITE_TAG, SuiteRun
from hkt.report.mlflow_runs import best_val_accuracy, client as mlflow_client


def check_mlflow(records: Sequence[dict[str, Any]], tracking_uri: str | None = None,
                 tol: float = 1e-9) -> pl.DataFrame:
    """Check that every record's MLflow run exists and holds the record's final metrics.

    Compares ``val_accuracy`` (the run's tag ``best_val_accuracy``:
    :func:`~hkt.report.mlflow_runs.best_val_accuracy`), ``test_accuracy`` and ``n_params``, and
    the suite run (``suite``,
    ``results_dir``) where the record names it: a run directory copied from another results
    directory resumes, and re-tags, that directory's MLflow run. ``tracking_uri`` overrides
    the URI stored in the records (runs moved to another store). Status per record: ``ok``,
    ``missing`` (no such run), ``mismatch`` (detail names the metric), ``unreachable`` or
    ``no mlflow`` (the record has no MLflow run, e.g. an external baseline: not an error).
    """
    clients: dict[str, Any] = {}
    rows = []
    for rec in records:
        run_id = rec.get("mlflow_run_id")
        uri = tracking_uri or rec.get("mlflow_tracking_uri")
        row = {"task": rec.get("task"), "model": rec.get("model"), "variant": rec.get("variant"),
               "seed": rec.get("seed"), "mlflow_run_id": run_id, "status": "ok", "detail": "",
               "record": rec.get("_path")}
        if not run_id or not uri:
            row.update(status="no mlflow", detail="the record names no MLflow run")
            rows.append(row)
            continue
        try:
            client = clients.get(uri) or clients.setdefault(uri, mlflow_client(uri))
            run = client.get_run(run_id)
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            missing = "not found" in text.lower() or "RESOURCE_DOES_NOT_EXIST" in text
            row.update(status="missing" if missing else "unreachable",
                       detail=text.splitlines()[0][:200] if text else type(exc).__name__)
            rows.append(row)
            continue
        problems = []
        if run.info.lifecycle_stage == "deleted":
            problems.append("run is deleted")
        for key in ("val_accuracy", "test_accuracy", "n_params"):
            want = rec.get(key)
            got = best_val_accuracy(run) if key == "val_accuracy" else run.data.metrics.get(key)
            if want is None:
                continue
            if got is None:
                problems.append(f"{key} not logged")
            elif abs(float(got) - float(want)) > tol:
                problems.append(f"{key}: record {want} vs MLflow {got}")
        tagged = SuiteRun.from_tags(run.data.tags).fields()
        recorded = SuiteRun.from_record(rec).fields()
        for key in (SUITE_TAG, RESULTS_DIR_TAG):
            if key in rec and recorded[key] != tagged[key]:
                problems.append(f"{key}: record {recorded[key]} vs MLflow {tagged[key]}")
        if problems:
            row.update(status="mismatch", detail="; ".join(problems))
        rows.append(row)
    return pl.DataFrame(rows, schema={"task": pl.String, "model": pl.String, "variant": pl.String,
                                      "seed": pl.Int64, "mlflow_run_id": pl.String,
                                      "status": pl.String, "detail": pl.String,
                                      "record": pl.String}, orient="row")


def check_display(check: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "model", "variant", "seed", "MLflow run", "status", "detail"]
    rows = [[str(r[k]) if r[k] is not None else "" for k in
             ("task", "model", "variant", "seed", "mlflow_run_id", "status", "detail")]
            for r in check.iter_rows(named=True)]
    return header, rows
