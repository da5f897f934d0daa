"""Figures of the per-example readings (``hkt aggregate``, :mod:`hkt.report.per_example`).

* :func:`accuracy_by_depth`: test accuracy against ListOps tree depth, and against the depth the
  answer needs (the first rule that answers right), one panel each per (task, T), one line per
  model (mean over seeds, band = ± std), the rule references as grey marks (each its own shape,
  named in the legend; unjoined: against the answer depth a rule is 0 or 100 % by construction),
  the test examples per point under each tick, and the runs it leaves out named under the panels.
  On our ListOps nearly every tree has depth 9, so the answer depth is the panel that varies.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import polars as pl

from hkt.figures.common import color, empty, legend_outside, pyplot, save, style
from hkt.rule_references import RULE_REFERENCES
from hkt.runs_frame import MODEL_ORDER, ordered, task_keys

#: The breakdown facets drawn, with their x-axis label.
FACETS = {"depth": "tree depth (the root is 1)",
          "answer depth": "answer depth (the first rule that answers right)"}


def accuracy_by_depth(breakdown: pl.DataFrame, path: str | Path,
                      undrawn: list[str] | None = None) -> Path:
    """The breakdown table's depth rows as lines: accuracy (%) against each depth facet;
    ``undrawn``: the runs left out and why (:func:`hkt.report.example_runs.undrawn`), written
    under the panels."""
    sel = breakdown.filter(pl.col("facet").is_in(list(FACETS)))
    note = ("Not drawn: " + "; ".join(undrawn) + ".") if undrawn else ""
    if sel.is_empty():
        return empty(Path(path), "no run has predictions on a task with tree depths"
                     + (f"\n{note}" if note else ""))
    panels = [(task, length, facet) for task, length in task_keys(sel) for facet in FACETS
              if not sel.filter((pl.col("task") == task) & (pl.col("length") == length)
                                & (pl.col("facet") == facet)).is_empty()]
    fig, axes = pyplot().subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8),
                                  squeeze=False)
    for ax, (task, length, facet) in zip(axes[0], panels):
        part = sel.filter((pl.col("task") == task) & (pl.col("length") == length)
                          & (pl.col("facet") == facet))
        models = ordered(part["model"].unique().to_list(), MODEL_ORDER)
        for i, model in enumerate(m for m in models if m not in RULE_REFERENCES):
            rows = part.filter(pl.col("model") == model).sort("order")
            x, y = rows["order"].to_numpy(), rows["accuracy_mean"].to_numpy()
            std = rows["accuracy_std"].fill_null(0.0).to_numpy()
            ax.plot(x, y, marker=style(i)[0], ls="-", lw=1.4, color=color(model, i), label=model)
            ax.fill_between(x, y - std, y + std, color=color(model, i), alpha=0.15, lw=0)
        rule_marks(ax, part, [m for m in models if m in RULE_REFERENCES])
        ticks = part.select("order", "bucket", "examples").unique().sort("order")
        ax.set_xticks(ticks["order"].to_list())
        ax.set_xticklabels([f"{b}\nn={n:,}" for b, n in ticks.select("bucket", "examples").rows()],
                           fontsize=7)
        ax.set_xlabel(FACETS[facet] + "; n: test examples")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{task} (T={length}): accuracy by {facet}", fontsize=9)
        ax.grid(alpha=0.3)
        legend_outside(ax, fontsize=7)
    if note:
        fig.text(0.01, -0.02, textwrap.fill(note, 160), ha="left", va="top", fontsize=7)
    return save(fig, path)


#: A mark per rule reference, in the rules' order (prior, depth 1, 2, 3, exact).
RULE_MARKS = ("_", "<", ">", "p", "*", "h", "8")
#: How far (x units) the rule references' marks of one bucket spread apart, so that rules with
#: the same accuracy there stay visible side by side.
RULE_SPREAD = 0.3


def rule_marks(ax: Any, part: pl.DataFrame, rules: list[str]) -> None:
    """The rule references as hollow grey marks at their accuracy per bucket, each its own shape and
    named in the legend, spread a little along x; unjoined: against the answer depth each rule
    is 0 % or 100 % by construction, and a line between buckets would only zig-zag."""
    for i, rule in enumerate(rules):
        rows = part.filter(pl.col("model") == rule).sort("order")
        offset = (i - (len(rules) - 1) / 2) * RULE_SPREAD / max(1, len(rules) - 1)
        ax.plot(rows["order"].to_numpy() + offset, rows["accuracy_mean"].to_numpy(), ls="none",
                marker=RULE_MARKS[i % len(RULE_MARKS)], ms=7, mew=1.2, mfc="none", color="0.3",
                label=RULE_REFERENCES[rule], zorder=4)
