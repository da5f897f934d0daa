"""The paper's mechanism, "HKT's gain comes from the hierarchy of operations", read on the
trees' depth and on the depth their answer needs, one row each (the per-example readings'
mechanism table): *supports* when the paired interval of (HKT − MHA on the deepest group of test
examples) − (HKT − MHA on the shallowest) lies above 0, *refutes* when below (the gain is larger
on shallow trees), *cannot tell* when it spans 0 or one depth spans both groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict

KEYS: tuple[str, ...] = ()
TABLES = ("mechanism",)


def _ours(r: dict[str, Any], a: str, b: str) -> tuple[str, Verdict]:
    """A mechanism row's reading in words and its verdict."""
    if r["difference_pp"] is None:
        return f"by {r['measure']}, no reading: {r['reason']}", Verdict.CANNOT_TELL
    ours = (f"by {r['measure']}: {a} − {b} on the deepest of {r['groups']} groups ({r['deep']}, "
            f"{r['deep_examples']} examples) {r['deep_pp']:+.2f} pp, on the shallowest "
            f"({r['shallow']}, {r['shallow_examples']}) {r['shallow_pp']:+.2f} pp; "
            f"deep − shallow {r['difference_pp']:+.2f} pp")
    low, high = r["paired_ci_low_pp"], r["paired_ci_high_pp"]
    if low is None or high is None:
        return f"{ours}, no interval: {r['reason']}", Verdict.CANNOT_TELL
    p = "" if r["paired_p_value"] is None else f", p = {r['paired_p_value']:.3g}"
    ours += (f", {100 * r['confidence']:g}% CI [{low:+.2f}, {high:+.2f}]{p} (the "
             "contrast declared in config, over seeds plus the paired test-set error)")
    verdict = (Verdict.SUPPORTS if low > 0 else Verdict.REFUTES if high < 0
               else Verdict.CANNOT_TELL)
    return ours, verdict


def mechanism_claim(mechanism: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """One row per task, T, variant and measure of the mechanism table."""
    rows = []
    a, b = (m.upper() for m in paper.COMPARED_MODELS)
    title = claim_config("mechanism")["title"]
    for r in mechanism.iter_rows(named=True):
        ours, verdict = _ours(r, a, b)
        main = r.get("variant") in (None, budget.main)
        steps = (budget.main_steps(r["task"], r["length"], list(paper.COMPARED_MODELS)) if main
                 else budget.steps(r["task"], r["length"], paper.COMPARED_MODELS, [r["variant"]]))
        which = "" if main else f"; {r['variant']}"
        row = ClaimRow(title.format(a=a, b=b, task=r["task"], length=r["length"], which=which,
                                    measure=r["measure"]),
                       "said, no figure", ours, verdict, str(verdict))
        rows.append(budget.read(row, steps=steps, seeds=(r["seeds_a"], r["seeds_b"])))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return mechanism_claim(tables["mechanism"], budget)
