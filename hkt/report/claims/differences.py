"""Reading an accuracy difference (a row of the gap, ablation, controls or learning-rate gap
table): its :class:`~hkt.report.reading.Reading` over seeds (Welch) and by the error model
(:func:`primary`: the seeds plus the test set's paired, else binomial, variance;
hkt/report/stats.py), the verdict against a claimed value (:func:`difference_verdict`), and their
prose, written once here."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.claims.budget import profile_said
from hkt.report.reading import Reading, Verdict
from hkt.report.tables import level

__all__ = ["primary", "welch", "interval_text", "difference_verdict", "both", "beside_seeds",
           "size_text", "main_budget"]


def welch(r: dict[str, Any], key: str = "ours_pp") -> Reading:
    """A difference row's reading over seeds alone (Welch), without a verdict."""
    return Reading(r.get(key), r.get("ci_low_pp"), r.get("ci_high_pp"), method="Welch over seeds",
                   p_value=r.get("p_value"), why=r.get("significant") or "too few seeds")


def primary(r: dict[str, Any], key: str = "ours_pp") -> Reading:
    """A difference row's error-model reading: ``paired_*``, else ``ts_*`` (no interval where
    neither has one), without a verdict."""
    for prefix, how in (("paired_", "paired"), ("ts_", "binomial")):
        low, high = r.get(f"{prefix}ci_low_pp"), r.get(f"{prefix}ci_high_pp")
        if low is not None and high is not None:
            return Reading(r.get(key), low, high, method=f"seeds + test set, {how}",
                           p_value=r.get(f"{prefix}p_value"))
    return Reading(r.get(key), None, None, method="seeds + test set")


def interval_text(r: dict[str, Any], key: str = "ours_pp") -> str:
    """A difference, its CI and p over seeds (Welch), then by the error model
    (:func:`primary`), or why a side has none."""
    seeds, model = welch(r, key), primary(r, key)
    ours = "?" if seeds.estimate is None else f"{seeds.estimate:+.2f}"
    if not seeds.has_interval:
        return f"{ours} pp (no interval: {seeds.why})"
    p = "" if seeds.p_value is None else f", p = {seeds.p_value:.3g}"
    text = (f"{ours} pp, Welch over seeds {level()} CI [{seeds.low:+.2f}, {seeds.high:+.2f}]"
            f"{p}")
    if model.has_interval:
        tp = "" if model.p_value is None else f", p = {model.p_value:.3g}"
        text += f"; {model.method} [{model.low:+.2f}, {model.high:+.2f}]{tp}"
    if r.get("paired_ci_low_pp") is None and r.get("paired_why"):
        text += f" (not paired: {r['paired_why']})"
    return text


def difference_verdict(low: float | None, high: float | None, claimed: float) -> Verdict:
    """The reading of a claimed difference ``claimed`` (pp; its sign is the direction) from our
    interval [``low``, ``high``]: direction and size apart (hkt/report/claims/__init__.py)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return Verdict.CANNOT_TELL
    sign = 1 if claimed > 0 else -1
    if (low > 0 and sign > 0) or (high < 0 and sign < 0):
        return Verdict.SUPPORTS if low <= claimed <= high else Verdict.DIRECTION_ONLY
    if (high < 0 and sign > 0) or (low > 0 and sign < 0):
        return Verdict.REFUTES
    return Verdict.CANNOT_TELL


def beside_seeds(model: str, seeds: str, how: str, *, same: bool = True) -> str:
    """The error model's reading ``model`` with Welch's over seeds alone ``seeds`` beside it
    where they differ (where they agree, ``same`` says so): the one sentence of a verdict
    that changes between the two."""
    if model == seeds:
        return f"{model} ({how}, as over seeds alone)" if same else model
    return f"{model} ({how}; over seeds alone: {seeds})"


def both(r: dict[str, Any], claimed: float) -> tuple[Verdict, str]:
    """The verdict on a claimed difference by the error model's interval (:func:`primary`),
    and its text, with Welch's reading over seeds alone beside it."""
    seeds = difference_verdict(r.get("ci_low_pp"), r.get("ci_high_pp"), claimed)
    model = primary(r)
    if not model.has_interval:
        return seeds, str(seeds)
    verdict = difference_verdict(model.low, model.high, claimed)
    return verdict, beside_seeds(str(verdict), str(seeds), model.method)


def size_text(claimed: float, r: dict[str, Any]) -> str:
    """Whether the paper's value lies in our interval over seeds and in the error model's
    (:func:`primary`), which the reading rests on."""
    seeds, model = welch(r), primary(r)
    if not seeds.has_interval:
        return ""
    where = "inside" if seeds.low <= claimed <= seeds.high else "outside"
    text = f"; the paper's {claimed:+.2f} pp lies {where} our interval over seeds"
    if model.has_interval:
        ts = "inside" if model.low <= claimed <= model.high else "outside"
        text += f", {ts} the {model.method} one" + (" (the reading changes)" if ts != where else "")
    return text


def main_budget(main: pl.DataFrame, task: str, length: int) -> str:
    """The budget of HKT's and MHA's main-table rows on a task, in words: our paper profile,
    or another budget (its epochs), whose direction only the row then reads."""
    rows = main.filter((pl.col("task") == task) & (pl.col("length") == length)
                       & pl.col("model").is_in(["hkt", "mha"]))
    profiles = sorted({p for p in rows["profile"].to_list() if p})
    epochs = [e for e in rows["epochs"].to_list() if e is not None] \
        if "epochs" in rows.columns else []
    ep = f", {min(epochs):.2f} epochs" if epochs else ""
    return profile_said(profiles, f"at a {'/'.join(profiles)} budget{ep}, not the paper's: the "
                                  "direction at that budget, not the paper's value")
