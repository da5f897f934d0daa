"""Figures of one run's analyses (``hkt analyze``): κ per level, λ distributions, per-token λ,
level truncation, the approximation residuals. Each takes the run's analysis table (or λ arrays) and a title."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from hkt.figures.common import empty, legend_outside, log_ticks, pyplot, save, title_budget
from hkt.paper import KURTOSIS as PAPER_KAPPA
from hkt.run_record import APPROXIMATION_SECTION, APPROXIMATION_STATES
from hkt.runs_frame import task_keys


#: What Mardia's κ is computed over, per quantity: its dimension d (a score entry is a scalar).
KAPPA_DIMENSION = {"scores": "score entries (scalars, d = 1)",
                   "queries": "query vectors (d = head width)",
                   "keys": "key vectors (d = head width)"}


def kappa_per_level(table: pl.DataFrame, path: Path, title: str) -> Path:
    """κ per level (mean over layers and heads, min–max bars) vs Gaussian 1 and the paper's ≈33."""
    kurt = table.filter((pl.col("section") == "kurtosis") & (pl.col("metric") == "kappa"))
    fig, ax = pyplot().subplots(figsize=(5.5, 3.6))
    for offset, quantity in zip((-0.2, 0.0, 0.2), ("scores", "queries", "keys")):
        sub = kurt.filter(pl.col("quantity") == quantity).group_by("level").agg(
            pl.col("value").mean().alias("mean"), pl.col("value").min().alias("lo"),
            pl.col("value").max().alias("hi")).sort("level")
        if sub.is_empty():
            continue
        x = sub["level"].to_numpy() + offset
        mean = sub["mean"].to_numpy()
        err = np.vstack([mean - sub["lo"].to_numpy(), sub["hi"].to_numpy() - mean])
        ax.errorbar(x, mean, yerr=err, fmt="o", capsize=3, label=KAPPA_DIMENSION[quantity])
    ax.axhline(1.0, color="gray", ls="--", lw=1, label="Gaussian (κ = 1)")
    ax.axhline(PAPER_KAPPA, color="tab:red", ls=":", lw=1, label=f"paper (κ ≈ {PAPER_KAPPA:g})")
    ax.set_yscale("log")
    log_ticks(ax)
    ax.set_xlabel("level l")
    ax.set_ylabel("normalised Mardia kurtosis κ")
    ax.set_xticks(sorted(set(kurt["level"].to_list())))
    ax.set_title(title, fontsize=9)
    legend_outside(ax, fontsize=7)
    return save(fig, path)


def lambda_distribution(samples: dict[tuple[int, int], np.ndarray], path: Path, title: str) -> Path:
    """Box plots of λ_l over real tokens, per layer (heads pooled)."""
    layers = sorted({layer for layer, _ in samples})
    fig, axes = pyplot().subplots(1, len(layers), figsize=(3.2 * len(layers), 3.2), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        lam = np.concatenate([v for (ly, _), v in samples.items() if ly == layer])
        ax.boxplot([lam[:, l] for l in range(lam.shape[1])], showfliers=False)
        ax.set_xticks(range(1, lam.shape[1] + 1), [f"l={l}" for l in range(lam.shape[1])])
        ax.set_ylim(0, 1)
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_ylabel("λ_l")
    fig.suptitle(title, fontsize=9)
    return save(fig, path)


def lambda_example(lam: np.ndarray, path: Path, title: str) -> Path:
    """λ_l(i) over the tokens of one sequence, first layer, one panel per head (stacked areas)."""
    heads, t, levels = lam.shape
    fig, axes = pyplot().subplots(heads, 1, figsize=(7, 1.6 * heads + 0.6), squeeze=False, sharex=True)
    for h, ax in enumerate(axes[:, 0]):
        ax.stackplot(np.arange(t), *[lam[h, :, l] for l in range(levels)], labels=[f"level {l}" for l in range(levels)])
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"head {h}")
    legend_outside(axes[0, 0], fontsize=7)  # the stacked areas fill the panel: none is free
    axes[-1, 0].set_xlabel("token position i")
    fig.suptitle(title, fontsize=9)
    return save(fig, path)


def truncation_curve(table: pl.DataFrame, path: Path, title: str) -> Path:
    """Accuracy against the number of levels kept L′ (levels < L′, λ renormalised)."""
    sub = table.filter((pl.col("section") == "truncation") & (pl.col("metric") == "accuracy")).sort("level")
    fig, ax = pyplot().subplots(figsize=(4.5, 3.2))
    ax.plot(sub["level"].to_numpy(), 100 * sub["value"].to_numpy(), marker="o")
    ax.set_xlabel("levels kept L′ (levels < L′)")
    ax.set_ylabel("accuracy (%)")
    ax.set_xticks(sub["level"].to_list())
    ax.set_title(title, fontsize=9)
    return save(fig, path)


#: How the two states of the approximation figure are told apart: trained in a dark solid line
#: of filled marks, initialisation in a light dashed line of hollow ones (a layer keeps its mark).
STATE_STYLE = {"trained": {"color": "#1f3b73", "ls": "-", "mfc": None},
               "init": {"color": "#e07b39", "ls": "--", "mfc": "white"}}
#: One mark per layer in the approximation figure.
LAYER_MARKERS = ("o", "s", "^", "D", "v", "P")


def approximation_residuals(analyses: pl.DataFrame, path: Path, budget: str = "") -> Path:
    """Score residual vs L′ (log scale): one colour and line style per state (trained solid and
    dark, initialisation dashed, light and hollow), one mark per layer; one panel per task, T and
    variant; points are geometric means over heads and seeds; ``budget``: the analysed runs'
    (:func:`hkt.figures.common.budget_title`), in the title."""
    res = analyses.filter((pl.col("section") == APPROXIMATION_SECTION) & (pl.col("metric") == "score_residual")
                          & (pl.col("value") > 0))
    if res.is_empty():
        return empty(Path(path), "no approximation measurements (no HKT analyses)")
    order = {k: i for i, k in enumerate(task_keys(res))}  # the tasks in the other figures' order
    keys = sorted(res.select("task", "length", "variant").unique().rows(),
                  key=lambda k: (order[(k[0], k[1])], k[2]))
    fig, axes = pyplot().subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4), squeeze=False)
    for ax, (task, length, variant) in zip(axes[0], keys):
        sub = res.filter((pl.col("task") == task) & (pl.col("length") == length)
                         & (pl.col("variant") == variant))
        curves = (sub.group_by("layer", "quantity", "level")
                  .agg(pl.col("value").log().mean().exp().alias("r")).sort("level"))
        for state in APPROXIMATION_STATES:
            s = STATE_STYLE.get(state, {"color": "0.4", "ls": ":", "mfc": None})
            for layer in sorted(curves["layer"].unique()):
                c = curves.filter((pl.col("layer") == layer) & (pl.col("quantity") == state))
                if not c.is_empty():
                    ax.plot(c["level"].to_numpy(), c["r"].to_numpy(), ls=s["ls"], color=s["color"],
                            marker=LAYER_MARKERS[layer % len(LAYER_MARKERS)], ms=6,
                            mfc=s["mfc"] or s["color"], mec=s["color"],
                            label=f"{state}, layer {layer}")
        ax.set_yscale("log")
        log_ticks(ax)
        ax.set_xticks(np.unique(curves["level"].to_numpy()))
        ax.set_xlabel("levels kept L′ (L′ = L is exactly 0)")
        ax.set_ylabel("‖S_L′ − S_L‖ / ‖S_L‖")
        ax.set_title(f"{task} (T={length}), {variant}", fontsize=9)
        ax.grid(alpha=0.3, which="major")
        legend_outside(ax, fontsize=7)
    title_budget(fig, budget)
    return save(fig, Path(path))
