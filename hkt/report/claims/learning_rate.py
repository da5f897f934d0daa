"""The learning rate (and the budget), from the learning-rate tables (present when the aggregate
has runs at several settings): a model's plateau *moves* when its best setting by validation is
not the default setting (the lowest rate, then the fewest steps, of the borrowed runs, the
``hkt aggregate --borrow`` records: the profile's rate and budget) and its test mean there
exceeds the default's by more than the larger of the two seed stds; else it *does not move*; *cannot
tell* when a side has one seed (no std). A plateau that moves is read again with the test set's
error (each side's binomial error added): where that interval of the gain holds 0, the row reads
*moves over seeds; cannot tell with the test set's error*. Either way the row says how far the
best setting's mean stays from the paper's figure for that model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.settings_read import budgets_vary, default_rows, precisions, setting
from hkt.report.reading import ClaimRow, Verdict
from hkt.report.report_settings import confidence
from hkt.report.stats import summary_difference_with_test_set
from hkt.report.sweep import SETTING
from hkt.report.tables import level
from hkt.report.writers import pm

KEYS: tuple[str, ...] = ()
TABLES = ("sweep",)


def moves(best: dict[str, Any], ref: dict[str, Any], steps: bool = False) -> tuple[Verdict, str]:
    """Whether a model's plateau moves from the default setting ``ref`` to its best ``best``
    (rows of the learning-rate table), over seeds and then with the test set's error, and what
    else differs between the two settings' runs (their precision)."""
    rate, at = setting(best, steps), setting(ref, steps)
    kind = "setting" if steps else "rate"
    if (best["lr"], best["steps"]) == (ref["lr"], ref["steps"]):
        return Verdict.DOES_NOT_MOVE, (f"{Verdict.DOES_NOT_MOVE}: the default {kind} {at} is "
                                       "the best by validation")
    if best["test_std"] is None or ref["test_std"] is None:
        return Verdict.CANNOT_TELL, f"{Verdict.CANNOT_TELL}: one seed at {rate} or {at} gives no seed spread"
    gain, spread = best["test_mean"] - ref["test_mean"], max(best["test_std"], ref["test_std"])
    verdict = Verdict.MOVES if gain > spread else Verdict.DOES_NOT_MOVE
    than = "more" if gain > spread else "not more"
    text = f"{verdict}: {rate} − {at} is {gain:+.2f} pp, {than} than the seed spread ({spread:.2f})"
    if verdict == Verdict.MOVES and best.get("test_examples") and ref.get("test_examples"):
        ts = summary_difference_with_test_set(
            best["test_mean"], best["test_std"] ** 2, int(best["seeds"]), best.get("test_examples"),
            ref["test_mean"], ref["test_std"] ** 2, int(ref["seeds"]), ref.get("test_examples"),
            confidence())
        if not math.isnan(ts.ci_low) and ts.ci_low <= 0:
            verdict = Verdict.MOVES_OVER_SEEDS_ONLY
            text = (f"{verdict}; {Verdict.CANNOT_TELL} with the test set's error (the verdict "
                    f"changes): {rate} − {at} is {gain:+.2f} pp, more than the seed spread "
                    f"({spread:.2f}), but its {level()} CI with the test set's error is "
                    f"[{ts.ci_low:+.2f}, {ts.ci_high:+.2f}]")
        elif not math.isnan(ts.ci_low):
            text += (f"; with the test set's error its {level()} CI [{ts.ci_low:+.2f}, "
                     f"{ts.ci_high:+.2f}] lies above 0 too")
    return verdict, text + precisions((rate, best.get("precision")), (at, ref.get("precision")))


def from_paper(best: float, ref: float, figure: float, steps: bool = False) -> str:
    """How far the best setting's test mean stays from the paper's ``figure``, and how much of
    the default setting's distance to it the best one closes."""
    side, kind = ("below" if best < figure else "above"), ("setting" if steps else "rate")
    return (f"; at its best {kind} still {abs(best - figure):.2f} pp {side} the paper's "
            f"{figure:.2f} (it closes {best - ref:+.2f} of the default {kind}'s "
            f"{abs(ref - figure):.2f} pp)")


def learning_rate_claims(sweep: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """Per task, T and Transformer of the learning-rate table that has default runs: whether
    its plateau moves with the rate, and how far its best rate stays from the paper."""
    if sweep.is_empty():
        return []
    rows, refs = [], default_rows(sweep)
    title = claim_config("learning_rate")["title"]
    sel = sweep.filter(pl.col("model").is_in(list(paper.COMPARED_MODELS)))
    for (task, length, model), group in sel.group_by("task", "length", "model",
                                                      maintain_order=True):
        bests = group.filter(pl.col("best"))
        ref = refs.get((task, length, model))
        if ref is None or bests.is_empty():
            continue
        steps = budgets_vary(sweep, task, length)
        best = bests.sort(SETTING).row(0, named=True)
        tried = ", ".join(setting(r, steps) for r in group.sort(SETTING).iter_rows(named=True))
        ours = (f"best by validation {setting(best, steps)}: test "
                f"{pm(best['test_mean'], best['test_std'])}; default {setting(ref, steps)} "
                f"({ref['source']}): {pm(ref['test_mean'], ref['test_std'])}; "
                f"difference {best['test_mean'] - ref['test_mean']:+.2f} pp "
                f"({'settings' if steps else 'rates'}: {tried})")
        figure = paper.paper_accuracy(task, length, model)
        far = "" if figure is None else from_paper(best["test_mean"], ref["test_mean"],
                                                   figure.mean, steps)
        verdict, said = moves(best, ref, steps)
        row = ClaimRow(title.format(task=task, length=length, what="rate or the budget" if steps
                                    else "rate", model=model.upper()),
                       "no figure" if figure is None else f"{model.upper()} {figure.mean:.2f}",
                       ours, verdict, said, beside=far)
        rows.append(budget.read(row, steps=(best["steps"], ref["steps"]),
                                seeds=(best.get("seeds"), ref.get("seeds"))))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return learning_rate_claims(tables["sweep"], budget)
