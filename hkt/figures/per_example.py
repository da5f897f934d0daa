"""Figures of the per-example readings (``hkt aggregate``, :mod:`hkt.report.per_example`).

* :func:`accuracy_by_depth`: test accuracy against ListOps tree depth, one panel per (task, T),
  one line per model (mean over seeds, band = ± std), the rule references as grey dotted lines
  (each rule's accuracy at each depth: a rule reading the tree to depth k is exact up to k).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hkt.figures.common import color, empty, legend_outside, pyplot, save, style
from hkt.references import RULE_REFERENCES
from hkt.runs_frame import MODEL_ORDER, ordered, task_keys


def accuracy_by_depth(breakdown: pl.DataFrame, path: str | Path, facet: str = "depth") -> Path:
    """The breakdown table's ``facet`` rows (depth) as lines: accuracy (%) against depth."""
    sel = breakdown.filter(pl.col("facet") == facet)
    if sel.is_empty():
        return empty(Path(path), "no run has predictions on a task with tree depths")
    keys = task_keys(sel)
    fig, axes = pyplot().subplots(1, len(keys), figsize=(5.5 * len(keys), 3.6), squeeze=False)
    for ax, (task, length) in zip(axes[0], keys):
        part = sel.filter((pl.col("task") == task) & (pl.col("length") == length))
        models = ordered(part["model"].unique().to_list(), MODEL_ORDER)
        rules = [m for m in models if m in RULE_REFERENCES]
        trained = [m for m in models if m not in RULE_REFERENCES]
        for i, model in enumerate(trained):
            rows = part.filter(pl.col("model") == model).sort("order")
            x = [int(b) for b in rows["bucket"]]
            y = rows["accuracy_mean"].to_numpy()
            marker, _ = style(i)
            ax.plot(x, y, marker=marker, ls="-", lw=1.4, color=color(model, i), label=model)
            std = rows["accuracy_std"].fill_null(0.0).to_numpy()
            ax.fill_between(x, y - std, y + std, color=color(model, i), alpha=0.15, lw=0)
        for i, rule in enumerate(rules):
            rows = part.filter(pl.col("model") == rule).sort("order")
            shade = str(0.25 + 0.35 * i / max(1, len(rules) - 1))
            ax.plot([int(b) for b in rows["bucket"]], rows["accuracy_mean"].to_numpy(), ls=":",
                    lw=1.2, color=shade, label=RULE_REFERENCES[rule])
        ax.set_xticks(sorted({int(b) for b in part["bucket"]}))
        ax.set_xlabel("tree depth (the root is 1)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{task} (T={length}): accuracy by tree depth", fontsize=9)
        ax.grid(alpha=0.3)
        legend_outside(ax)
    return save(fig, path)
