"""Agreement with the rule references: per ListOps model, the share of test examples on which
it answers what each rule reference answers (the rules' answers are columns of the task's
per-example facts, :mod:`hkt.facts.examples`), and its accuracy where the root-operator prior is
wrong: what it learned beyond the first token. The table as shown:
:func:`hkt.report.example_display.agreement_display`.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from hkt.report.example_runs import Readings, mean_std, seed_groups
from hkt.rule_references import RULE_REFERENCES

__all__ = ["PRIOR", "AGREEMENT_SCHEMA", "rule_columns", "agreement_table"]

#: The root-operator prior: what the "prior gets wrong" columns are read against.
PRIOR = "root_op_prior"

AGREEMENT_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "variant": pl.String, "model": pl.String,
    "seeds": pl.Int64,
    "test_mean": pl.Float64, "test_std": pl.Float64,
    **{f"agree_{rule}": pl.Float64 for rule in RULE_REFERENCES},
    **{f"agree_{rule}_std": pl.Float64 for rule in RULE_REFERENCES},
    "prior_wrong_examples": pl.Int64, "prior_wrong_mean": pl.Float64,
    "prior_wrong_std": pl.Float64}


def rule_columns(fact: pl.DataFrame) -> list[str]:
    """The rules whose answers the task's facts hold (ListOps'), in the rule references' order."""
    return [rule for rule in RULE_REFERENCES if rule in fact.columns]


def agreement_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """Per ListOps model (a task whose facts hold the rules' answers; the rules themselves
    aside): the share (%) of test examples on which it answers what each rule answers, mean
    (and std) over seeds, and its accuracy where the root-operator prior is wrong."""
    rows = []
    for task, length, model, (correct, _, seeds), preds in seed_groups(r, runs, variant):
        fact = r.facts[(task, length)]
        rules = rule_columns(fact)
        if not rules or model in RULE_REFERENCES:
            continue
        row: dict[str, Any] = {"task": task, "length": length, "variant": variant,
                               "model": model,
                               "seeds": len(seeds)}
        row["test_mean"], row["test_std"] = mean_std(correct.mean(axis=1))
        for rule in rules:
            answer = fact[rule].to_numpy()
            row[f"agree_{rule}"], row[f"agree_{rule}_std"] = mean_std((preds == answer).mean(1))
        wrong = fact[PRIOR].to_numpy() != fact["label"].to_numpy()
        row["prior_wrong_examples"] = int(wrong.sum())
        if wrong.any():
            row["prior_wrong_mean"], row["prior_wrong_std"] = mean_std(
                correct[:, wrong].mean(axis=1))
        rows.append(row)
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


