"""Readings example by example: each run's test predictions (``predictions.parquet`` beside its
record) against its task's per-example facts (``examples.parquet``, :mod:`hkt.facts.examples`).
The readings live by concept:

* :mod:`hkt.report.example_runs`: the runs' predictions and their tasks' facts, read
  (:class:`~hkt.report.example_runs.Readings`), and each model's seeds stacked;
* :mod:`hkt.report.paired`: paired differences between runs, inside the error model
  (:func:`hkt.report.stats.paired_difference`; docs/per-example.md);
* :mod:`hkt.report.rule_agreement`: per ListOps model, the share of test examples on which it
  answers what each rule reference answers;
* :mod:`hkt.report.buckets`: the readings by bucket and the mechanism's contrast;
* :mod:`hkt.report.example_display`: the per-example tables as shown.

This module holds :func:`rule_readings`: where a model sits among the rules (a model against a
rule: t over its seeds plus the paired test-set variance). Every number of the readings (the
confidence, the depth groups, the length buckets, the smallest bucket read) is
config/report.yaml's (:mod:`hkt.report.report_settings`). Runs without predictions (made
before they were written) give none of these: the tables keep their binomial intervals and the
readings are not written.
"""

from __future__ import annotations

import polars as pl

# the tables' own functions, also read here by hkt.report.build._write_per_example
from hkt.report.example_display import agreement_display, paired_display  # noqa: F401
from hkt.report.example_runs import Readings, compared_variants, seed_groups, undrawn  # noqa: F401
from hkt.report.rule_agreement import PRIOR, agreement_table, rule_columns  # noqa: F401
from hkt.report.stats import Difference, paired_difference
from hkt.report.writers import pm
from hkt.rule_references import RULE_REFERENCES

__all__ = ["rule_readings"]


def rule_readings(r: Readings, runs: pl.DataFrame, agreement: pl.DataFrame,
                  variant: str = "main") -> dict[tuple[str, int | None, str], str]:
    """Per ListOps model with predictions on two seeds or more, which rule it reaches: its
    accuracy minus each rule's on the same test examples, a model against a rule
    (:func:`hkt.report.stats.paired_difference` with ``rule``: t over its seeds plus the paired
    test-set variance); *at* the rules whose interval holds 0, else *above* the highest it
    clears and *below* the next; with its agreement with the prior and its accuracy where the
    prior is wrong (``agreement``). The text starts with the reading ("at the root-operator
    prior (…)"), as the unpaired one does. A model of one seed has no seed variance: it gets
    no reading here."""
    out = {}
    agree = {(a["task"], a["length"], a["model"]): a for a in agreement.iter_rows(named=True)}
    for task, length, model, (correct, _, _), _ in seed_groups(r, runs, variant):
        a = agree.get((task, length, model))
        if a is None or correct.shape[0] < 2:
            continue
        fact = r.facts[(task, length)]
        label = fact["label"].to_numpy()
        diffs = []
        for rule in rule_columns(fact):
            d = paired_difference(correct, (fact[rule].to_numpy() == label)[None, :],
                                  r.settings.confidence, rule=True)
            diffs.append((RULE_REFERENCES[rule], d))

        def said(lab: str, d: Difference) -> str:
            return f"the {lab} ({d.diff:+.2f} pp, {r.settings.level} CI " \
                   f"[{d.ci_low:+.2f}, {d.ci_high:+.2f}], seeds + test set, paired)"

        at = [said(lab, d) for lab, d in diffs if d.ci_low <= 0 <= d.ci_high]
        if at:
            text = "at " + "; at ".join(at)
        else:
            below = [said(lab, d) for lab, d in diffs if d.ci_low > 0]
            above = [said(lab, d) for lab, d in diffs if d.ci_high < 0]
            text = ", ".join([*(["above " + below[-1]] if below else []),
                              *(["below " + above[0]] if above else [])])
        prior = RULE_REFERENCES[PRIOR]
        text += (f"; it answers as the {prior} on {pm(a[f'agree_{PRIOR}'], a[f'agree_{PRIOR}_std'])}"
                 f"% of the test examples, and gets {pm(a['prior_wrong_mean'], a['prior_wrong_std'])}"
                 f"% right of the {a['prior_wrong_examples']} the {prior} gets wrong")
        out[(task, length, model)] = text
    return out
