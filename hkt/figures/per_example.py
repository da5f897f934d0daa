"""Figures of the per-example readings (``hkt aggregate``, :mod:`hkt.report.per_example`).

* :func:`accuracy_by_depth`: test accuracy against ListOps tree depth, and against the depth the
  answer needs (the first rule that answers right), one panel each per (task, T), one line per
  model (mean over seeds, band = ± std), the rule references as grey dotted lines. On our
  ListOps nearly every tree has depth 9, so the answer depth is the panel that varies.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hkt.figures.common import color, empty, legend_outside, pyplot, save, style
from hkt.rule_references import RULE_REFERENCES
from hkt.runs_frame import MODEL_ORDER, ordered, task_keys

#: The breakdown facets drawn, with their x-axis label.
FACETS = {"depth": "tree depth (the root is 1)",
          "answer depth": "answer depth (the first rule that answers right)"}


def accuracy_by_depth(breakdown: pl.DataFrame, path: str | Path) -> Path:
    """The breakdown table's depth rows as lines: accuracy (%) against each depth facet."""
    sel = breakdown.filter(pl.col("facet").is_in(list(FACETS)))
    if sel.is_empty():
        return empty(Path(path), "no run has predictions on a task with tree depths")
    panels = [(task, length, facet) for task, length in task_keys(sel) for facet in FACETS
              if not sel.filter((pl.col("task") == task) & (pl.col("length") == length)
                                & (pl.col("facet") == facet)).is_empty()]
    fig, axes = pyplot().subplots(1, len(panels), figsize=(5.5 * len(panels), 3.6),
                                  squeeze=False)
    for ax, (task, length, facet) in zip(axes[0], panels):
        part = sel.filter((pl.col("task") == task) & (pl.col("length") == length)
                          & (pl.col("facet") == facet))
        ticks = part.select("order", "bucket").unique().sort("order")
        models = ordered(part["model"].unique().to_list(), MODEL_ORDER)
        rules = [m for m in models if m in RULE_REFERENCES]
        for i, model in enumerate(m for m in models if m not in RULE_REFERENCES):
            rows = part.filter(pl.col("model") == model).sort("order")
            x, y = rows["order"].to_numpy(), rows["accuracy_mean"].to_numpy()
            std = rows["accuracy_std"].fill_null(0.0).to_numpy()
            ax.plot(x, y, marker=style(i)[0], ls="-", lw=1.4, color=color(model, i), label=model)
            ax.fill_between(x, y - std, y + std, color=color(model, i), alpha=0.15, lw=0)
        for i, rule in enumerate(rules):
            rows = part.filter(pl.col("model") == rule).sort("order")
            shade = str(0.25 + 0.35 * i / max(1, len(rules) - 1))
            ax.plot(rows["order"].to_numpy(), rows["accuracy_mean"].to_numpy(), ls=":", lw=1.2,
                    color=shade, label=RULE_REFERENCES[rule])
        ax.set_xticks(ticks["order"].to_list())
        ax.set_xticklabels(ticks["bucket"].to_list(), fontsize=7)
        ax.set_xlabel(FACETS[facet])
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{task} (T={length}): accuracy by {facet}", fontsize=9)
        ax.grid(alpha=0.3)
        legend_outside(ax, fontsize=7)
    return save(fig, path)
