"""What every figure shares: matplotlib set-up, saving, colours, the empty-data panel."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from hkt.fileio import atomic_path
from hkt.runs_frame import task_keys

#: A fixed colour per model, so a model looks the same in every figure.
COLORS = {"mha": "#4C72B0", "hkt": "#DD8452", "conv": "#55A868", "s4d": "#C44E52",
          "ngram": "#8172B3", "majority": "#937860"}


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive Agg backend.

    Imported here, on first use, because importing matplotlib costs about a second: commands
    that draw nothing (``hkt train --print-config``, ``hkt --help``) do not pay it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def color(model: str, i: int) -> str:
    """The model's colour, else the i-th of matplotlib's cycle."""
    return COLORS.get(model, f"C{i % 10}")


#: (marker, line style) pairs that tell lines apart when they lie on top of each other.
STYLES = (("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", (0, (5, 1))), ("x", (0, (1, 3))))


def style(i: int) -> tuple[str, Any]:
    """The i-th line's marker and line style (cycling through :data:`STYLES`)."""
    return STYLES[i % len(STYLES)]


def integer_ticks(ax: Any, values: Any) -> None:
    """x ticks at the integers ``values`` only (levels, levels kept): none between them."""
    ax.set_xticks(sorted({int(v) for v in values}))


#: The mantissas a log axis of more than a decade is labelled at when its powers of ten alone
#: give too few labels.
LOG_TICK_MANTISSAS = ((1,), (1, 2, 5), (1, 2, 3, 5))
#: The least number of labelled ticks on a log axis (one or two labels cannot be read as a scale).
LOG_MIN_LABELS = 3


def log_ticks(ax: Any, axis: str = "y") -> None:
    """Label a log axis at enough ticks to read it (:data:`LOG_MIN_LABELS`): within a decade,
    evenly spaced round values (0.6, 0.8, 1, 1.2, …); over more, powers of ten, with 2 and 5
    (then 3) times them where those are too few; written plainly (``0.6``, ``30``), no
    unlabelled minor ticks between them."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    if lo <= 0:
        return
    ticks: list[float] = []
    if hi / lo < 10:
        ticks = [v for v in MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
                 if lo <= v <= hi]
    else:
        for mantissas in LOG_TICK_MANTISSAS:
            ticks = [m * 10.0 ** e
                     for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                     for m in mantissas if lo <= m * 10.0 ** e <= hi]
            if len(ticks) >= LOG_MIN_LABELS:
                break
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.6g}"))
    target.set_minor_locator(NullLocator())
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)


def min_span(ax: Any, span: float) -> None:
    """Widen the y-axis around its data to at least ``span``, so that a tiny difference on a
    near-flat curve is not drawn across the whole panel."""
    lo, hi = ax.get_ylim()
    if hi - lo < span:
        mid = (lo + hi) / 2
        ax.set_ylim(mid - span / 2, mid + span / 2)


def budget_title(runs: pl.DataFrame | None) -> str:
    """The budget of the trained runs a figure shows, for its title: profile, steps and seeds
    per model ("smoke profile, 12 steps, 1 seed"; ranges where the runs differ), per task and
    T where their budgets differ ("listops T=512: paper profile, …; imdb T=1024: cpu profile,
    …"). External baselines have no profile's budget and are left out; empty without trained
    runs."""
    if runs is None or runs.is_empty():
        return ""
    trained = runs.filter(pl.col("external").is_null()) if "external" in runs.columns else runs
    if trained.is_empty():
        return ""
    if {"task", "length"} <= set(trained.columns):
        per = {(task, length): _budget(trained.filter((pl.col("task") == task)
                                                      & (pl.col("length") == length)))
               for task, length in task_keys(trained)}
        if len(set(per.values())) > 1:
            return "; ".join(f"{task} T={length}: {b}" for (task, length), b in per.items())
    return _budget(trained)


def _budget(trained: pl.DataFrame) -> str:
    """:func:`budget_title` of trained runs read as one."""
    profiles = sorted({p for p in trained["profile"].to_list() if p}) \
        if "profile" in trained.columns else []
    steps = sorted({s for s in trained["steps"].to_list() if s is not None}) \
        if "steps" in trained.columns else []
    keys = [c for c in ("task", "length", "model", "variant") if c in trained.columns]
    seeds = sorted(set(trained.group_by(keys).agg(pl.col("seed").n_unique())["seed"].to_list())) \
        if keys and "seed" in trained.columns else []
    parts = [f"{'/'.join(profiles)} profile"] if profiles else []
    if steps:
        parts.append(f"{_span(steps)} steps")
    if seeds:
        parts.append(f"{_span(seeds)} seed{'' if seeds == [1] else 's'}")
    return ", ".join(parts)


def _span(values: list[int]) -> str:
    """``1,000`` for one value, ``1,000–10,000`` for several (sorted)."""
    return f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,}–{values[-1]:,}"


def title_budget(fig: Any, budget: str) -> None:
    """State the figure's budget (:func:`budget_title`) above its panels."""
    if budget:
        fig.suptitle(f"budget: {budget}", fontsize=8)


def legend_outside(ax: Any, **kwargs: Any) -> None:
    """The axis' legend to the right of its panel, where it covers no line or point (``loc=
    "best"`` still lays it over curves that fill the panel); :func:`save` keeps it in the
    image."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False,
              **kwargs)


def save(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Lay out, write ``fig`` as PNG to ``path`` (directories created) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    with atomic_path(path) as tmp:  # whole or not at all
        # "tight": a legend placed outside the axes (legend_outside) stays in the image
        fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight")
    pyplot().close(fig)
    return path


def empty(path: str | Path, text: str) -> Path:
    """A small figure that only says ``text``: written when there is nothing to plot, so that a
    workflow can declare its figures up front."""
    fig, ax = pyplot().subplots(figsize=(5, 2))
    ax.text(0.5, 0.5, text, ha="center", va="center")
    ax.set_axis_off()
    return save(fig, path)


def task_panels(df: pl.DataFrame, width: float = 4, height: float = 3.2):
    """A figure with one panel per (task, T) of ``df``: (figure, [(axis, task, T, rows)])."""
    keys = task_keys(df)
    fig, axes = pyplot().subplots(1, max(1, len(keys)), figsize=(width * max(1, len(keys)), height),
                                  squeeze=False)
    return fig, [(ax, task, length,
                  df.filter((pl.col("task") == task) & (pl.col("length") == length)))
                 for ax, (task, length) in zip(axes[0], keys)]


#: The font size of a rule reference's name written on its line (the legend's is 8).
RULE_LABEL_SIZE = 8


def rule_lines(ax: Any, refs: list[Any], which: str = "test",
               span: tuple[float, float] | None = None) -> None:
    """Draw the rule references ``refs`` (:class:`hkt.rule_references.Line`, lowest first) as grey
    dotted horizontal lines; ``which``: its ``test`` or ``val`` accuracy; ``span``: the x range.

    Across the whole axis (``span`` None) each line is named in the legend (the panel's, which
    :func:`legend_outside` puts beside it): a name written on the line lay under the curves
    that meet it. Within a span (one task's bars) it is named at the span's right end."""
    for i, ln in enumerate(refs):
        y = getattr(ln, which)
        shade = str(0.25 + 0.35 * i / max(1, len(refs) - 1))  # lower lines darker
        name = f"{ln.label} {y:.1f}"
        if span is None:
            ax.axhline(y, ls=":", lw=1, color=shade, zorder=1, label=name)
            continue
        ax.hlines(y, *span, ls=":", lw=1, color=shade, zorder=1)
        # legible over the bars it crosses: the size of the tick labels' neighbours, dark, on a
        # white ground (tiny grey text was unreadable)
        ax.text(span[1], y, name, ha="right", va="bottom", fontsize=RULE_LABEL_SIZE,
                color="0.1", zorder=5,
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none",
                      "alpha": 0.8})
