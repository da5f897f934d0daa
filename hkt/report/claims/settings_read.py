"""What the learning-rate rows share (learning_rate, tuned_gap, longer_budget): a setting in
words, the default setting of each model (the profile's rate and budget, from the
borrowed ``hkt aggregate --borrow`` records), whether a task's budgets vary, the runs' precisions and the grid's
edge."""

from __future__ import annotations

from typing import Any

import polars as pl

from hkt import paper
from hkt.report.sweep import SETTING, THIS_SUITE
from hkt.report.writers import learning_rate

__all__ = ["setting", "precisions", "default_rows", "budgets_vary", "sweep_precision",
           "grid_edge"]


def setting(row: dict[str, Any], steps: bool, suffix: str = "") -> str:
    """A learning-rate table row's setting in words: its rate, with its steps where ``steps``
    (the model was trained for more than one budget). ``suffix`` picks the gap table's columns
    (``_a``, ``_b``)."""
    rate = learning_rate(row["lr" + suffix])
    return f"{rate} for {row['steps' + suffix]:,} steps" if steps else rate


def precisions(*sides: tuple[str, str | None]) -> str:
    """Where the runs compared trained in different precisions (each side: its setting in
    words and the precisions of its runs), a sentence saying so: the difference then holds the
    precision (and the device) too. '' where they agree, or where a side's is not recorded."""
    known = [(what, prec) for what, prec in sides if prec]
    if len(known) < len(sides) or len({prec for _, prec in known}) < 2:
        return ""
    return ("; the runs compared differ in precision (" + ", ".join(
        f"{what}: {prec}" for what, prec in known) + "): the difference holds that change too")


def default_rows(sweep: pl.DataFrame) -> dict[tuple[str, int, str], dict[str, Any]]:
    """The learning-rate table's default row of each (task, T, model): of those read from
    borrowed runs (``--borrow`` records), the one at the lowest rate, then the fewest steps (the
    profile's)."""
    rows = sweep.filter(pl.col("source") != THIS_SUITE).sort(["task", "length", "model", *SETTING])
    return {key: group.row(0, named=True) for key, group in
            rows.group_by("task", "length", "model", maintain_order=True)}


def budgets_vary(sweep: pl.DataFrame, task: str, length: int) -> bool:
    """Whether a task's learning-rate table holds more than one budget (steps)."""
    here = sweep.filter((pl.col("task") == task) & (pl.col("length") == length))
    return here["steps"].n_unique() > 1


def sweep_precision(sweep: pl.DataFrame, r: dict[str, Any], model: str,
                    suffix: str) -> str | None:
    """The precisions of ``model``'s runs at the setting a learning-rate gap row ``r`` names
    (``suffix``: its ``_a`` or ``_b`` columns), from the learning-rate table; None if unknown."""
    if sweep.is_empty() or "precision" not in sweep.columns:
        return None
    sel = sweep.filter((pl.col("task") == r["task"]) & (pl.col("length") == r["length"])
                       & (pl.col("model") == model) & (pl.col("lr") == r["lr" + suffix])
                       & (pl.col("steps") == r["steps" + suffix]))
    return None if sel.is_empty() else (sel["precision"][0] or None)


def grid_edge(sweep: pl.DataFrame, task: str, length: int) -> str:
    """Where a model's best rate is the highest or lowest rate tried, the grid's edge: a better
    rate may lie beyond it, untested."""
    sel = sweep.filter((pl.col("task") == task) & (pl.col("length") == length))
    if sel.is_empty():
        return ""
    top, bottom = sel["lr"].max(), sel["lr"].min()
    edge = [f"{m.upper()} {learning_rate(lr)}" for m, lr in
            sel.filter(pl.col("best")).select("model", "lr").iter_rows()
            if m in paper.COMPARED_MODELS and lr in (top, bottom)]
    return (f"; the best rate is an edge of the grid tried ({', '.join(sorted(edge))}): rates "
            "beyond it are untested" if edge else "")
