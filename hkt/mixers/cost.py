"""Analytic score-computation cost of HKT relative to standard attention (docs/design.md §2)."""

from __future__ import annotations


def score_cost_ratio(levels: int, stride: int) -> float:
    """Σ_l T_l² d / (T² d) = Σ_{l<L} s^(-2l) for T divisible by s^(L-1).

    1.3125 for (levels=3, stride=2); tends to s²/(s²-1) = 4/3 for stride 2 as levels grow.
    """
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    if stride < 2:
        raise ValueError(f"stride must be >= 2, got {stride}")
    return sum(float(stride) ** (-2 * level) for level in range(levels))


def score_cost_limit(stride: int) -> float:
    """The bound of ``score_cost_ratio`` over all levels: s² / (s² - 1)."""
    if stride < 2:
        raise ValueError(f"stride must be >= 2, got {stride}")
    return stride**2 / (stride**2 - 1)
