"""Which rule a ListOps model reaches, example by example: its accuracy minus each rule's on the
same test examples, a model against a rule (:func:`hkt.report.stats.paired_difference` with
``rule``: t over its seeds plus the paired test-set variance), placed among the rules as
:func:`hkt.rule_references.reading` places an unpaired accuracy, and the frame the claims read
(:func:`rule_readings_frame`: task, length, variant, model, verdict, reading)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from hkt.rule_references import RULE_REFERENCES, Place, Placement, placement
from hkt.report.example_runs import Readings, seed_groups
from hkt.report.rule_agreement import PRIOR, rule_columns
from hkt.report.stats import Difference, paired_difference
from hkt.report.writers import pm

__all__ = ["RuleReading", "rule_readings", "rule_readings_frame", "RULE_READINGS_SCHEMA"]

#: The frame of every variant's paired rule readings (the claims' ``rule_readings`` table).
RULE_READINGS_SCHEMA = {"task": pl.String, "length": pl.Int64, "variant": pl.String,
                        "model": pl.String, "relation": pl.String, "verdict": pl.String,
                        "reading": pl.String}
#: The method a paired rule reading names.
PAIRED = "seeds + test set, paired"


@dataclass(frozen=True)
class RuleReading:
    """A model's paired placement among the rules and what it does where the prior is wrong."""

    placement: Placement
    agreement: str

    @property
    def verdict(self) -> str:
        """The first place without its numbers (``at the root-operator prior``)."""
        return self.placement.verdict

    @property
    def text(self) -> str:
        """The placement with its numbers, then the agreement with the prior."""
        return self.placement.text + self.agreement


def _place(label: str, d: Difference, level: str) -> Place:
    relation = "at" if d.ci_low <= 0 <= d.ci_high else "above" if d.ci_low > 0 else "below"
    return Place(relation, label, d.diff, low=d.ci_low, high=d.ci_high, level=level,
                 method=PAIRED)


def rule_readings(r: Readings, runs: pl.DataFrame, agreement: pl.DataFrame,
                  variant: str = "main") -> dict[tuple[str, int | None, str], RuleReading]:
    """Per ListOps model with predictions on two seeds or more, which rule it reaches: *at* the
    rules whose paired interval of (model − rule) holds 0, else *above* the highest it clears
    and *below* the next; with its agreement with the prior and its accuracy where the prior
    is wrong (``agreement``). A model of one seed has no seed variance: no reading here."""
    out = {}
    agree = {(a["task"], a["length"], a["model"]): a for a in agreement.iter_rows(named=True)}
    for task, length, model, (correct, _, _), _ in seed_groups(r, runs, variant):
        a = agree.get((task, length, model))
        if a is None or correct.shape[0] < 2:
            continue
        fact = r.facts[(task, length)]
        label = fact["label"].to_numpy()
        places = [_place(RULE_REFERENCES[rule],
                         paired_difference(correct, (fact[rule].to_numpy() == label)[None, :],
                                           r.settings.confidence, rule=True),
                         r.settings.level)
                  for rule in rule_columns(fact)]
        prior = RULE_REFERENCES[PRIOR]
        said = (f"; it answers as the {prior} on {pm(a[f'agree_{PRIOR}'], a[f'agree_{PRIOR}_std'])}"
                f"% of the test examples, and gets {pm(a['prior_wrong_mean'], a['prior_wrong_std'])}"
                f"% right of the {a['prior_wrong_examples']} the {prior} gets wrong")
        out[(task, length, model)] = RuleReading(placement(places), said)
    return out


def rule_readings_frame(r: Readings, runs: pl.DataFrame, agreement: pl.DataFrame,
                        variants: Sequence[str]) -> pl.DataFrame:
    """Every variant's :func:`rule_readings` as a frame: its verdict beside its text."""
    rows = [(t, n, v, m, reading.placement.relation, reading.verdict, reading.text) for v in variants
            for (t, n, m), reading in rule_readings(
                r, runs, agreement.filter(pl.col("variant") == v), v).items()]
    return pl.DataFrame(rows, schema=RULE_READINGS_SCHEMA, orient="row")
