"""The score cost (≤ 4/3 of MHA's for any L, 1.3125× for L = 3): an operation count, which the
analytic formula settles (*supports* where the cost table's analytic ratio is the paper's
figure, *refutes* where not); the measured attention times are reported beside it, not judged
against it. No run's budget changes an operation count."""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from hkt import paper
from hkt.report.analysis_tables import ANALYTIC, MEASURED_TIME
from hkt.report.claims.budget import Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict

KEYS: tuple[str, ...] = ()
TABLES = ("cost",)


def cost_claim(cost: pl.DataFrame) -> list[ClaimRow]:
    """The score cost: analytic, with the measured time ratios beside it (rows by ``key``)."""
    if cost.is_empty():
        return []
    analytic = cost.filter(pl.col("key") == ANALYTIC)
    if analytic.is_empty():
        return []
    a = analytic.row(0, named=True)
    measured = cost.filter(pl.col("key") == MEASURED_TIME)
    times = ", ".join(f"{r['ratio']:.2f}× at {r['setting']}" for r in measured.iter_rows(named=True))
    verdict = Verdict.SUPPORTS if a["paper"] is not None and math.isclose(a["ratio"], a["paper"]) \
        else Verdict.REFUTES
    ours = (f"analytic {a['ratio']:.4f}× (an operation count)"
            + (f"; measured attention time: {times} (kernel speed, not operations)" if times else ""))
    return [ClaimRow(claim_config("cost")["title"], f"{paper.SCORE_COST['levels3']}×", ours,
                     verdict, f"{verdict} (as an operation count)")]


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return cost_claim(tables["cost"])
