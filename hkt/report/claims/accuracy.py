"""HKT beats MHA per task: HKT − MHA of the gap table read against the paper's gap, direction
and size apart (:func:`~hkt.report.claims.differences.difference_verdict` on the error model's
interval, Welch's reading over seeds beside it); a row at a budget other than the paper's reads
the direction at that budget only, and says so."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.differences import both, interval_text, main_budget, size_text
from hkt.report.reading import ClaimRow

KEYS: tuple[str, ...] = ()
TABLES = ("gap", "main")


def accuracy_claims(gap: pl.DataFrame, main: pl.DataFrame,
                    budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """One row per task of the gap table: HKT − MHA, ours against the paper's."""
    title = claim_config("accuracy")["title"]
    rows = []
    for r in gap.iter_rows(named=True):
        if r.get("paper_pp") is None:
            continue
        verdict, said = both(r, r["paper_pp"])
        budget_said = main_budget(main, r["task"], r["length"])
        said += f" ({budget_said})" if budget_said else ""
        row = ClaimRow(title.format(task=r["task"], length=r["length"]), f"{r['paper_pp']:+.2f} pp",
                       interval_text(r) + size_text(r["paper_pp"], r), verdict, said)
        rows.append(budget.read(row, seeds=(r.get("seeds_a"), r.get("seeds_b")),
                                steps=budget.main_steps(r["task"], r["length"],
                                                        paper.COMPARED_MODELS)))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return accuracy_claims(tables["gap"], tables["main"], budget)
