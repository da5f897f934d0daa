"""Paired differences between runs: two models tested on the same examples err on many of the
same ones, so the test set's sampling error of their difference is read pair by pair, inside
the error model (:func:`hkt.report.stats.paired_difference`: Welch over seeds plus the paired
test-set variance; docs/per-example.md).

* :func:`paired_table`: HKT − MHA in every variant both trained, and every control against HKT
  and MHA, with the paired error beside Welch's over seeds, the binomial reading and the
  reading given these runs (``given_runs_*``, on which no verdict rests);
* :func:`with_paired` fills the gap and controls tables' ``paired_*`` columns,
  :func:`ablation_with_paired` the ablation table's (each variant against the full model), and
  :func:`paired_note` says in their captions where it did;
* :func:`paired_or_why`: one difference's paired reading, or why it has none (the
  learning-rate gap and the claims name the runs without predictions).

The table as shown: :func:`hkt.report.example_display.paired_display`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from hkt import paper
from hkt.report.example_runs import Readings, run_name
from hkt.report.report_settings import Settings
from hkt.report.stats import given_runs_difference, paired_difference
from hkt.report.tables import DERIVED, difference_columns, runs_of
from hkt.runs_frame import KEY

__all__ = ["PAIRED_SCHEMA", "PAIRED_COLUMNS", "NAMES_PREDICTIONS", "NOT_READ", "finite_or_none",
           "paired_or_why", "paired_table", "with_paired", "ablation_with_paired", "paired_note"]


PAIRED_SCHEMA = {
    "variant": pl.String, "task": pl.String, "length": pl.Int64, "model": pl.String,
    "versus": pl.String, "difference_pp": pl.Float64,
    "paired_ci_low_pp": pl.Float64, "paired_ci_high_pp": pl.Float64,
    "paired_p_value": pl.Float64, "paired_significant": pl.String,
    "ci_low_pp": pl.Float64, "ci_high_pp": pl.Float64,
    "ts_ci_low_pp": pl.Float64, "ts_ci_high_pp": pl.Float64,
    "given_runs_ci_low_pp": pl.Float64, "given_runs_ci_high_pp": pl.Float64,
    "given_runs_p_value": pl.Float64, "seeds_a": pl.Int64, "seeds_b": pl.Int64,
    "examples": pl.Int64}


def finite_or_none(v: float) -> float | None:
    """A statistic as a frame's cell: None where it is NaN (undefined) or None."""
    return None if v is None or math.isnan(v) else float(v)


def _pair(r: Readings, a: pl.DataFrame, b: pl.DataFrame) -> dict[str, Any] | None:
    """The error model's paired reading of runs ``a`` against runs ``b``, and the reading
    given these runs; None where they are not paired."""
    ma, mb = r.matrix(a), r.matrix(b)
    if ma is None or mb is None or not np.array_equal(ma[1], mb[1]):
        return None
    d = paired_difference(ma[0], mb[0], r.settings.confidence)
    g = given_runs_difference(ma[0], mb[0], r.settings.confidence)
    return {"difference_pp": d.diff, "paired_ci_low_pp": finite_or_none(d.ci_low),
            "paired_ci_high_pp": finite_or_none(d.ci_high), "paired_p_value": finite_or_none(d.p_value),
            "paired_significant": d.verdict, "given_runs_ci_low_pp": finite_or_none(g.ci_low),
            "given_runs_ci_high_pp": finite_or_none(g.ci_high), "given_runs_p_value": finite_or_none(g.p_value),
            "seeds_a": d.n_a, "seeds_b": d.n_b, "examples": int(ma[1].size)}


def _named(sel: pl.DataFrame) -> str:
    """Runs in words: ``MHA lr1e3 seeds 0, 1`` (model, variant, seeds), per model and variant."""
    parts = []
    for (model, variant), group in sorted(sel.group_by("model", "variant"),
                                          key=lambda kv: str(kv[0])):
        seeds = sorted(group["seed"].to_list())
        parts.append(f"{str(model).upper()} {variant} seed{'' if len(seeds) == 1 else 's'} "
                     + ", ".join(str(s) for s in seeds))
    return "; ".join(parts)


#: The column of the borrowed runs' frame (``--borrow``) that says whether a run's record names
#: its predictions (they are not read: a borrowed run is read for its accuracies).
NAMES_PREDICTIONS = "names_predictions"
#: Why a difference has no paired reading where no run it reads was read for predictions.
NOT_READ = ("predictions are not read from MLflow, which does not keep them: aggregate the runs' "
            "records to pair")


def paired_or_why(r: Readings | None, a: pl.DataFrame, b: pl.DataFrame
                  ) -> tuple[dict[str, Any] | None, str]:
    """The paired reading of runs ``a`` against runs ``b`` over their shared test examples (as
    :func:`paired_table` reads each row), or None and why not, in words: the runs without
    predictions, by name, or test examples that differ."""
    if r is None:
        return None, NOT_READ
    got = _pair(r, a, b)
    if got is not None:
        return got, ""
    keys = pl.concat([a, b], how="diagonal_relaxed")
    lacking = keys.filter(pl.Series([tuple(k) not in r.runs for k in
                                     keys.select(KEY).iter_rows()], dtype=pl.Boolean))
    if lacking.is_empty():
        return None, "the two sides' predictions are not on the same test examples"
    kept = (pl.col(NAMES_PREDICTIONS).fill_null(False) if NAMES_PREDICTIONS in lacking.columns
            else pl.lit(False))
    none = lacking.filter(~kept)
    refused = pl.Series([run_name(k) in r.refused for k in none.iter_rows(named=True)],
                        dtype=pl.Boolean)
    if refused.any():
        return None, (f"the predictions of {_named(none.filter(refused))} are not their "
                      "records' (the aggregate's warnings say why)")
    if not none.is_empty():
        return None, f"no predictions for {_named(none)}"
    return None, (f"the predictions of {_named(lacking)} are not read (--borrow records are "
                  "read for their accuracies)")


def _wanted(runs: pl.DataFrame, controls: pl.DataFrame, variants: Sequence[str]
            ) -> list[tuple[str, str, int | None, str, str]]:
    """The differences the paired table reads: (variant, task, T, model, versus): HKT − MHA in
    each of ``variants`` where both trained, and each control row (the first variant's)."""
    a, b = paper.COMPARED_MODELS
    out = []
    for v in variants:
        sel = runs.filter(pl.col("variant") == v)
        for task, length in sel.select("task", "length").unique().sort("task", "length").rows():
            models = set(sel.filter((pl.col("task") == task)
                                    & (pl.col("length") == length))["model"].to_list())
            if {a, b} <= models:
                out.append((v, task, length, a, b))
    out += [(variants[0], c["task"], c["length"], c["model"], c["versus"])
            for c in controls.iter_rows(named=True)]
    return out


def paired_table(r: Readings, runs: pl.DataFrame, controls: pl.DataFrame,
                 variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """HKT − MHA in each of ``variants`` (:func:`compared_variants`) and every control of the
    controls table against HKT and MHA (the first variant), where all runs of both sides are
    paired: the error model's paired reading beside Welch's over seeds, the binomial reading
    and the reading given these runs."""
    rows = []
    for variant, task, length, model, versus in _wanted(runs, controls, variants):
        sel = runs.filter((pl.col("variant") == variant) & (pl.col("task") == task)
                          & (pl.col("length") == length))
        ra, rb = (sel.filter(pl.col("model") == m) for m in (model, versus))
        got = _pair(r, ra, rb)
        if got is None:
            continue
        cols = difference_columns(ra, rb)
        rows.append({"variant": variant, "task": task, "length": length, "model": model,
                     "versus": versus, **got,
                     **{k: cols[k] for k in ("ci_low_pp", "ci_high_pp", "ts_ci_low_pp",
                                             "ts_ci_high_pp")}})
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA).select(*PAIRED_SCHEMA)


PAIRED_COLUMNS = ("paired_ci_low_pp", "paired_ci_high_pp", "paired_p_value",
                  "paired_significant")


def with_paired(table: pl.DataFrame, paired: pl.DataFrame, variant: str = "main",
                model: str | None = None, versus: str | None = None) -> pl.DataFrame:
    """``table`` (gap or controls: ``variant``'s rows) with its ``paired_*`` columns filled
    where ``paired`` has the row: (task, T, and the table's ``model`` and ``versus``, or the
    given ones for the gap table)."""
    if paired.is_empty() or table.is_empty():
        return table
    by = {(p["task"], p["length"], p["model"], p["versus"]): p
          for p in paired.filter(pl.col("variant") == variant).iter_rows(named=True)}
    rows = []
    for row in table.iter_rows(named=True):
        p = by.get((row["task"], row["length"], model or row.get("model"),
                    versus or row.get("versus")))
        rows.append(row if p is None else {**row, **{k: p[k] for k in PAIRED_COLUMNS}})
    return pl.DataFrame(rows, schema=table.schema)


def ablation_with_paired(abl: pl.DataFrame, runs: pl.DataFrame, r: Readings, *,
                         subject: str, full_variant: str, main_variant: str) -> pl.DataFrame:
    """The ablation table ``abl`` (one task and T) with its ``paired_*`` columns filled where
    a variant's runs and the full model's (``subject``'s ``full_variant``) both have predictions
    on the same examples. ``runs``: the ablation's, derived rows among them; a derived row
    (``levels1``: the MHA runs) reads its source runs' predictions."""
    if abl.is_empty():
        return abl
    task, length = abl["task"][0], abl["length"][0]
    sel = runs.filter((pl.col("task") == task) & (pl.col("length") == length))
    full = runs_of(sel, model=subject, variant=full_variant)
    rows = []
    for row in abl.iter_rows(named=True):
        side = runs_of(sel, model=row["model"], variant=row["variant"])
        source = side[DERIVED].drop_nulls() if DERIVED in side.columns else pl.Series([])
        if len(source):
            side = runs_of(sel, model=source[0], variant=main_variant)
        got = (None if (row["model"], row["variant"]) == (subject, full_variant)
               else _pair(r, side, full))
        rows.append(row if got is None else {**row, **{k: got[k] for k in PAIRED_COLUMNS}})
    return pl.DataFrame(rows, schema=abl.schema)


def paired_note(paired: pl.DataFrame, settings: Settings | None) -> str:
    """What a difference table's caption says of its paired columns: on which rows both sides'
    predictions are read (none: the binomial reading stands alone)."""
    if paired.is_empty() or settings is None:
        return ("'seeds + test set, paired': none here (no run's predictions are read on both "
                "sides).")
    where = ", ".join(dict.fromkeys(f"{t} T={n}" for t, n in
                                    paired.select("task", "length").iter_rows()))
    return (f"'seeds + test set, paired' (the primary reading where present; {where}): the "
            "error model with the test set's sampling variance of the difference read from "
            "both sides' predictions on the same examples (the variance over examples of the "
            "per-example difference of the seed-averaged correctness, over n), on t with the "
            f"seed terms' degrees of freedom ({settings.level}; tables/paired beside the rest).")

