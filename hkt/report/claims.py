"""The summary's reading of the paper's claims: for each, what the paper says, what our runs
measured, and whether they **support** it, **refute** it or **cannot tell**.

The verdicts follow fixed rules on the tables the aggregate step has already built (nothing is
recomputed here), so that a reader can check each one:

- an accuracy difference (HKT − MHA per task; L = 1 − HKT for the hierarchy) is read for its
  direction and its size apart, from Welch's 95% confidence interval over seeds: *supports* when
  the interval lies on the paper's side of zero and holds the paper's value (direction and size);
  *direction only* when it lies on the paper's side but the paper's value lies outside it;
  *refutes* when it lies on the other side of zero; *cannot tell* when it spans zero or the
  seeds cannot give one. A row at a budget other than the paper's reads the direction at that
  budget only, and says so;
- the score cost (≤ 4/3 for any L, 1.3125 for L = 3): an operation count, which the analytic
  formula settles; the measured time ratio is reported beside it, not judged against it;
- the kurtosis κ ≈ 33 of trained scores: *supports* when the paper's value lies within the
  range over layers, heads, levels and seeds of our trained HKT score κ, *refutes* when the
  whole range lies on one side of it; whether the scores are non-Gaussian at all (κ ≠ 1) is
  said beside it;
- geometric decay of the truncation residual (ρ < 1 per added level): *supports* when every
  trained head's fitted ρ is below 1, *refutes* when the mean ρ of a layer is 1 or more,
  *cannot tell* otherwise;
- the kernel theory (a PSD sufficient condition, a rank bound): theorems, which runs cannot
  refute; we report how often their premises hold in trained heads.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.writers import markdown

SUPPORTS, DIRECTION_ONLY, REFUTES, CANNOT_TELL = ("supports", "direction only", "refutes",
                                                  "cannot tell")


def _interval(r: dict[str, Any], key: str = "ours_pp") -> str:
    ours = "?" if r.get(key) is None else f"{r[key]:+.2f}"
    if r.get("ci_low_pp") is None or r.get("ci_high_pp") is None:
        return f"{ours} pp (no interval: {r.get('significant') or 'too few seeds'})"
    p = "" if r.get("p_value") is None else f", p = {r['p_value']:.3g}"
    return f"{ours} pp, 95% CI [{r['ci_low_pp']:+.2f}, {r['ci_high_pp']:+.2f}]{p}"


def difference_verdict(low: float | None, high: float | None, claimed: float) -> str:
    """The reading of a claimed difference ``claimed`` (pp; its sign is the direction) from our
    95% CI [``low``, ``high``]: direction and size apart (the module's rules)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return CANNOT_TELL
    sign = 1 if claimed > 0 else -1
    if (low > 0 and sign > 0) or (high < 0 and sign < 0):
        return SUPPORTS if low <= claimed <= high else DIRECTION_ONLY
    if (high < 0 and sign > 0) or (low > 0 and sign < 0):
        return REFUTES
    return CANNOT_TELL


def _size(claimed: float, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ""
    where = "inside" if low <= claimed <= high else "outside"
    return f"; the paper's {claimed:+.2f} pp lies {where} our interval"


def _budget(main: pl.DataFrame, task: str, length: int) -> str:
    rows = main.filter((pl.col("task") == task) & (pl.col("length") == length)
                       & pl.col("model").is_in(["hkt", "mha"]))
    profiles = sorted({p for p in rows["profile"].to_list() if p})
    if not profiles:
        return ""
    if profiles == [paper.PROFILE]:
        return "at the paper's budget"
    epochs = [e for e in rows["epochs"].to_list() if e is not None] if "epochs" in rows.columns else []
    ep = f", {min(epochs):.2f} epochs" if epochs else ""
    return (f"at a {'/'.join(profiles)} budget{ep}, not the paper's: the direction at that "
            "budget, not the paper's value")


def accuracy_claims(gap: pl.DataFrame, main: pl.DataFrame) -> list[list[str]]:
    """One row per task of the gap table: HKT − MHA, ours against the paper's."""
    rows = []
    for r in gap.iter_rows(named=True):
        if r.get("paper_pp") is None:
            continue
        verdict = difference_verdict(r.get("ci_low_pp"), r.get("ci_high_pp"), r["paper_pp"])
        why = _interval(r) + _size(r["paper_pp"], r.get("ci_low_pp"), r.get("ci_high_pp"))
        budget = _budget(main, r["task"], r["length"])
        rows.append([f"HKT beats MHA on {r['task']} (T={r['length']})",
                     f"{r['paper_pp']:+.2f} pp", why, verdict + (f" ({budget})" if budget else "")])
    return rows


def hierarchy_claim(abl: pl.DataFrame) -> list[list[str]]:
    """The ablation: removing the hierarchy (L = 1) costs −18.4 pp on ListOps."""
    nh = paper.ABLATION_NO_HIERARCHY
    if abl.is_empty():
        return []
    sel = abl.filter((pl.col("model") == nh["model"]) & (pl.col("levels") == nh["levels"]))
    if sel.is_empty():
        return []
    r = sel.row(0, named=True)
    verdict = difference_verdict(r.get("ci_low_pp"), r.get("ci_high_pp"), nh["delta_pp"])
    why = _interval({**r, "ours_pp": r["delta_pp"]}, "ours_pp") + _size(
        nh["delta_pp"], r.get("ci_low_pp"), r.get("ci_high_pp"))
    how = f"; {r['setting']}" if "derived" in (r.get("setting") or "") else ""
    return [[f"Removing the hierarchy (L = 1) hurts on {nh['task']} (T={nh['length']})",
             f"{nh['delta_pp']:+.1f} pp", why + how, verdict]]


def cost_claim(cost: pl.DataFrame) -> list[list[str]]:
    """The score cost: analytic, with the measured time ratios beside it."""
    if cost.is_empty():
        return []
    analytic = cost.filter(pl.col("what").str.starts_with("analytic score FLOPs"))
    if analytic.is_empty():
        return []
    a = analytic.row(0, named=True)
    measured = cost.filter(pl.col("what").str.contains("time, measured"))
    times = ", ".join(f"{r['ratio']:.2f}× at {r['setting']}" for r in measured.iter_rows(named=True))
    verdict = SUPPORTS if a["paper"] is not None and math.isclose(a["ratio"], a["paper"]) \
        else REFUTES
    return [["Score computation costs ≤ 4/3 of MHA's (1.3125× at L = 3, s = 2)",
             f"{paper.SCORE_COST['levels3']}×",
             f"analytic {a['ratio']:.4f}× (an operation count)"
             + (f"; measured attention time: {times} (kernel speed, not operations)" if times else ""),
             f"{verdict} (as an operation count)"]]


def kurtosis_claim(kurt: pl.DataFrame) -> list[list[str]]:
    """κ ≈ 33 for trained score distributions (d = 1 kurtosis of the score entries)."""
    if kurt.is_empty():
        return []
    sel = kurt.filter((pl.col("model") == "hkt") & (pl.col("quantity") == "scores"))
    if sel.is_empty():
        return []
    lo, hi = float(sel["kappa_min"].min()), float(sel["kappa_max"].max())
    claimed = paper.KURTOSIS
    verdict = SUPPORTS if lo <= claimed <= hi else REFUTES
    gaussian = "non-Gaussian (κ > 1)" if lo > 1 else (
        "Gaussian-like in places (κ ≤ 1 in some heads)")
    tasks = ", ".join(sorted(set(sel["task"].to_list())))
    return [["Trained score distributions are strongly non-Gaussian (Mardia κ ≈ 33)",
             f"κ ≈ {claimed:.0f}",
             f"trained HKT score κ {lo:.2f}–{hi:.2f} over layers, heads, levels and seeds "
             f"({tasks}): {gaussian}",
             f"{verdict} the value; the scores are {gaussian}"]]


def decay_claim(approx: pl.DataFrame) -> list[list[str]]:
    """Geometric decay of the truncation residual: the trained rows of the approximation table."""
    if approx.is_empty():
        return []
    trained = approx.filter(pl.col("state") == "trained")
    if trained.is_empty():
        return []
    means = trained["rho_mean"].drop_nulls().drop_nans()
    highs = trained["rho_max"].drop_nulls().drop_nans()
    if means.is_empty():
        return []
    if float(highs.max()) < 1:
        verdict = SUPPORTS
    elif float(means.max()) >= 1:
        verdict = REFUTES
    else:
        verdict = CANNOT_TELL
    levels = int(trained["levels"].max())
    caveat = (" With L = 3 only two truncations lie below L: ρ is a ratio of two residuals, the "
              "geometric shape itself is not tested." if levels == 3 else "")
    return [["The approximation error decays geometrically in L (ρ < 1 per added level)",
             "ρ < 1",
             f"trained ρ per layer {float(means.min()):.2f}–{float(means.max()):.2f} (mean over "
             f"heads and seeds), up to {float(highs.max()):.2f} in one head.{caveat}",
             verdict]]


def kernel_claim(kernel: pl.DataFrame) -> list[list[str]]:
    """The kernel theorems: how often their premises hold in trained heads."""
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
    return [["The kernel is PSD under a sufficient condition; the Gram rank is bounded",
             "theorem",
             f"the PSD condition holds in {100 * share:.0f}% of trained HKT (run, layer, head) "
             f"cases{rank}",
             f"{CANNOT_TELL} (a theorem: runs cannot refute it; its premise holds in "
             f"{100 * share:.0f}% of the trained cases)"]]


def claims_section(*, main: pl.DataFrame, gap: pl.DataFrame, abl: pl.DataFrame,
                   tables: dict[str, pl.DataFrame]) -> list[str]:
    """The summary's section: one row per claim the tables can speak to. ``tables`` holds the
    analysis tables by name (kurtosis, kernel, approximation, cost), any of them absent."""
    empty = pl.DataFrame()
    rows = [*accuracy_claims(gap, main), *hierarchy_claim(abl),
            *cost_claim(tables.get("cost", empty)), *kurtosis_claim(tables.get("kurtosis", empty)),
            *decay_claim(tables.get("approximation", empty)),
            *kernel_claim(tables.get("kernel", empty))]
    if not rows:
        return []
    return ["## The paper's claims, read against our runs", "",
            "For each claim: the paper's figure, ours, and whether our runs support it (direction "
            "and size), support its direction only (the paper's size lies outside our interval), "
            "refute it or cannot tell (the rules: `hkt/report/claims.py`). A claim read at a CPU "
            "budget speaks of that budget only.", "",
            markdown(["claim", "paper", "ours", "reading"], rows), ""]
