"""The convergence and time tables (hkt/report/convergence.py): what the results' prose about
"still rising", "flat" and "where the time went" reads, computed from the runs and curves."""

from __future__ import annotations

import polars as pl
import pytest

from hkt.report.convergence import convergence_display, convergence_table, time_table
from hkt.runs_frame import CURVE_COLUMNS, RUN_COLUMNS, frame


def _runs(rows):
    base = {"task": "listops", "length": 512, "variant": "main", "steps": 1000}
    return frame([{**base, **r} for r in rows], RUN_COLUMNS)


def _curves(model, per_seed):
    return frame([{"task": "listops", "length": 512, "model": model, "variant": "main",
                   "seed": seed, "step": step, "val_accuracy": acc}
                  for seed, points in enumerate(per_seed) for step, acc in points], CURVE_COLUMNS)


def test_the_mean_curve_its_best_and_the_seeds_still_rising():
    runs = _runs([{"model": "hkt", "seed": 0, "best_step": 1000},
                  {"model": "hkt", "seed": 1, "best_step": 500},
                  {"model": "majority", "seed": 0, "best_step": None, "external": "ngram"}])
    curves = _curves("hkt", [[(500, 0.30), (1000, 0.40)], [(500, 0.36), (1000, 0.34)]])
    (row,) = convergence_table(runs, curves).iter_rows(named=True)  # the baseline has no curve
    assert (row["best_step_min"], row["best_step_max"], row["best_at_last"]) == (500, 1000, 1)
    assert row["mean_curve_last"] == "500: 33.00, 1000: 37.00"
    assert (row["mean_curve_best"], row["mean_curve_best_step"]) == (pytest.approx(37.0), 1000)
    (shown,) = convergence_display(convergence_table(runs, curves))[1]
    assert shown[5:7] == ["500–1,000", "1 of 2"]


def test_the_time_table_splits_wall_time_into_steps_and_the_rest():
    runs = _runs([{"model": "hkt", "seed": 0, "wall_time_s": 3600.0, "ms_per_step": 2700.0},
                  {"model": "mha", "seed": 0, "wall_time_s": 1800.0, "ms_per_step": 900.0},
                  {"model": "ngram", "seed": 0, "wall_time_s": 60.0, "ms_per_step": 10.0,
                   "external": "hkt.baselines.ngram"}])
    t = time_table(runs)
    listops = t.filter(pl.col("task") == "listops").row(0, named=True)
    assert listops["runs"] == 2 and listops["wall_h"] == pytest.approx(1.5)
    assert listops["steps_h"] == pytest.approx(1.0)  # 2.7 s x 1000 + 0.9 s x 1000
    assert listops["evaluation_share"] == pytest.approx(1 / 3)
    assert t["task"].to_list() == ["listops", "all"]
