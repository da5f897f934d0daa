"""Figures across runs (``hkt aggregate``), from the runs frame and curves of :mod:`hkt.runs_frame`
and the tables of the analyses.

* :func:`val_curves`: validation accuracy over training steps, one panel per task, one line per
  model (mean over seeds, band = min..max over seeds).
* :func:`accuracy_vs_levels`: test accuracy of HKT against the number of pyramid levels L on the
  ablation task, seeds as dots, MHA as a comparison line, the paper's points where it has them.
* :func:`main_bar`: the main table as grouped bars (mean, error bar = std over seeds, dots =
  seeds), with the paper's figures as markers.
* :func:`kappa_by_level`: κ of the score entries per level, per (task, T), from the kurtosis
  table; :func:`truncation_by_task`: accuracy against levels kept, per (task, T) and variant.

Every function writes a figure even without data (a panel saying so), so a workflow can declare
its outputs up front.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hkt import paper
from hkt.figures.common import (budget_title, color, empty, integer_ticks, legend_outside,
                                log_ticks, min_span, pyplot, rule_lines, save, style,
                                task_panels, title_budget)
from hkt.rule_references import is_reference, lines
from hkt.runs_frame import MODEL_ORDER, most_common_length, ordered, task_keys

#: The least span (percentage points) of a validation-curve panel's accuracy axis: each task
#: has its own scale, and a gap of a point or two must not fill the panel.
VAL_CURVES_MIN_SPAN_PP = 20.0
#: The main bar figure: a bar whose seeds (or error bar) reach below this many points has its
#: mean written above them, not at its foot, where the seeds' dots would cover it.
VALUE_LABEL_CLEAR_PP = 7.0
#: The main bar figure: room (points) above the highest rule reference for its name, written
#: above its line, so that the exact evaluator's 100.0 stays inside the frame.
RULE_HEADROOM_PP = 7.0
#: The least span (percentage points) of the truncation figure's accuracy axis: a near-flat
#: curve is drawn flat, not stretched over the whole panel.
TRUNCATION_MIN_SPAN_PP = 10.0


def val_curves(curves: pl.DataFrame, path: str | Path, variants: tuple[str, ...] = ("main",),
               runs: pl.DataFrame | None = None) -> Path:
    """Validation accuracy (%) against step, per task (panels) and model (lines), with the rule
    references among ``runs`` (their validation accuracy) as dotted lines."""
    sel = curves.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return empty(Path(path), "no validation curves (no runs of the main table)")
    fig, panels = task_panels(sel, 4.5, 3.4)
    for ax, task, length, part in panels:
        models = ordered(part["model"].unique().to_list(), MODEL_ORDER)
        drawn: dict[tuple, str] = {}  # a mean curve -> the first model drawn with it
        for i, model in enumerate(models):
            g = (part.filter(pl.col("model") == model).group_by("step")
                 .agg((pl.col("val_accuracy").mean() * 100).alias("mean"),
                      (pl.col("val_accuracy").min() * 100).alias("lo"),
                      (pl.col("val_accuracy").max() * 100).alias("hi"),
                      pl.col("seed").n_unique().alias("n")).sort("step"))
            n = g["n"].max()
            c = color(model, i)
            marker, ls = style(i)  # identical curves stay visible: one drawn over the other
            curve = tuple(zip(g["step"].to_list(), g["mean"].round(6).to_list()))
            # a curve equal to one drawn before lies under it: its legend entry says so
            same = f", same curve as {drawn[curve]}" if curve in drawn else ""
            drawn.setdefault(curve, model)
            ax.plot(g["step"], g["mean"], marker=marker, ms=6 - i % 3, ls=ls, mfc="none", color=c,
                    label=f"{model} ({n} seed{'s' if n != 1 else ''}{same})")
            ax.fill_between(g["step"], g["lo"], g["hi"], color=c, alpha=0.2, linewidth=0)
        rule_lines(ax, lines(runs if runs is not None else pl.DataFrame(), task, length),
                   "val")
        ax.set_title(f"{task} (T={length})")
        ax.set_xlabel("step")
        min_span(ax, VAL_CURVES_MIN_SPAN_PP)
        lo, hi = ax.get_ylim()
        if lo < 0:  # widened below what an accuracy can be: the same span from 0
            ax.set_ylim(0.0, hi - lo)
        # each task's panel has its own scale: the axis says so where it does not start at 0
        ax.set_ylabel("validation accuracy (%)" + ("" if ax.get_ylim()[0] <= 0 else
                                                   "\nthis panel's own scale, not from 0"))
        ax.grid(alpha=0.3)
        legend_outside(ax, fontsize=8)
    shown = None if runs is None else runs.filter(pl.col("variant").is_in(list(variants)))
    title_budget(fig, budget_title(shown))
    return save(fig, path)


def accuracy_vs_levels(runs: pl.DataFrame, path: str | Path, task: str = paper.ABLATION_TASK,
                       length: int | None = None, main_variant: str = "main",
                       model: str = "hkt", baseline: str = "mha") -> Path:
    """``model``'s test accuracy (%) against L on (task, T), its other settings at their main
    values, with ``baseline``'s main runs as a comparison line."""
    sel = runs.filter((pl.col("task") == task) & (pl.col("model") == model))
    if length is None:
        length = most_common_length(sel)
    sel = sel.filter(pl.col("length") == length) if length is not None else sel.clear()
    main = sel.filter(pl.col("variant") == main_variant)
    if not main.is_empty():  # keep runs that differ from the main model in L only
        ref = main.row(0, named=True)
        for col in ("stride", "fusion", "upsample", "kernel_size", "d_model", "d_ffn", "n_layers"):
            if ref[col] is not None:
                sel = sel.filter(pl.col(col) == ref[col])
    if sel.is_empty() or sel["levels"].drop_nulls().is_empty():
        return empty(Path(path), f"no {model.upper()} runs on {task} to plot against levels")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    g = (sel.group_by("levels").agg((pl.col("test_accuracy").mean() * 100).alias("mean"),
                                    (pl.col("test_accuracy").std(ddof=1) * 100).alias("std"))
         .sort("levels"))
    seeds = sel["seed"].n_unique()
    ax.errorbar(g["levels"], g["mean"], yerr=g["std"].fill_null(0), marker="o", capsize=4,
                color=color(model, 0),
                label=f"{model.upper()} (ours, " + ("mean ± std)" if seeds > 1 else "one seed)"))
    ax.scatter(sel["levels"], sel["test_accuracy"] * 100, s=12, color=color(model, 0), alpha=0.5,
               label=f"{model.upper()} seed{'s' if seeds > 1 else ''}")
    base = runs.filter((pl.col("task") == task) & (pl.col("length") == length)
                       & (pl.col("model") == baseline) & (pl.col("variant") == main_variant))
    if not base.is_empty():
        ax.axhline(base["test_accuracy"].mean() * 100, ls="--", color=color(baseline, 1),
                   label=f"{baseline.upper()} (ours)")
    rule_lines(ax, lines(runs, task, length))
    hkt_paper = paper.paper_accuracy(task, length or -1, model)
    nh = paper.ABLATION_NO_HIERARCHY
    if hkt_paper is not None:
        xs, ys = [paper.LEVELS], [hkt_paper.mean]
        if (task, length) == (nh["task"], nh["length"]):
            xs.insert(0, nh["levels"])
            ys.insert(0, hkt_paper.mean + nh["delta_pp"])
        ax.scatter(xs, ys, marker="s", facecolors="none", edgecolors="black", s=40,
                   label="paper")
    ax.set_xticks(sorted(set(g["levels"].to_list()) | {nh["levels"], paper.LEVELS}))
    ax.set_xlabel("pyramid levels L")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{task} (T={length}): accuracy vs levels")
    ax.grid(alpha=0.3)
    legend_outside(ax, fontsize=8)
    title_budget(fig, budget_title(pl.concat([sel, base], how="diagonal_relaxed")))
    return save(fig, path)


def main_bar(runs: pl.DataFrame, path: str | Path, variants: tuple[str, ...] = ("main",)) -> Path:
    """The main table as bars: per task, one bar per model (mean ± std), seeds as dots; the rule
    references as dotted lines across their task's bars."""
    every = runs.filter(pl.col("variant").is_in(list(variants)))
    sel = every.filter(~is_reference(every))
    if sel.is_empty():
        return empty(Path(path), "no runs of the main table")
    plt = pyplot()
    keys = task_keys(sel)
    models = ordered(sel["model"].unique().to_list(), MODEL_ORDER)
    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(keys) * max(1, len(models)) / 2), 3.8))
    for i, model in enumerate(models):
        for j, (task, length) in enumerate(keys):
            part = sel.filter((pl.col("task") == task) & (pl.col("length") == length)
                              & (pl.col("model") == model))
            if part.is_empty():
                continue
            x = j - 0.4 + width * (i + 0.5)
            accs = part["test_accuracy"] * 100
            std = accs.std(ddof=1) if len(accs) > 1 else 0.0
            ax.bar(x, accs.mean(), width * 0.9, yerr=std, capsize=3, color=color(model, i),
                   label=model)
            # each bar's mean written at its foot: a bar at 0 % has no height to see, and the
            # top is the seeds', the error bar's and the paper's; where a seed lies as low as
            # the label would, above the seeds and the error bar instead
            low = min(accs.min(), accs.mean() - std) < VALUE_LABEL_CLEAR_PP
            ax.text(x, max(accs.max(), accs.mean() + std) + 1.0 if low else 0.5,
                    f"{accs.mean():.1f}", ha="center", va="bottom", fontsize=7, zorder=5)
            ax.scatter([x] * len(accs), accs, s=10, color="black", zorder=3, clip_on=False)
            ref = paper.paper_accuracy(task, length or -1, model)
            if ref is not None:
                ax.scatter([x], [ref.mean], marker="_", s=300, color="red", zorder=4,
                           label="paper")
    refs = []
    for j, (task, length) in enumerate(keys):
        refs += lines(every, task, length)
        rule_lines(ax, lines(every, task, length), span=(j - 0.45, j + 0.45))
    top = max([r.test for r in refs] + [ax.get_ylim()[1] - RULE_HEADROOM_PP])
    ax.set_ylim(0, top + RULE_HEADROOM_PP)  # a rule's name at 100 % inside the frame
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{t}\nT={n}" for t, n in keys])
    ax.set_ylabel("test accuracy (%)")
    # what a reader must know beside the bars (paper_caveat, examples_note) is its caption's:
    # hkt.report.summary and workflow/report/main_bar.rst
    ax.set_title("Main table: mean ± std over seeds", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))  # one legend entry per model (and the paper)
    # below the axes: inside, it hid the paper's marks (drawn high, above every bar)
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, ncol=min(6, len(uniq)), frameon=False,
              loc="upper center", bbox_to_anchor=(0.5, -0.22))
    title_budget(fig, budget_title(sel))
    return save(fig, path)


def kappa_by_level(kurtosis: pl.DataFrame, path: Path, budget: str = "") -> Path:
    """κ of the score entries per level, one panel per (task, T), each model beside 1 and the
    paper; ``kurtosis`` is :func:`hkt.report.analysis_tables.kurtosis_table`'s output;
    ``budget``: the analysed runs' (:func:`hkt.figures.common.budget_title`), in the title."""
    t = kurtosis.filter(pl.col("quantity") == "scores") if not kurtosis.is_empty() else kurtosis
    if t.is_empty():
        return empty(path, "no kurtosis measurements (no analysed run exposes its scores)")
    fig, panels = task_panels(t)
    for ax, task, length, part in panels:
        for offset, model in zip((-0.1, 0.1, 0.0), sorted(part["model"].unique())):
            sub = part.filter(pl.col("model") == model).sort("level")
            mean = sub["kappa_mean"].to_numpy()
            err = [mean - sub["kappa_min"].to_numpy(), sub["kappa_max"].to_numpy() - mean]
            ax.errorbar(sub["level"].to_numpy() + offset, mean, yerr=err, fmt="o", capsize=3, label=model)
        integer_ticks(ax, part["level"].to_list())
        ax.axhline(1.0, color="gray", ls="--", lw=1, label="Gaussian")
        ax.axhline(paper.KURTOSIS, color="tab:red", ls=":", lw=1, label=f"paper ≈ {paper.KURTOSIS:g}")
        ax.set_yscale("log")
        log_ticks(ax)
        ax.set_title(f"{task} (T={length})", fontsize=9)
        ax.set_xlabel("level l")
        # Mardia's κ in d dimensions; a score entry is one number, so d = 1 (queries and keys,
        # in the run's own figure, are vectors of the head's width)
        ax.set_ylabel("κ of the score entries\n(each a scalar: Mardia's d = 1)")
        legend_outside(ax, fontsize=7)
    title_budget(fig, budget)
    return save(fig, path)


def truncation_by_task(analyses: pl.DataFrame, path: Path, budget: str = "",
                       runs: pl.DataFrame | None = None) -> Path:
    """Accuracy vs levels kept L′ per (task, T) and variant, mean over seeds with the seed
    range; ``analyses`` holds the runs' analysis tables (its truncation accuracy rows are used);
    ``budget``: the analysed runs', in the title; ``runs``: the runs frame, whose test examples
    each panel's title sets beside the analysis' sample (as the truncation table's caption)."""
    rows = analyses.filter(pl.col("section") == "truncation")
    acc = rows.filter(pl.col("metric") == "accuracy")
    examples = rows.filter(pl.col("metric") == "examples")
    if acc.is_empty():
        return empty(path, "no level truncation (it applies to HKT; no HKT run was analysed)")
    fig, panels = task_panels(acc)
    for ax, task, length, sub in panels:
        n = examples.filter((pl.col("task") == task) & (pl.col("length") == length))["value"]
        for i, variant in enumerate(sorted(sub["variant"].unique().to_list())):
            curve = (sub.filter(pl.col("variant") == variant).group_by("level")
                     .agg((pl.col("value") * 100).mean().alias("mean"), (pl.col("value") * 100).min().alias("lo"),
                          (pl.col("value") * 100).max().alias("hi")).sort("level"))
            mean = curve["mean"].to_numpy()
            marker, ls = style(i)
            ax.errorbar(curve["level"].to_numpy(), mean, capsize=3, marker=marker, ls=ls,
                        label=variant,
                        yerr=[mean - curve["lo"].to_numpy(), curve["hi"].to_numpy() - mean])
        integer_ticks(ax, sub["level"].to_list())
        min_span(ax, TRUNCATION_MIN_SPAN_PP)  # one example in a few hundred must not look large
        ax.set_title(f"{task} (T={length})" + sample_note(n, runs, task, length), fontsize=9)
        ax.set_xlabel("levels kept L′")
        ax.set_ylabel("test accuracy (%)")
        legend_outside(ax, fontsize=7)
    title_budget(fig, budget)
    return save(fig, path)


def sample_note(examples: pl.Series, runs: pl.DataFrame | None, task: str, length: int) -> str:
    """What a truncation panel's title says of its test examples: the analysis' seeded sample
    (``truncation_examples``, config/analysis.yaml) and, where they differ, the main table's."""
    if not len(examples):
        return ""
    n = int(examples.max())
    main = [] if runs is None or "test_examples" not in runs.columns else sorted(
        {v for v in runs.filter((pl.col("task") == task) & (pl.col("length") == length))
         ["test_examples"].to_list() if v is not None})
    if main == [n]:
        return f"\n{n:,} test examples, as the main table"
    where = f"\nthe main table: {'/'.join(f'{m:,}' for m in main)}" if main else ""
    return f"\n{n:,} test examples, the analysis' sample{where}"  # lines: panels sit close
