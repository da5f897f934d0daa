"""Statistics behind the tables: is a difference between two models more than seed noise?

Three seeds give a mean ± std, not a verdict. For a difference of mean accuracies the tables
report Welch's t-test over seeds (unequal variances: HKT and MHA need not spread alike), the 95%
confidence interval of the difference and whether it excludes zero; for a single run's accuracy
the Wilson score interval of a binomial proportion (correct answers out of test examples), which
stays inside [0, 1] and behaves at 0% and 100%, unlike the normal approximation. The formulas are
``scipy.stats``'s, not hand-written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

__all__ = ["Difference", "welch_difference", "wilson_interval"]


@dataclass(frozen=True)
class Difference:
    """``mean(a) - mean(b)`` with Welch's test; NaN where the seeds cannot tell (see ``reason``)."""

    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    df: float
    n_a: int
    n_b: int
    confidence: float
    reason: str = ""  # why the test is undefined ("" when it is defined)

    @property
    def significant(self) -> bool | None:
        """True/False at level 1 - confidence; None when the test is undefined."""
        if math.isnan(self.p_value):
            return None
        return bool(self.p_value < 1 - self.confidence)

    @property
    def verdict(self) -> str:
        """What the significance column says, in words."""
        sig = self.significant
        if sig is None:
            return f"n/a ({self.reason})"
        level = f"{100 * (1 - self.confidence):g}%"
        return f"yes (p < {level})" if sig else f"no (p ≥ {level})"


def welch_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Difference:
    """Welch's two-sided t-test of ``mean(a) - mean(b)`` and its confidence interval."""
    x = np.asarray([v for v in a if v is not None and not math.isnan(v)], dtype=np.float64)
    y = np.asarray([v for v in b if v is not None and not math.isnan(v)], dtype=np.float64)
    diff = float(x.mean() - y.mean()) if x.size and y.size else math.nan
    nan = math.nan
    if x.size < 2 or y.size < 2:
        return Difference(diff, nan, nan, nan, nan, int(x.size), int(y.size), confidence,
                          reason="fewer than 2 seeds on a side")
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # identical values (var() would give ~1e-33, not 0)
        return Difference(diff, diff, diff, nan, nan, int(x.size), int(y.size), confidence,
                          reason="no spread over seeds")
    res = _st.ttest_ind(x, y, equal_var=False)
    ci = res.confidence_interval(confidence_level=confidence)
    return Difference(diff, float(ci.low), float(ci.high), float(res.pvalue), float(res.df),
                      int(x.size), int(y.size), confidence)


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``correct / n`` (NaNs when ``n`` is 0)."""
    if n <= 0:
        return math.nan, math.nan
    ci = _st.binomtest(int(correct), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
