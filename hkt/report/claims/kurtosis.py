"""κ ≈ 33 for trained score distributions (the normalised Mardia kurtosis of the score
entries): *supports* when the paper's value lies within the range over layers, heads, levels
and seeds of our trained HKT score κ, *refutes* when the whole range lies on one side of it;
whether the scores are non-Gaussian at all (κ above ``gaussian_kappa``, the Gaussian's κ) is said
beside it, with the budget of the runs read."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt import paper
from hkt.report.claims.analysed import analysed_budget, analysed_steps, column
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict

KEYS = ("gaussian_kappa",)
TABLES = ("kurtosis",)


def kurtosis_claim(kurt: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """The trained HKT score κ range against the paper's κ."""
    if kurt.is_empty():
        return []
    sel = kurt.filter((pl.col("model") == "hkt") & (pl.col("quantity") == "scores"))
    if sel.is_empty():
        return []
    cfg = claim_config("kurtosis")
    lo, hi = float(sel["kappa_min"].min()), float(sel["kappa_max"].max())
    claimed, gaussian_kappa = paper.KURTOSIS, cfg["gaussian_kappa"]
    verdict = Verdict.SUPPORTS if lo <= claimed <= hi else Verdict.REFUTES
    gaussian = (f"non-Gaussian (κ > {gaussian_kappa:g})" if lo > gaussian_kappa else
                f"Gaussian-like in places (κ ≤ {gaussian_kappa:g} in some heads)")
    tasks = ", ".join(sorted(set(sel["task"].to_list())))
    row = ClaimRow(cfg["title"], f"κ ≈ {claimed:.0f}",
                   f"trained HKT score κ {lo:.2f}–{hi:.2f} over layers, heads, levels and seeds "
                   f"({tasks}): {gaussian}", verdict,
                   f"{verdict} the value{analysed_budget(sel, budget)}; the scores are {gaussian}")
    return [budget.read(row, steps=analysed_steps(sel, budget), seeds=column(sel, "seeds"))]


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return kurtosis_claim(tables["kurtosis"], budget)
