"""The lead at a longer budget (issue 59: "HKT's lead holds at twice the budget"), per learning
rate at which both models trained for more than one budget (the learning-rate gap table's rows
"both at one setting"): HKT − MHA at the longest budget read by
:func:`~hkt.report.claims.differences.difference_verdict` on the error model's interval against
the mean lead at the shortest (no test compares the two leads): *holds* when the interval lies
above 0 (at its size when it holds the shorter budget's lead, at another size when not), *does
not hold* when it lies below 0 (MHA leads), *cannot tell* when it holds 0 or there is none; no
lead at the shorter budget reads *cannot tell* (nothing to hold)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.differences import (beside_seeds, difference_verdict, interval_text,
                                           primary)
from hkt.report.reading import ClaimRow, Verdict
from hkt.report.sweep import ONE_RATE
from hkt.report.writers import learning_rate

KEYS: tuple[str, ...] = ()
TABLES = ("sweep_gap",)

#: How the lead at a longer budget reads, by the difference verdict of its interval against the
#: lead at the shorter budget: its verdict and its words.
LEAD_READINGS = {
    Verdict.SUPPORTS: (Verdict.HOLDS, "holds (at its size at the shorter budget)"),
    Verdict.DIRECTION_ONLY: (Verdict.HOLDS_AT_ANOTHER_SIZE,
                             "holds, at another size (the shorter budget's lead lies outside "
                             "the interval)"),
    Verdict.REFUTES: (Verdict.DOES_NOT_HOLD, "does not hold: MHA leads at the longer budget"),
    Verdict.CANNOT_TELL: (Verdict.CANNOT_TELL,
                          "cannot tell (the interval holds 0: MHA may have caught up, or the "
                          "runs cannot tell the two apart)")}


def lead_reading(long: dict[str, Any], lead: float | None, shortest: int,
                 a: str, b: str) -> tuple[Verdict, str]:
    """The lead at the longer budget (row ``long``) against the shorter budget's ``lead``."""
    if lead is None or lead <= 0:
        return Verdict.CANNOT_TELL, (
            f"{Verdict.CANNOT_TELL} (no lead to hold: {a} − {b} is "
            f"{'none' if lead is None else f'{lead:+.2f} pp'} at {shortest:,} steps)")
    model = primary(long)
    seeds = LEAD_READINGS[difference_verdict(long.get("ci_low_pp"), long.get("ci_high_pp"), lead)]
    verdict, said = LEAD_READINGS[difference_verdict(model.low, model.high, lead)]
    return verdict, beside_seeds(said, seeds[1], model.method)


def longer_budget_claims(sweep_gap: pl.DataFrame,
                         budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """Per task, T and learning rate at which both models were trained for more than one
    budget: whether HKT's lead over MHA at the shortest budget holds at the longest."""
    if sweep_gap.is_empty():
        return []
    a, b = (m.upper() for m in paper.COMPARED_MODELS)
    title = claim_config("longer_budget")["title"]
    shared = sweep_gap.filter(pl.col("comparison") == ONE_RATE)
    rows = []
    for (task, length, lr), group in sorted(shared.group_by("task", "length", "lr_a"),
                                            key=lambda kv: str(kv[0])):
        steps = sorted(set(group["steps_a"].to_list()))
        if len(steps) < 2:
            continue
        short, long = (group.filter(pl.col("steps_a") == n).row(0, named=True)
                       for n in (steps[0], steps[-1]))
        ratio = steps[-1] / steps[0]
        times = "twice" if ratio == 2 else f"{ratio:g} times"
        lead = short["ours_pp"]
        verdict, said = lead_reading(long, lead, steps[0], a, b)
        moved = "" if lead is None or long["ours_pp"] is None else (
            f" The lead moves {long['ours_pp'] - lead:+.2f} pp (a difference of means; no "
            "test compares the two budgets' leads)")
        ours = (f"at {steps[-1]:,} steps: {interval_text(long)}. At {steps[0]:,} steps: "
                f"{interval_text(short)}.{moved}")
        row = ClaimRow(title.format(a=a, b=b, times=times, task=task, length=length,
                                    lr=learning_rate(lr), long=f"{steps[-1]:,}",
                                    short=f"{steps[0]:,}"),
                       "not said (the paper's budget is not public)", ours, verdict, said)
        rows.append(budget.read(row, steps=(long["steps_a"],),
                                seeds=(long.get("seeds_a"), long.get("seeds_b"))))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return longer_budget_claims(tables["sweep_gap"], budget)
