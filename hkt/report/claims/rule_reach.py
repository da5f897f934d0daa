"""Which ListOps rule reference each trained model of the main table reaches (per task and T
with rule references, :mod:`hkt.rule_references`, docs/listops.md): *at* a rule when the interval
of their difference (seeds, test set and the rule's own test-set error counted; the report's
confidence) holds 0, else *above* and *below* the nearest; the paper's figure for the model read
the same way. Where the per-example readings have the model, its reading is the paired one,
example by example (:mod:`hkt.report.rule_readings`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from hkt import paper
from hkt.rule_references import RULE_REFERENCES, Line, figure_error, reading
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.reading import ClaimRow, Verdict
from hkt.report.report_settings import confidence
from hkt.report.stats import binomial_variance
from hkt.report.writers import EXAMPLES_MAX, EXAMPLES_MIN, pm
from hkt.runs_frame import EXTERNAL_BUDGETS

KEYS: tuple[str, ...] = ()
TABLES = ("main", "rule_readings")


#: A paired rule reading: its relation (at, above, below), verdict and text.
Paired = tuple[str, str, str]


def paired_readings(paired: pl.DataFrame | None, variant: str | None = None
                    ) -> dict[tuple[Any, ...], Paired]:
    """The per-example rule readings (:func:`hkt.report.rule_readings.rule_readings_frame`) by
    (task, T, model), of ``variant`` (every variant, keyed (task, T, variant, model), when
    None)."""
    if paired is None or "reading" not in paired.columns:
        return {}
    cols = ("relation", "verdict", "reading")
    if variant is None:
        return {(t, n, v, m): tuple(rest) for t, n, v, m, *rest in paired.select(
            "task", "length", "variant", "model", *cols).iter_rows()}
    return {(t, n, m): tuple(rest) for t, n, m, *rest in paired.filter(
        pl.col("variant") == variant).select("task", "length", "model", *cols).iter_rows()}


def placed_row(title: str, paper_said: str, ours: str, relation: str, verdict: str) -> ClaimRow:
    """A rule-reach row: its verdict the first place's ``relation`` (at, above, below)."""
    return ClaimRow(title, paper_said, ours, Verdict(relation) if relation else Verdict.CANNOT_TELL,
                    verdict)


def test_error(test_mean: float, test_std: float | None, seeds: int,
               examples: int | None) -> float:
    """The standard error (pp) of a test mean over ``seeds``: their spread plus the test set's
    sampling error (hkt.report.stats)."""
    spread = (test_std or 0.0) ** 2 / seeds if test_std is not None else 0.0
    return math.sqrt(spread + binomial_variance(test_mean, examples))


def rule_reach_claims(main: pl.DataFrame, budget: Budget = NO_BUDGET,
                      paired: pl.DataFrame | None = None) -> list[ClaimRow]:
    """Per task, T and trained model of the main table with rule references: which rule its
    test accuracy reaches; the paper's figure for the model read the same way (its error: its
    std over the paper's seeds, and a test set of our size)."""
    by_example = paired_readings(paired, budget.main)
    rows: list[ClaimRow] = []
    if main.is_empty() or not main["model"].is_in(list(RULE_REFERENCES)).any():
        return rows
    title = claim_config("rule_reach")["title"]
    for (task, length), group in main.group_by("task", "length", maintain_order=True):
        refs = [Line(r["model"], RULE_REFERENCES[r["model"]], r["val_mean"], r["test_mean"],
                     r[EXAMPLES_MIN] if r[EXAMPLES_MIN] == r[EXAMPLES_MAX] else None)
                for r in group.iter_rows(named=True) if r["model"] in RULE_REFERENCES]
        refs.sort(key=lambda ln: list(RULE_REFERENCES).index(ln.model))
        if not refs:
            continue
        for r in group.iter_rows(named=True):
            if (r.get("budget") or "").startswith(EXTERNAL_BUDGETS):  # baselines: not read
                continue
            relation, verdict, ours = by_example.get((task, length, r["model"])) or (None,) * 3
            if ours is None:
                placed = reading(r["test_mean"], test_error(
                    r["test_mean"], r["test_std"], r["seeds"], r[EXAMPLES_MIN]),
                    refs, confidence())
                relation, verdict, ours = placed.relation, placed.verdict, placed.text
            figure = paper.paper_accuracy(task, length, r["model"])
            theirs = "no figure"
            if figure is not None:
                err = figure_error(figure.mean, figure.std, paper.SEEDS, refs[0].test_examples)
                theirs = (f"{r['model'].upper()} {figure.mean:.2f}: "
                          f"{reading(figure.mean, err, refs, confidence()).text}")
            row = placed_row(title.format(model=r["model"].upper(), task=task, length=length),
                             theirs, f"{pm(r['test_mean'], r['test_std'])} ({r['seeds']} seeds): "
                             f"{ours}", relation, verdict)
            rows.append(budget.read(row, seeds=[r["seeds"]],
                                    steps=budget.main_steps(task, length, [r["model"]])))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return rule_reach_claims(tables["main"], budget, tables.get("rule_readings"))
