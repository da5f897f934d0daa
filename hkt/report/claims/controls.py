"""A control known to learn the task (``paper.LEARNING_CONTROLS``: S4D) against the better of HKT
and MHA (the higher test mean), from the controls table's error-model interval of the control
minus that model: wholly above 0 → the control *climbs past* the Transformers (our data allow
more than they reach, and their level is their recipe's); spanning 0 → every model *stops at
the same level* (the data or the budget is the limit, which the runs cannot tell apart); wholly
below 0 → the control *stops below* them at this budget, which says nothing about the data; no
interval → *cannot tell*. Welch's reading over seeds alone is given beside it where it differs."""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.differences import beside_seeds, interval_text, main_budget, primary
from hkt.report.reading import ClaimRow, Verdict
from hkt.report.writers import pm

KEYS: tuple[str, ...] = ()
TABLES = ("controls", "main")


def stop_verdict(low: float | None, high: float | None) -> Verdict:
    """Where a control stops against the better Transformer, from the interval [``low``,
    ``high``] of the control minus it."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return Verdict.CANNOT_TELL
    return (Verdict.CLIMBS_PAST if low > 0 else Verdict.STOPS_BELOW if high < 0
            else Verdict.SAME_LEVEL)


def stop_text(verdict: Verdict, control: str, better: str = "") -> str:
    """A control's verdict in words."""
    if verdict == Verdict.CLIMBS_PAST:
        return (f"{control} climbs past the Transformers: the data allow more, and the "
                "Transformers' level is theirs (their recipe)")
    if verdict == Verdict.STOPS_BELOW:
        than = f"the better Transformer ({better})" if better else "the better Transformer"
        return (f"{control} stops below {than} at this budget: it says nothing about the data "
                f"({control} needs its own recipe)")
    if verdict == Verdict.SAME_LEVEL:
        return ("every model stops at the same level: the data or the budget is the limit at "
                "this budget (the runs cannot tell which)")
    return str(Verdict.CANNOT_TELL)


def control_claims(controls: pl.DataFrame, main: pl.DataFrame,
                   budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """Per task, T and control known to learn the task: the control against the better of HKT
    and MHA (the controls table's rows), and against the paper's figures."""
    if controls.is_empty():
        return []
    sel = controls.filter(pl.col("model").is_in(list(paper.LEARNING_CONTROLS)))
    title = claim_config("controls")["title"]
    rows = []
    for (task, length, model), group in sel.group_by("task", "length", "model",
                                                      maintain_order=True):
        versus = sorted(group.iter_rows(named=True), key=lambda r: r["versus"])
        best = max(versus, key=lambda r: r["versus_mean"])
        name, other = model.upper(), best["versus"].upper()
        figures = ", ".join(f"{r['versus'].upper()} {r['versus_paper']:.2f}" for r in versus
                            if r["versus_paper"] is not None)
        behind = ", ".join(f"{name} − the paper's {r['versus'].upper()} "
                           f"{r['minus_paper_pp']:+.2f} pp" for r in versus
                           if r["minus_paper_pp"] is not None)
        ours = (f"{name} {pm(best['test_mean'], best['test_std'])}, "
                + ", ".join(f"{r['versus'].upper()} {pm(r['versus_mean'], r['versus_std'])}"
                            for r in versus)
                + f"; {name} − {other} (the better): "
                + interval_text({**best, "ours_pp": best["difference_pp"]})
                + (f"; {behind}" if behind else ""))
        seeds = stop_verdict(best.get("ci_low_pp"), best.get("ci_high_pp"))
        model_reading = primary(best)
        verdict = seeds if not model_reading.has_interval else stop_verdict(
            model_reading.low, model_reading.high)
        said = stop_text(verdict, name, other)
        if model_reading.has_interval:
            said = beside_seeds(said, stop_text(seeds, name, other), model_reading.method,
                                same=False)
        budget_said = main_budget(main, task, length)
        said += f"; {budget_said}" if budget_said else ""
        steps = budget.main_steps(task, length, [model, *(r["versus"] for r in versus)])
        row = ClaimRow(title.format(task=task, length=length, control=name),
                       figures or "no figure", ours, verdict, said)
        rows.append(budget.read(row, steps=steps, seeds=[n for r in versus
                                                         for n in (r.get("seeds_a"),
                                                                   r.get("seeds_b"))]))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return control_claims(tables["controls"], tables["main"], budget)
