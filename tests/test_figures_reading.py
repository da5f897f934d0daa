"""The figures read at a glance (issue 73, looked at as PNGs): rule references as marks of their
own, counts per point and the runs left out named; trained and initialisation lines told apart
on a labelled log axis; equal validation curves said to be equal; the bar figure's labels inside
its frame and off the seeds; the truncation panel's sample set beside the main table's; κ's
d = 1 explained; one seed called one seed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from test_report_aggregate import make_record, suite_records, write_records
from test_report_analysis_tables import fake_analysis

from hkt.figures import analysis as run_figures
from hkt.figures import per_example as example_figures
from hkt.figures import suite as figures
from hkt.report import analysis_tables as at
from hkt.report import example_runs, report_settings
from hkt.runs_frame import curves_from_records, load_records, runs_from_records


def drawn(monkeypatch, module, fn, *args, **kwargs):
    """``fn``'s matplotlib figure, not saved."""
    caught = []
    monkeypatch.setattr(module, "save", lambda fig, path: caught.append(fig) or path)
    fn(*args, **kwargs)
    return caught[0]


def labels(ax, axis: str = "y") -> list[str]:
    """The tick labels a reader sees on ``ax``'s axis (within its limits, not empty)."""
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    ticks = ax.get_yticklabels() if axis == "y" else ax.get_xticklabels()
    return [t.get_text() for t in ticks
            if t.get_text() and lo <= (t.get_position()[1 if axis == "y" else 0]) <= hi]


# ---------------------------------------------------------------- accuracy by depth

BREAKDOWN = pl.DataFrame({
    "task": "listops", "length": 512, "variant": "main", "facet": "answer depth",
    "bucket": ["the prior", "depth 1"] * 3, "order": [0, 1] * 3, "examples": [60, 40] * 3,
    "model": ["mha", "mha", "root_op_prior", "root_op_prior", "depth1_rule", "depth1_rule"],
    "seeds": [3, 3, 1, 1, 1, 1], "accuracy_mean": [80.0, 5.0, 100.0, 0.0, 0.0, 100.0],
    "accuracy_std": [1.0, 1.0, None, None, None, None]})


def test_rules_are_marks_of_their_own_counts_are_per_point_and_left_out_runs_are_named(
        monkeypatch):
    """Five grey dotted rules could not be told apart and zig-zagged 100 - 0 - 100 against the
    answer depth; the smoke suite's trained runs were left out without a word."""
    fig = drawn(monkeypatch, example_figures, example_figures.accuracy_by_depth, BREAKDOWN,
                "unused.png", ["hkt: predictions on 256 of the 2,000 test examples"])
    ax = fig.axes[0]
    rules = [ln for ln in ax.get_lines() if ln.get_label() in ("root-operator prior", "depth-1 rule")]
    assert len(rules) == 2 and {ln.get_linestyle() for ln in rules} == {"None"}  # unjoined
    assert len({ln.get_marker() for ln in rules}) == 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"mha", "root-operator prior", "depth-1 rule"} <= set(legend)
    assert labels(ax, "x") == ["the prior\nn=60", "depth 1\nn=40"]
    assert any("Not drawn: hkt: predictions on 256 of the 2,000 test examples." in t.get_text()
               for t in fig.texts)


def test_the_runs_the_breakdown_leaves_out_are_named_with_why():
    facts = pl.DataFrame({"split": ["test"] * 10, "row": np.arange(10), "label": np.arange(10) % 2})
    label = facts["label"].to_numpy()
    full, part = np.arange(10), np.arange(4)
    runs = {("listops", 512, "hkt", "main", 0): example_runs.Run(full, label, label == label),
            ("listops", 512, "mha", "main", 0): example_runs.Run(part, label[:4], label[:4] == label[:4]),
            ("listops", 512, "conv", "main", 0): example_runs.Run(full, label, label == label)}
    frame = pl.DataFrame([dict(zip(("task", "length", "model", "variant", "seed"), k))
                          for k in [*runs, ("listops", 512, "conv", "main", 1)]])
    r = example_runs.Readings(runs, {("listops", 512): facts}, report_settings.load_settings())
    assert example_runs.undrawn(r, frame) == ["mha: predictions on 4 of the 10 test examples",
                                             "conv: 1 of 2 runs without predictions"]
    assert example_runs.undrawn(r, frame, column="depth") == []  # a task without tree depths


# ---------------------------------------------------------------- approximation, κ

@pytest.fixture
def analyses(tmp_path):
    return at.load_analyses([fake_analysis(tmp_path / "a")])


def test_trained_and_initialisation_lines_differ_and_the_log_axis_is_labelled(analyses,
                                                                              monkeypatch):
    res = pl.DataFrame({"task": "listops", "length": 512, "variant": "main", "seed": 0,
                        "section": "approximation", "metric": "score_residual",
                        "layer": [0, 0, 0, 0], "quantity": ["trained", "trained", "init", "init"],
                        "level": [1, 2, 1, 2], "value": [1.1, 0.9, 1.8, 0.58]})
    ax = drawn(monkeypatch, run_figures, run_figures.approximation_residuals, res, "unused.png").axes[0]
    trained, init = ax.get_lines()
    assert trained.get_color() != init.get_color()
    assert trained.get_linestyle() != init.get_linestyle()
    assert trained.get_markerfacecolor() != init.get_markerfacecolor()
    assert len(labels(ax)) >= 3  # 0.6 … 1.8, not one or two powers of ten (LOG_MIN_LABELS)


def test_kappas_d_is_explained(analyses, monkeypatch):
    ax = drawn(monkeypatch, figures, figures.kappa_by_level, at.kurtosis_table(analyses),
               "unused.png").axes[0]
    assert "each a scalar: Mardia's d = 1" in ax.get_ylabel()
    assert len(labels(ax)) >= 3


def test_the_truncation_panel_says_whose_sample_it_is(analyses, monkeypatch):
    """The smoke suite's panel said 256 test examples where the main table used 32, not why."""
    runs = pl.DataFrame({"task": ["listops"], "length": [512], "test_examples": [32]})
    ax = drawn(monkeypatch, figures, figures.truncation_by_task, analyses, "unused.png",
               runs=runs).axes[0]
    assert ax.get_title().endswith("\n50 test examples, the analysis' sample\nthe main table: 32")
    same = runs.with_columns(pl.lit(50).alias("test_examples"))
    ax = drawn(monkeypatch, figures, figures.truncation_by_task, analyses, "unused.png",
               runs=same).axes[0]
    assert ax.get_title().endswith("\n50 test examples, as the main table")


# ---------------------------------------------------------------- suite figures

def test_equal_validation_curves_say_so(tmp_path, monkeypatch):
    curves = curves_from_records(load_records([write_records(tmp_path, suite_records())]))
    same = curves.with_columns(pl.lit(0.5).alias("val_accuracy"))
    ax = drawn(monkeypatch, figures, figures.val_curves, same, "unused.png").axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["mha (3 seeds)", "hkt (3 seeds, same curve as mha)"]
    ax = drawn(monkeypatch, figures, figures.val_curves, curves, "unused.png").axes[0]
    assert not any("same curve" in t.get_text() for t in ax.get_legend().get_texts())


def test_the_bar_figures_labels_stay_inside_its_frame_and_off_the_seeds(tmp_path, monkeypatch):
    recs = [r for r in suite_records() if r["task"] == "listops" and r["variant"] == "main"]
    recs += [make_record(model="conv", seed=s, test=t, val=t, test_examples=2000)
             for s, t in enumerate((0.02, 0.04, 0.03))]
    recs.append(make_record(model="exact_rule", seed=0, test=1.0, val=1.0, n_params=0,
                            test_examples=2000, external="hkt.baselines.exact_rule",
                            config={"task": {"family": "listops", "max_length": 512},
                                    "model": {"name": "exact_rule", "rule": "exact_rule"}}))
    runs = runs_from_records(load_records([write_records(tmp_path, recs)]))
    ax = drawn(monkeypatch, figures, figures.main_bar, runs, "unused.png").axes[0]
    texts = {t.get_text(): t for t in ax.texts}
    assert ax.get_ylim()[1] >= 100 + figures.RULE_HEADROOM_PP  # "exact evaluator 100.0"
    assert "exact evaluator 100.0" in texts
    assert texts["3.0"].get_position()[1] > 4.0  # conv's mean above its seeds (2, 3, 4 %)
    assert texts["55.0"].get_position()[1] == 0.5  # a tall bar's at its foot


def test_one_seed_is_called_one_seed(tmp_path, monkeypatch):
    recs = [r for r in suite_records() if r["seed"] == 0]
    runs = runs_from_records(load_records([write_records(tmp_path, recs)]))
    ax = drawn(monkeypatch, figures, figures.accuracy_vs_levels, runs, "unused.png").axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "HKT seed" in legend and "HKT (ours, one seed)" in legend and "HKT seeds" not in legend
