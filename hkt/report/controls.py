"""The controls table: every other trained model of the main table (the convolution, S4D)
against the paper's two, HKT and MHA, with Welch's test over seeds.

A control answers a question the HKT − MHA gap cannot: S4D, a model known to learn ListOps far
beyond a Transformer, tells whether our data or the Transformers' recipe stops them where they
stop (issue 39). External baselines are not controls here: they are not trained at the
profile's budget, and the main table shows them beside the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from hkt import paper
from hkt.report.tables import (DIFF_SCHEMA, ci_text, difference_columns, p_text,
                               runs_of, seeds_header, test_set_cells,
                               test_set_header)
from hkt.report.writers import Display, pm, signed

__all__ = ["CONTROLS_SCHEMA", "controls_table", "controls_display"]

CONTROLS_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "test_mean": pl.Float64,
    "test_std": pl.Float64, "versus": pl.String, "versus_mean": pl.Float64,
    "versus_std": pl.Float64, "difference_pp": pl.Float64, **DIFF_SCHEMA,
    "versus_paper": pl.Float64, "minus_paper_pp": pl.Float64}


def controls_table(main: pl.DataFrame, runs: pl.DataFrame,
                   versus: Sequence[str] = paper.COMPARED_MODELS,
                   variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """Per task, T and control model (a trained model of ``main`` other than ``versus``): its
    test accuracy minus each of ``versus``'s (pp), Welch's test over seeds, and the control
    against the paper's figure for that model (``minus_paper_pp``: control − paper)."""
    sel = runs.filter(pl.col("variant").is_in(list(variants)) & pl.col("external").is_null())
    trained = set(sel["model"].to_list())
    rows = []
    by_key = {(r["task"], r["length"], r["model"]): r for r in main.iter_rows(named=True)}
    for r in main.iter_rows(named=True):
        if r["model"] in versus or r["model"] not in trained:
            continue
        for other in versus:
            o = by_key.get((r["task"], r["length"], other))
            if o is None:
                continue
            where = {"task": r["task"], "length": r["length"]}
            stats = difference_columns(runs_of(sel, **where, model=r["model"]),
                                       runs_of(sel, **where, model=other))
            ref = paper.paper_accuracy(r["task"], r["length"] or -1, other)
            rows.append({
                "task": r["task"], "length": r["length"], "model": r["model"],
                "test_mean": r["test_mean"], "test_std": r["test_std"], "versus": other,
                "versus_mean": o["test_mean"], "versus_std": o["test_std"],
                "difference_pp": r["test_mean"] - o["test_mean"], **stats,
                "versus_paper": ref.mean if ref else None,
                "minus_paper_pp": r["test_mean"] - ref.mean if ref else None})
    return pl.DataFrame(rows, schema=CONTROLS_SCHEMA)


def controls_display(controls: pl.DataFrame) -> Display:
    header = ["task", "T", "control", "test acc (%)", "versus", "its test acc (%)",
              "control − versus (pp)", *seeds_header(), *test_set_header(True), "seeds",
              "versus, paper (%)", "control − paper's versus (pp)"]
    rows = [[r["task"], str(r["length"]), r["model"], pm(r["test_mean"], r["test_std"]),
             r["versus"], pm(r["versus_mean"], r["versus_std"]), signed(r["difference_pp"]),
             ci_text(r), p_text(r["p_value"]), r["significant"] or "", *test_set_cells(r, True),
             f"{r['seeds_a']} vs {r['seeds_b']}",
             "" if r["versus_paper"] is None else f"{r['versus_paper']:.2f}",
             signed(r["minus_paper_pp"])] for r in controls.iter_rows(named=True)]
    return header, rows
