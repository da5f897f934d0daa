"""The per-example tables as shown: the cells of an interval and a p-value, and the headers and
rows of the paired table (:mod:`hkt.report.paired`) and the rule agreement table
(:mod:`hkt.report.rule_agreement`); their levels are the configured confidence's
(:class:`hkt.report.report_settings.Settings`)."""

from __future__ import annotations

import polars as pl

from hkt.report.report_settings import Settings
from hkt.report.writers import Display, pm, signed
from hkt.rule_references import RULE_REFERENCES

__all__ = ["ci_text", "p_text", "paired_display", "agreement_display"]


def paired_display(paired: pl.DataFrame, settings: Settings) -> Display:
    """The paired table (:func:`hkt.report.paired.paired_table`) as shown."""
    level = settings.level
    header = ["variant", "task", "T", "model", "versus", "model − versus (pp)",
              f"{level} CI, seeds + test set, paired (pp)", "p, seeds + test set, paired",
              f"significant ({settings.alpha})", f"{level} CI, Welch over seeds (pp)",
              f"{level} CI, seeds + test set, binomial (pp)",
              f"{level} CI, given these runs (pp)", "p, given these runs", "seeds", "examples"]
    return header, [[r["variant"], r["task"], str(r["length"]), r["model"], r["versus"],
                     signed(r["difference_pp"]), ci_text(r["paired_ci_low_pp"], r["paired_ci_high_pp"]),
                     p_text(r["paired_p_value"]), r["paired_significant"] or "",
                     ci_text(r["ci_low_pp"], r["ci_high_pp"]),
                     ci_text(r["ts_ci_low_pp"], r["ts_ci_high_pp"]),
                     ci_text(r["given_runs_ci_low_pp"], r["given_runs_ci_high_pp"]),
                     p_text(r["given_runs_p_value"]),
                     f"{r['seeds_a']} vs {r['seeds_b']}", str(r["examples"])]
                    for r in paired.iter_rows(named=True)]


def ci_text(low: float | None, high: float | None) -> str:
    """An interval's cell, ``[-1.20, +3.40]``; empty where it has none."""
    return "" if low is None or high is None else f"[{signed(low)}, {signed(high)}]"


def p_text(v: float | None) -> str:
    """A p-value's cell: three decimals, or two significant digits below 0.001; empty if none."""
    return "" if v is None else f"{v:.3f}" if v >= 0.001 else f"{v:.1e}"


def agreement_display(t: pl.DataFrame) -> Display:
    """The rule agreement table (:func:`hkt.report.rule_agreement.agreement_table`) as shown."""
    header = ["task", "T", "variant", "model", "seeds", "test acc (%)",
              *(f"agrees with the {label} (%)" for label in RULE_REFERENCES.values()),
              "acc. where the prior is wrong (%)", "examples the prior gets wrong"]
    return header, [[r["task"], str(r["length"]), r["variant"], r["model"], str(r["seeds"]),
                     pm(r["test_mean"], r["test_std"]),
                     *(pm(r[f"agree_{rule}"], r[f"agree_{rule}_std"]) for rule in RULE_REFERENCES),
                     pm(r["prior_wrong_mean"], r["prior_wrong_std"]),
                     str(r["prior_wrong_examples"])] for r in t.iter_rows(named=True)]

