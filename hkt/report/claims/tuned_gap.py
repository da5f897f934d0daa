"""HKT − MHA with each model at its best learning rate (or setting) by validation, the
learning-rate gap table's "each at its best" rows, read against the paper's gap as an accuracy
difference (:func:`~hkt.report.claims.differences.both`); beside it, the gap with both at the
default setting where the learning-rate table has one for both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.differences import both, interval_text, size_text
from hkt.report.claims.settings_read import (budgets_vary, default_rows, grid_edge, precisions,
                                             setting, sweep_precision)
from hkt.report.reading import ClaimRow
from hkt.report.sweep import EACH_AT_BEST, ONE_RATE

KEYS: tuple[str, ...] = ()
TABLES = ("sweep_gap", "sweep")


def _at_default(r: dict[str, Any], sweep_gap: pl.DataFrame, sweep: pl.DataFrame,
                steps: bool) -> str:
    """The gap with both models at their default setting, where the gap table has it."""
    a, b = paper.COMPARED_MODELS
    refs = default_rows(sweep)
    ref_a, ref_b = (refs.get((r["task"], r["length"], m)) for m in (a, b))
    if ref_a is None or ref_b is None:
        return ""
    shared = sweep_gap.filter(
        (pl.col("task") == r["task"]) & (pl.col("length") == r["length"])
        & (pl.col("comparison") == ONE_RATE) & (pl.col("lr_a") == ref_a["lr"])
        & (pl.col("steps_a") == ref_a["steps"]) & (pl.col("lr_b") == ref_b["lr"])
        & (pl.col("steps_b") == ref_b["steps"]))
    return "" if shared.is_empty() else (
        f"; both at the default {'setting' if steps else 'rate'} {setting(ref_a, steps)}: "
        + interval_text(shared.row(0, named=True)))


def tuned_gap_claims(sweep_gap: pl.DataFrame, sweep: pl.DataFrame,
                     budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """One row per task of the learning-rate gap table's "each at its best" rows with the
    paper's figures for both models."""
    if sweep_gap.is_empty():
        return []
    a, b = paper.COMPARED_MODELS
    title = claim_config("tuned_gap")["title"]
    rows = []
    for r in sweep_gap.filter(pl.col("comparison") == EACH_AT_BEST).iter_rows(named=True):
        pa, pb = (paper.paper_accuracy(r["task"], r["length"], m) for m in (a, b))
        if pa is None or pb is None:
            continue
        claimed = pa.mean - pb.mean
        steps = not sweep.is_empty() and budgets_vary(sweep, r["task"], r["length"])
        rates = (f" ({a.upper()} at {setting(r, steps, '_a')}, {b.upper()} at "
                 f"{setting(r, steps, '_b')})")
        precision = precisions(*((f"{m.upper()} at {setting(r, steps, k)}",
                                  sweep_precision(sweep, r, m, k)) for m, k in ((a, "_a"),
                                                                                (b, "_b"))))
        ours = (interval_text(r) + rates + size_text(claimed, r) + _at_default(r, sweep_gap, sweep, steps)
                + grid_edge(sweep, r["task"], r["length"]) + precision)
        verdict, said = both(r, claimed)
        what = "setting (learning rate, steps)" if steps else "learning rate"
        row = ClaimRow(title.format(a=a.upper(), b=b.upper(), what=what, task=r["task"],
                                    length=r["length"]), f"{claimed:+.2f} pp", ours, verdict, said)
        rows.append(budget.read(row, steps=(r["steps_a"], r["steps_b"]),
                                seeds=(r.get("seeds_a"), r.get("seeds_b"))))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return tuned_gap_claims(tables["sweep_gap"], tables["sweep"], budget)
