"""Which rule reference every other trained variant reaches (ablations, learning-rate and budget
variants: the suite's own runs), read as :mod:`~hkt.report.claims.rule_reach` reads a main-table
row, so that every trained run of a task with rules gets its reading. The rules are the suite's
own runs', else those among the borrowed runs (``hkt aggregate --borrow`` records, which the
row names); where the per-example readings have the model and variant, the paired one."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt.rule_references import is_reference, lines, reading
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.rule_reach import paired_readings, placed_row, test_error
from hkt.report.reading import ClaimRow
from hkt.report.report_settings import confidence
from hkt.report.writers import pm

KEYS: tuple[str, ...] = ()
TABLES = ("rule_readings", "borrowed")


def _rules(budget: Budget, borrowed: pl.DataFrame | None, task: str, length: int
           ) -> tuple[list, str]:
    """A task's rule lines: the suite's own, else the ``borrowed`` runs' (and their records)."""
    refs, where = lines(budget.runs, task, length), ""
    if not refs and borrowed is not None:
        refs = lines(borrowed, task, length)
        sources = sorted({str(s) for s in borrowed.filter(
            is_reference(borrowed) & (pl.col("task") == task)
            & (pl.col("length") == length))["source"].to_list() if s})
        where = f"; the rules' records: {', '.join(sources)}" if refs and sources else ""
    return refs, where


def variant_rule_reach_claims(budget: Budget, borrowed: pl.DataFrame | None = None,
                              paired: pl.DataFrame | None = None) -> list[ClaimRow]:
    """Per task, T, trained model and variant other than the main one: which rule reference its
    test accuracy reaches."""
    by_example = paired_readings(paired if paired is not None and "variant" in paired.columns
                                 else None)
    trained = budget.trained()
    if trained.is_empty():
        return []
    trained = trained.filter(pl.col("variant") != budget.main)
    title = claim_config("rule_reach_variants")["title"]
    rows: list[ClaimRow] = []
    for (task, length, model, variant), group in sorted(
            trained.group_by("task", "length", "model", "variant"), key=lambda kv: str(kv[0])):
        refs, where = _rules(budget, borrowed, task, length)
        if not refs:
            continue
        test = group["test_accuracy"]  # mean, then percent: as the tables (39.675 is 39.68 in both)
        n = group["test_examples"].drop_nulls()
        mean, seeds = float(test.mean()) * 100, group["seed"].n_unique()
        std = None if len(test) < 2 else float(test.std(ddof=1)) * 100
        relation, verdict, ours = by_example.get((task, length, variant, model)) or (None,) * 3
        if ours is not None:  # read against the rules' answers in the task's facts
            where = ""
        else:
            placed = reading(mean, test_error(mean, std, seeds, int(n.min()) if len(n) else None),
                             refs, confidence())
            relation, verdict, ours = placed.relation, placed.verdict, placed.text
        row = placed_row(title.format(model=model.upper(), variant=variant, task=task,
                                      length=length), "no figure (a variant)",
                         f"{pm(mean, std)} ({seeds} seed{'' if seeds == 1 else 's'}): "
                         f"{ours}{where}", relation, verdict)
        rows.append(budget.read(row, seeds=[seeds],
                                steps=budget.steps(task, length, [model], [variant])))
    return rows


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return variant_rule_reach_claims(budget, tables.get("borrowed"), tables.get("rule_readings"))
