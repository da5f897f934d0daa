"""Whether HKT's bound on score operations (≤ 4/3 of MHA's, ``paper.SCORE_COST["bound"]``)
shows in the time of a training step: per task and T, HKT's mean ms/step over MHA's, from the
main table's rows of the two (their main-variant runs). The paper counts operations and says
nothing of time; this row reads what our implementation and device make of the count.

Verdict rule: a ratio of means over the runs (no interval: step times are not replicated as
accuracies are), read against the bound with a relative ``noise`` margin (config/report/
claims.yaml): *supports* when the ratio is at most bound × (1 − noise), *refutes* when it is at
least bound × (1 + noise), *cannot tell* between. Read against the minimum budget like every
row drawn from runs (a smoke run's few steps time start-up more than steps)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict

KEYS = ("noise",)
TABLES = ("main",)


def step_verdict(ratio: float, bound: float, noise: float) -> Verdict:
    """The rule above: the ratio against the bound, ``noise`` its relative margin."""
    if ratio <= bound * (1 - noise):
        return Verdict.SUPPORTS
    if ratio >= bound * (1 + noise):
        return Verdict.REFUTES
    return Verdict.CANNOT_TELL


def step_time_claims(main: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """One row per task and T whose main table has HKT's and MHA's time per step."""
    if main.is_empty() or "ms_per_step" not in main.columns:
        return []
    cfg, bound = claim_config("step_time"), paper.SCORE_COST["bound"]
    a, b = paper.COMPARED_MODELS
    rows = []
    for (task, length), group in main.group_by("task", "length", maintain_order=True):
        ms = {r["model"]: r for r in group.iter_rows(named=True)
              if r["model"] in (a, b) and r["ms_per_step"]}
        if len(ms) < 2:
            continue
        ratio = ms[a]["ms_per_step"] / ms[b]["ms_per_step"]
        verdict = step_verdict(ratio, bound, cfg["noise"])
        ours = (f"{a.upper()} {ms[a]['ms_per_step']:.1f} ms/step, {b.upper()} "
                f"{ms[b]['ms_per_step']:.1f}: {ratio:.2f}× (a ratio of means over the runs, no "
                f"interval; within ±{100 * cfg['noise']:g}% of {bound:.4g}× reads cannot tell)")
        row = ClaimRow(cfg["title"].format(a=a.upper(), b=b.upper(), task=task, length=length),
                       f"≤ {bound:.4g}× in operations (time not said)", ours, verdict,
                       f"{verdict} (the time of this implementation on its device, not the "
                       "operation count)")
        rows.append(budget.read(row, steps=budget.main_steps(task, length, (a, b)),
                                seeds=(ms[a]["seeds"], ms[b]["seeds"])))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return step_time_claims(tables["main"], budget)
