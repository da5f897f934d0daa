"""What the rows read from the analysis tables (kurtosis, kernel, approximation) share: the
steps, seeds and budget of the trained HKT runs an analysis table's rows read, by task, T and
variant."""

from __future__ import annotations

from typing import Any

import polars as pl

from hkt.report.claims.budget import Budget, profile_said

__all__ = ["column", "analysed_steps", "analysed_seeds", "analysed_budget"]


def column(table: pl.DataFrame, name: str) -> list[Any]:
    """A table's column as a list; empty where the table lacks it."""
    return table[name].to_list() if name in table.columns else []


def _keys(table: pl.DataFrame) -> list[str]:
    return [c for c in ("task", "length", "variant") if c in table.columns]


def _runs_read(table: pl.DataFrame, budget: Budget) -> pl.DataFrame:
    """The trained HKT runs of the (task, T, variant) an analysis table's rows read."""
    sel, keys = budget.trained(["hkt"]), _keys(table)
    return sel.join(table.select(keys).unique(), on=keys) if keys and not sel.is_empty() else sel


def analysed_steps(table: pl.DataFrame, budget: Budget) -> list[int | None]:
    """The steps of the trained HKT runs an analysis table's rows read (by task, T, variant)."""
    steps: list[int | None] = []
    for row in table.select(_keys(table)).unique().iter_rows(named=True):
        steps += budget.steps(row.get("task"), row.get("length"), ["hkt"],
                              [row["variant"]] if row.get("variant") else None)
    return steps


def analysed_seeds(table: pl.DataFrame, budget: Budget) -> list[int]:
    """The seeds of the trained HKT runs an analysis table without a seeds column reads."""
    sel = _runs_read(table, budget)
    if sel.is_empty():
        return []
    return sel.group_by(_keys(table) or ["model"]).agg(pl.col("seed").n_unique())["seed"].to_list()


def analysed_budget(table: pl.DataFrame, budget: Budget) -> str:
    """The budget of the trained HKT runs an analysis table's rows read, in words, as the
    accuracy rows say theirs: at our paper profile, or at another budget (its steps), which the
    verdict then reads only; '' where the runs frame does not say."""
    if budget.runs is None or budget.runs.is_empty() or "profile" not in budget.runs.columns:
        return ""
    sel = _runs_read(table, budget)
    profiles = sorted({p for p in sel["profile"].to_list() if p})
    steps = sorted({n for n in sel["steps"].to_list() if n is not None})
    at = f" ({' and '.join(f'{n:,}' for n in steps)} steps)" if steps else ""
    many = len(profiles) > 1
    which = "those budgets" if many else "that budget"
    other = (f"at our {' and '.join(f'`{p}`' for p in profiles)} profile{'s' if many else ''}"
             f"{at}, not the paper's budget: the reading of {which} only")
    said = profile_said(profiles, other)
    return f" {said}" if said else ""
