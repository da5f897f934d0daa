"""The kernel theorems (a PSD sufficient condition, a Gram rank bound): theorems, which runs
cannot refute (*cannot tell*); the row reports how often their premises hold in trained HKT
heads (the kernel table)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt.report.claims.analysed import analysed_seeds, analysed_steps
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict

KEYS: tuple[str, ...] = ()
TABLES = ("kernel",)


def kernel_claim(kernel: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """The share of trained cases where the PSD condition holds, and the Gram rank."""
    if kernel.is_empty() or "psd_condition_share" not in kernel.columns:
        return []
    sel = kernel.filter(pl.col("model") == "hkt")
    if sel.is_empty():
        return []
    share = float(sel["psd_condition_share"].mean())
    rank = ""
    if "gram_rank" in sel.columns and sel["gram_rank"].drop_nulls().len():
        rank = (f"; measured Gram rank {float(sel['gram_rank'].mean()):.1f} within the bound "
                f"{float(sel['gram_rank_bound'].mean()):.1f}")
    row = ClaimRow(claim_config("kernel")["title"], "theorem",
                   f"the PSD condition holds in {100 * share:.0f}% of trained HKT (run, layer, "
                   f"head) cases{rank}", Verdict.CANNOT_TELL,
                   f"{Verdict.CANNOT_TELL} (a theorem: runs cannot refute it; its premise holds "
                   f"in {100 * share:.0f}% of the trained cases)")
    return [budget.read(row, steps=analysed_steps(sel, budget), seeds=analysed_seeds(sel, budget))]


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return kernel_claim(tables["kernel"], budget)
