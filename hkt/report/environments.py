"""Do the runs of one summary come from one software environment and one commit?

The runs frame carries each run's ``env_digest`` and ``git_commit``. :func:`mixed_warnings`
says (without reading anything else) when they differ; :func:`summary_section` writes the
"Environment" section of ``summary.md``, with a table of the packages that differ, read from
each environment's ``environment.json`` (beside a record, or the MLflow run's artifact).
Runs that record no digest (older records, external tools) are counted, not compared.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from hkt import environment
from hkt.report.writers import markdown

__all__ = ["mixed_warnings", "summary_section"]


def _counts(runs: pl.DataFrame, col: str) -> dict[str, int]:
    """``{value: number of runs}`` of a column, nulls (and the text "None") left out."""
    if col not in runs.columns:
        return {}
    values = [v for v in runs[col].to_list() if v not in (None, "", "None")]
    return {v: values.count(v) for v in sorted(set(values))}


def mixed_warnings(runs: pl.DataFrame) -> list[str]:
    """One line per way the runs disagree: several environment digests, several commits."""
    out = []
    for col, what in (("env_digest", "software environments"), ("git_commit", "git commits")):
        counts = _counts(runs, col)
        if len(counts) > 1:
            shown = ", ".join(f"{v[:12]} ({n} run{'s' * (n != 1)})" for v, n in counts.items())
            out.append(f"the {len(runs)} runs in these tables come from {len(counts)} different "
                       f"{what}: {shown}")
    return out


def _environment_of(row: dict[str, Any]) -> dict[str, Any] | None:
    """The environment.json of one run: beside its record, or its MLflow run's artifact."""
    source = row.get("source") or ""
    if source.startswith("mlflow:"):
        uri = row.get("mlflow_tracking_uri")
        if not uri:
            return None
        try:
            from mlflow.tracking import MlflowClient

            with tempfile.TemporaryDirectory() as tmp:
                path = MlflowClient(tracking_uri=uri).download_artifacts(
                    source[len("mlflow:"):], environment.ENV_FILE, tmp)
                return environment.load(path)
        except Exception:  # noqa: BLE001 - a run without the artifact: no package list
            return None
    return environment.load(Path(source).parent / environment.ENV_FILE) if source else None


def summary_section(runs: pl.DataFrame) -> list[str]:
    """Markdown lines: which environments and commits the runs come from, what differs."""

    envs, commits = _counts(runs, "env_digest"), _counts(runs, "git_commit")
    missing = len(runs) - sum(envs.values())
    lines = ["## Environment", ""]
    if len(envs) <= 1 and len(commits) <= 1:
        env = f"software environment `{next(iter(envs))}`" if envs else "no recorded environment"
        commit = f"commit `{next(iter(commits))[:12]}`" if commits else "no recorded commit"
        lines += [f"All runs: {env}, {commit}.", ""]
    for warning in mixed_warnings(runs):
        lines += [f"**Warning:** {warning[0].upper()}{warning[1:]}.", ""]
    if missing and envs:
        lines += [f"{missing} run(s) record no environment digest (older records or "
                  "external tools) and are not compared.", ""]
    if len(envs) > 1:
        loaded = {}
        for digest in envs:
            first = runs.filter(pl.col("env_digest") == digest).row(0, named=True)
            env = _environment_of(first)
            if env is not None:
                loaded[digest] = env
        unread = [d for d in envs if d not in loaded]
        if len(loaded) > 1:
            rows = environment.package_differences(loaded)
            lines += [f"Packages that differ between the environments ({len(rows)}):", "",
                      markdown(["package", *(f"`{d}`" for d in loaded)],
                               [[name, *(v or "—" for v in values)] for name, values in rows])]
        if unread:
            lines += [f"No environment.json found for {', '.join(f'`{d}`' for d in unread)}.",
                      ""]
    return lines
