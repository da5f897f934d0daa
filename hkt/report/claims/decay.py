"""Geometric decay of the truncation residual (ρ < 1 per added level), from the trained rows of
the approximation table: *supports* when every trained head's fitted ρ is below ``rho_limit``,
*refutes* when the mean ρ of a layer is ``rho_limit`` or more, *cannot tell* otherwise. With
``two_ratio_levels`` levels only two truncations lie below L, which the row says."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt.report.claims.analysed import analysed_budget, analysed_steps, column
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict

KEYS = ("rho_limit", "two_ratio_levels")
TABLES = ("approximation",)


def decay_claim(approx: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """The trained rows' fitted ρ against the limit."""
    if approx.is_empty():
        return []
    trained = approx.filter(pl.col("state") == "trained")
    if trained.is_empty():
        return []
    means = trained["rho_mean"].drop_nulls().drop_nans()
    highs = trained["rho_max"].drop_nulls().drop_nans()
    if means.is_empty():
        return []
    cfg = claim_config("decay")
    limit = cfg["rho_limit"]
    if float(highs.max()) < limit:
        verdict = Verdict.SUPPORTS
    elif float(means.max()) >= limit:
        verdict = Verdict.REFUTES
    else:
        verdict = Verdict.CANNOT_TELL
    levels = int(trained["levels"].max())
    caveat = (f" With L = {levels} only two truncations lie below L: ρ is a ratio of two "
              "residuals, the geometric shape itself is not tested."
              if levels == cfg["two_ratio_levels"] else "")
    said = str(verdict) + (analysed_budget(trained, budget)
                           if verdict != Verdict.CANNOT_TELL else "")
    row = ClaimRow(cfg["title"], f"ρ < {limit:g}",
                   f"trained ρ per layer {float(means.min()):.2f}–{float(means.max()):.2f} "
                   f"(mean over heads and seeds), up to {float(highs.max()):.2f} in one head."
                   f"{caveat}", verdict, said)
    return [budget.read(row, steps=analysed_steps(trained, budget),
                        seeds=column(trained, "seeds"))]


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return decay_claim(tables["approximation"], budget)
