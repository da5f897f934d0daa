"""The suite as one MLflow run: what the aggregate step adds up, where an auditor finds it.

The runs of a suite live in one experiment per profile and task (``hkt-cpu-listops``, …); the
result they add up to spans them all, so it gets an experiment of its own, ``hkt-suite-<suite>``,
one run per *suite run* (suite and results directory, :class:`hkt.provenance.SuiteRun`). An
aggregate run again (a resumed or extended suite) updates that run rather than adding one.
It holds ``summary.md``, the tables, the figures (and ``report.html`` once
``snakemake --report`` has built it) as artifacts; per task the headline numbers HKT − MHA
(pp) and Welch's p as metrics; the suite, results directory, commit and environment digest as
tags; and, as its description, the main table with a link to every run behind it. Each of those
runs gets the tags ``hkt.suite_run_id`` and ``hkt.suite_run_experiment`` pointing back (MLflow's
nested runs live in one experiment, so a parent-run tag across experiments would not show).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl

from hkt.provenance import RESULTS_DIR_TAG, SUITE_TAG, SuiteRun
from hkt.report.aggregate_outputs import SUMMARY
from hkt.report.writers import markdown

__all__ = ["EXPERIMENT_PREFIX", "KIND_TAG", "suite_experiment", "log_suite_run"]

EXPERIMENT_PREFIX = "hkt-suite-"  # not a runs experiment: `hkt aggregate --mlflow` skips it
KIND_TAG = "hkt.kind"  # "suite" on a suite run
LINK_TAGS = ("hkt.suite_run_id", "hkt.suite_run_experiment")


def suite_experiment(suite: str) -> str:
    """The experiment of a suite's suite runs (``hkt-suite-none`` for runs of no suite)."""
    return f"{EXPERIMENT_PREFIX}{suite}"


def _one(runs: pl.DataFrame, column: str) -> str | None:
    """The column's one value over the runs (None where absent, ``mixed`` where several): the
    commit and environment tags."""
    if column not in runs.columns:
        return None
    values = {v for v in runs[column].to_list() if v is not None}
    return next(iter(values)) if len(values) == 1 else ("mixed" if values else None)


def headline_metrics(gap: pl.DataFrame) -> dict[str, float]:
    """Per task and T: ``<task>_T<length>.hkt_minus_mha_pp`` and ``….p_value``."""
    metrics = {}
    for r in gap.iter_rows(named=True):
        key = re.sub(r"[^A-Za-z0-9_]", "_", f"{r['task']}_T{r['length']}")
        for name, value in (("hkt_minus_mha_pp", r["ours_pp"]), ("p_value", r.get("p_value"))):
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                metrics[f"{key}.{name}"] = float(value)
    return metrics


def _description(runs: pl.DataFrame, main_md: str, suite: str | None, results: str | None) -> str:
    lines = [f"Suite `{suite}` in `{results}`: the tables, figures and summary are this run's "
             "artifacts.", "", main_md, "", "Runs behind it:", ""]
    for r in runs.sort("task", "model", "variant", "seed").iter_rows(named=True):
        name = f"{r['task']}-{r['model']}-{r['variant']}-s{r['seed']}"
        if r.get("mlflow_run_id") and r.get("mlflow_experiment_id"):
            lines.append(f"- [{name}](#/experiments/{r['mlflow_experiment_id']}/runs/"
                         f"{r['mlflow_run_id']})")
        else:
            lines.append(f"- {name} (no MLflow run)")
    return "\n".join(lines)


def log_suite_run(uri: str, out: Path, runs: pl.DataFrame, gap: pl.DataFrame,
                  main_display: tuple[list[str], list[list[str]]],
                  suite_run: SuiteRun) -> tuple[str, str]:
    """Create or update ``suite_run``'s run (its suite as the aggregate was given it, never read
    from the runs) in the store ``uri`` (see the module docstring); return its run id and
    experiment. ``runs`` are its runs; ``out`` holds what the aggregate wrote."""
    from hkt.mlflow_store import EXPERIMENT_TAGS, artifact_root, open_client, with_retry

    client = open_client(uri)
    suite, results = suite_run.suite, suite_run.results_dir
    name = suite_experiment(suite)
    exp = with_retry(client.get_experiment_by_name, name, what="reading the suite experiment")
    exp_id = exp.experiment_id if exp is not None else with_retry(
        client.create_experiment, name, tags=EXPERIMENT_TAGS, artifact_location=artifact_root(uri),
        what=f"creating experiment '{name}'")
    tags = {KIND_TAG: "suite", SUITE_TAG: str(suite), RESULTS_DIR_TAG: str(results),
            "git_commit": str(_one(runs, "git_commit")), "env_digest": str(_one(runs, "env_digest"))}
    query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items() if k != "git_commit"
                         and k != "env_digest")
    found = with_retry(client.search_runs, [exp_id], filter_string=query, max_results=1,
                       what="looking up the suite run")
    run_id = found[0].info.run_id if found else with_retry(
        client.create_run, exp_id, run_name=f"suite {suite}", tags=tags,
        what="creating the suite run").info.run_id
    ids = {}
    for exp_name in {e for e in runs["mlflow_experiment"].to_list() if e} \
            if "mlflow_experiment" in runs.columns else ():
        e = with_retry(client.get_experiment_by_name, exp_name, what="reading an experiment")
        if e is not None:
            ids[exp_name] = e.experiment_id
    linked = runs.with_columns(pl.col("mlflow_experiment").replace_strict(
        ids, default=None, return_dtype=pl.String).alias("mlflow_experiment_id")) \
        if "mlflow_experiment" in runs.columns else runs.with_columns(
            pl.lit(None, dtype=pl.String).alias("mlflow_experiment_id"))
    for key, value in {**tags, "mlflow.note.content": _description(
            linked, markdown(*main_display), suite, results)}.items():
        with_retry(client.set_tag, run_id, key, value[:60000], what="tagging the suite run")
    for key, value in headline_metrics(gap).items():
        with_retry(client.log_metric, run_id, key, value, what="logging a headline metric")
    for sub in ("tables", "figures"):
        if (out / sub).is_dir():
            with_retry(client.log_artifacts, run_id, str(out / sub), sub, what=f"logging {sub}/")
    for extra in (SUMMARY, "report.html"):
        if (out / extra).is_file():
            with_retry(client.log_artifact, run_id, str(out / extra), what=f"logging {extra}")
    for rid in (r for r in runs["mlflow_run_id"].to_list() if r) \
            if "mlflow_run_id" in runs.columns else ():
        for key, value in zip(LINK_TAGS, (run_id, exp_id)):
            with_retry(client.set_tag, rid, key, value, what="linking a run to its suite run")
    with_retry(client.set_terminated, run_id, "FINISHED", what="closing the suite run")
    return run_id, name
