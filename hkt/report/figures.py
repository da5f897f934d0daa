"""Figures (PNG) from the runs frame and the validation curves of :mod:`hkt.report.aggregate`.

* :func:`val_curves`: validation accuracy over training steps, one panel per task, one line per
  model (mean over seeds, band = min..max over seeds).
* :func:`accuracy_vs_levels`: test accuracy of HKT against the number of pyramid levels L on the
  ablation task, seeds as dots, MHA as a reference line, the paper's points where it has them.
* :func:`main_bar`: the main table as grouped bars (mean, error bar = std over seeds, dots =
  seeds), with the paper's figures as markers.

Every function writes a figure even without data (a panel saying so), so a workflow can declare
its outputs up front.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hkt.report import paper
from hkt.report.aggregate import MODEL_ORDER, TASK_ORDER, most_common_length

COLORS = {"mha": "#4C72B0", "hkt": "#DD8452", "conv": "#55A868", "ngram": "#8172B3",
          "majority": "#937860"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _color(model: str, i: int) -> str:
    return COLORS.get(model, f"C{i % 10}")


def _sorted(values: list[str], order: tuple[str, ...]) -> list[str]:
    return sorted(values, key=lambda v: (order.index(v) if v in order else len(order), v))


def _task_keys(df: pl.DataFrame) -> list[tuple[str, int]]:
    keys = df.select("task", "length").unique().rows()
    return sorted(keys, key=lambda k: (TASK_ORDER.index(k[0]) if k[0] in TASK_ORDER
                                        else len(TASK_ORDER), k[0], k[1] or 0))


def _empty(path: Path, text: str) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.text(0.5, 0.5, text, ha="center", va="center")
    ax.set_axis_off()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _plt().close(fig)
    return path


def val_curves(curves: pl.DataFrame, path: str | Path, variants: tuple[str, ...] = ("main",)) -> Path:
    """Validation accuracy (%) against step, per task (panels) and model (lines)."""
    sel = curves.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return _empty(Path(path), "no validation curves (no runs of the main table)")
    plt = _plt()
    keys = _task_keys(sel)
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.4), squeeze=False)
    for ax, (task, length) in zip(axes[0], keys):
        part = sel.filter((pl.col("task") == task) & (pl.col("length") == length))
        models = _sorted(part["model"].unique().to_list(), MODEL_ORDER)
        for i, model in enumerate(models):
            g = (part.filter(pl.col("model") == model).group_by("step")
                 .agg((pl.col("val_accuracy").mean() * 100).alias("mean"),
                      (pl.col("val_accuracy").min() * 100).alias("lo"),
                      (pl.col("val_accuracy").max() * 100).alias("hi"),
                      pl.col("seed").n_unique().alias("n")).sort("step"))
            n = g["n"].max()
            c = _color(model, i)
            ax.plot(g["step"], g["mean"], marker="o", ms=3, color=c, label=f"{model} ({n} seed{'s' if n != 1 else ''})")
            ax.fill_between(g["step"], g["lo"], g["hi"], color=c, alpha=0.2, linewidth=0)
        ax.set_title(f"{task} (T={length})")
        ax.set_xlabel("step")
        ax.set_ylabel("validation accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def accuracy_vs_levels(runs: pl.DataFrame, path: str | Path, task: str = "listops",
                       length: int | None = None, main_variant: str = "main") -> Path:
    """HKT test accuracy (%) against L on (task, T), other HKT settings at their main values."""
    sel = runs.filter((pl.col("task") == task) & (pl.col("model") == "hkt"))
    if length is None:
        length = most_common_length(sel)
    sel = sel.filter(pl.col("length") == length) if length is not None else sel.clear()
    main = sel.filter(pl.col("variant") == main_variant)
    if not main.is_empty():  # keep runs that differ from the main HKT in L only
        ref = main.row(0, named=True)
        for col in ("stride", "fusion", "upsample", "kernel_size", "d_model", "d_ffn", "n_layers"):
            if ref[col] is not None:
                sel = sel.filter(pl.col(col) == ref[col])
    if sel.is_empty() or sel["levels"].drop_nulls().is_empty():
        return _empty(Path(path), f"no HKT runs on {task} to plot against levels")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    g = (sel.group_by("levels").agg((pl.col("test_accuracy").mean() * 100).alias("mean"),
                                    (pl.col("test_accuracy").std(ddof=1) * 100).alias("std"))
         .sort("levels"))
    ax.errorbar(g["levels"], g["mean"], yerr=g["std"].fill_null(0), marker="o", capsize=4,
                color=COLORS["hkt"], label="HKT (ours, mean ± std)")
    ax.scatter(sel["levels"], sel["test_accuracy"] * 100, s=12, color=COLORS["hkt"], alpha=0.5,
               label="HKT seeds")
    mha = runs.filter((pl.col("task") == task) & (pl.col("length") == length)
                      & (pl.col("model") == "mha") & (pl.col("variant") == main_variant))
    if not mha.is_empty():
        ax.axhline(mha["test_accuracy"].mean() * 100, ls="--", color=COLORS["mha"],
                   label="MHA (ours)")
    hkt_paper = paper.paper_accuracy(task, length or -1, "hkt")
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
    ax.legend(fontsize=8)
    return _save(fig, path)


def main_bar(runs: pl.DataFrame, path: str | Path, variants: tuple[str, ...] = ("main",)) -> Path:
    """The main table as bars: per task, one bar per model (mean ± std), seeds as dots."""
    sel = runs.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return _empty(Path(path), "no runs of the main table")
    plt = _plt()
    keys = _task_keys(sel)
    models = _sorted(sel["model"].unique().to_list(), MODEL_ORDER)
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
            ax.bar(x, accs.mean(), width * 0.9, yerr=std, capsize=3, color=_color(model, i),
                   label=model)
            ax.scatter([x] * len(accs), accs, s=10, color="black", zorder=3)
            ref = paper.paper_accuracy(task, length or -1, model)
            if ref is not None:
                ax.scatter([x], [ref.mean], marker="_", s=300, color="red", zorder=4,
                           label="paper")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{t}\nT={n}" for t, n in keys])
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Main table: mean ± std over seeds (dots: seeds)")
    ax.grid(axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))  # one legend entry per model (and the paper)
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, ncol=min(4, len(uniq)))
    return _save(fig, path)
