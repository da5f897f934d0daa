"""Summaries of HKT's fusion weights λ (a distribution over levels per head, or per token).

λ has shape (..., L): every leading index is one distribution over the L levels (static fusion:
one per head; dynamic fusion: one per head and query token). The statistics pool all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from hkt.analysis.kernel import as_float64

__all__ = ["LambdaStats", "dominant_level", "lambda_stats"]


@dataclass(frozen=True)
class LambdaStats:
    """Per-level statistics of λ pooled over all distributions (arrays of length L).

    Entropy is in nats, 0·log 0 = 0; ``max_entropy`` = log L (uniform λ), so
    ``mean_entropy / max_entropy`` near 1 means the levels are mixed evenly, near 0 that one
    level takes everything.
    """

    n: int  # number of distributions pooled
    n_levels: int
    mean: np.ndarray
    std: np.ndarray  # population std (ddof=0)
    quantile_levels: tuple[float, ...]
    quantiles: np.ndarray  # (len(quantile_levels), L)
    mean_entropy: float
    max_entropy: float
    dominant_share: np.ndarray  # fraction of distributions whose argmax is each level

    def rows(self) -> list[dict[str, Any]]:
        """One dict per level (a tidy table: level, mean, std, q05, q50, q95, dominant_share)."""
        out = []
        for lvl in range(self.n_levels):
            row: dict[str, Any] = {"level": lvl, "mean": float(self.mean[lvl]), "std": float(self.std[lvl])}
            for q, v in zip(self.quantile_levels, self.quantiles[:, lvl]):
                row[f"q{round(q * 100):02d}"] = float(v)
            row["dominant_share"] = float(self.dominant_share[lvl])
            out.append(row)
        return out


def _validated(lam: Any, atol: float) -> np.ndarray:
    lam = as_float64(lam)
    if lam.ndim == 0 or lam.shape[-1] == 0 or lam.size == 0:
        raise ValueError(f"lambda: need shape (..., L) with L ≥ 1, got {lam.shape}")
    lam = lam.reshape(-1, lam.shape[-1])
    if not np.isfinite(lam).all():
        raise ValueError("lambda: holds NaN or inf")
    if lam.min() < -atol:
        raise ValueError(f"lambda: negative weight {lam.min():.3g} (fusion weights are a convex combination)")
    worst = float(np.abs(lam.sum(axis=1) - 1.0).max())
    if worst > atol:
        raise ValueError(f"lambda: weights must sum to 1 over the last axis (off by {worst:.3g})")
    return lam


def dominant_level(lam: Any) -> np.ndarray:
    """Index of the largest weight per distribution, shape lam.shape[:-1] (ties: lowest level)."""
    return np.argmax(as_float64(lam), axis=-1)


def lambda_stats(lam: Any, *, quantiles: Sequence[float] = (0.05, 0.5, 0.95),
                 atol: float = 1e-4) -> LambdaStats:
    """Per-level mean, std, quantiles, dominance and the mean entropy of λ (shape (..., L)).

    quantiles: probabilities for numpy.quantile (linear interpolation).
    atol: tolerance for λ ≥ 0 and Σ_l λ_l = 1 (float32 softmax is accurate to ~1e-6).
    """
    lam = _validated(lam, atol)
    n, n_levels = lam.shape
    safe = np.clip(lam, 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(safe > 0, safe * np.log(safe), 0.0)
    entropy = -plogp.sum(axis=1)
    dom = np.bincount(np.argmax(lam, axis=1), minlength=n_levels) / n
    qs = tuple(float(q) for q in quantiles)
    return LambdaStats(
        n=n, n_levels=n_levels, mean=lam.mean(axis=0), std=lam.std(axis=0),
        quantile_levels=qs, quantiles=np.quantile(lam, qs, axis=0).reshape(len(qs), n_levels),
        mean_entropy=float(entropy.mean()), max_entropy=math.log(n_levels), dominant_share=dom,
    )
