"""The figure of one training run: its learning curve (``RUN_DIR/learning_curve.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hkt.figures.common import legend_outside, pyplot, save


def learning_curve(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Loss and accuracy against step, training (window means) and validation.

    Written atomically: a run killed while plotting leaves the previous curve, not half a file.
    """
    plt = pyplot()
    tr = [(r["step"], r["train_loss"], r.get("train_acc")) for r in rows
          if r.get("train_loss") is not None]
    va = [(r["step"], r["val_loss"], r["val_acc"]) for r in rows if r.get("val_acc") is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    if tr:
        ax1.plot([t[0] for t in tr], [t[1] for t in tr], label="train", lw=1)
        ax2.plot([t[0] for t in tr], [t[2] for t in tr], label="train", lw=1, alpha=0.7)
    if va:
        ax1.plot([v[0] for v in va], [v[1] for v in va], "o-", label="validation", ms=3)
        ax2.plot([v[0] for v in va], [v[2] for v in va], "o-", label="validation", ms=3)
    ax1.set(xlabel="step", ylabel="cross-entropy loss", title="loss")
    ax2.set(xlabel="step", ylabel="accuracy", title="accuracy")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        legend_outside(ax)
    fig.suptitle(title)
    return save(fig, path, dpi=110)  # atomic: a run killed while plotting keeps its last curve
