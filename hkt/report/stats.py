"""Statistics behind the tables: is a difference between two models more than seed noise?

Three seeds give a mean ± std, not a verdict. For a difference of mean accuracies the tables
report Welch's t-test over seeds (unequal variances: HKT and MHA need not spread alike), the 95%
confidence interval of the difference and whether it excludes zero; for a single run's accuracy
the Wilson score interval of a binomial proportion (correct answers out of test examples), which
stays inside [0, 1] and behaves at 0% and 100%, unlike the normal approximation. The formulas are
``scipy.stats``'s, not hand-written.

Seeds share one test set, so the spread over seeds leaves out the test set's own sampling error:
another draw of the test examples would move every seed's accuracy together.
:func:`difference_with_test_set` adds it: each side's mean has variance s²/k (seeds) plus
p(1 − p)/N (its accuracy p on N test examples, binomial), the two sides counted as independent
(conservative: two models tested on the same examples err on many of the same ones, which makes
their difference vary less), with the Welch–Satterthwaite degrees of freedom of the seed terms
(the binomial terms are known variances, of infinite degrees of freedom).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

__all__ = ["Difference", "welch_difference", "wilson_interval", "binomial_variance", "mean_error",
           "difference_with_test_set", "summary_difference_with_test_set", "McNemar", "mcnemar",
           "paired_bootstrap"]


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


def binomial_variance(accuracy_pp: float, n_examples: int | None) -> float:
    """The binomial variance (pp²) of an accuracy of ``accuracy_pp`` % on ``n_examples`` test
    examples: the test set's own sampling error (0 where the count is unknown)."""
    if not n_examples or accuracy_pp is None or math.isnan(accuracy_pp):
        return 0.0
    p = accuracy_pp / 100
    return 1e4 * p * (1 - p) / n_examples


def mean_error(values_pp: Sequence[float], n_examples: int | None) -> float:
    """The standard error (pp) of the mean of ``values_pp`` (one accuracy per seed, on one test
    set of ``n_examples``): seed spread over k seeds plus the test set's binomial error."""
    x = np.asarray([v for v in values_pp if v is not None and not math.isnan(v)], dtype=np.float64)
    if not x.size:
        return math.nan
    seeds = float(x.var(ddof=1)) / x.size if x.size > 1 else 0.0
    return math.sqrt(seeds + binomial_variance(float(x.mean()), n_examples))


def difference_with_test_set(a: Sequence[float], b: Sequence[float], n_a: int | None,
                             n_b: int | None, confidence: float = 0.95) -> Difference:
    """``mean(a) - mean(b)`` (pp) with the seeds' and the test sets' errors (module docstring):
    Welch's test whose variance adds each side's binomial test-set variance."""
    x = np.asarray([v for v in a if v is not None and not math.isnan(v)], dtype=np.float64)
    y = np.asarray([v for v in b if v is not None and not math.isnan(v)], dtype=np.float64)
    var_x = float(x.var(ddof=1)) if x.size > 1 else math.nan
    var_y = float(y.var(ddof=1)) if y.size > 1 else math.nan
    return summary_difference_with_test_set(
        float(x.mean()) if x.size else math.nan, var_x, int(x.size), n_a,
        float(y.mean()) if y.size else math.nan, var_y, int(y.size), n_b, confidence)


def summary_difference_with_test_set(mean_a: float, var_a: float, k_a: int, n_a: int | None,
                                     mean_b: float, var_b: float, k_b: int, n_b: int | None,
                                     confidence: float = 0.95) -> Difference:
    """:func:`difference_with_test_set` from each side's summary: its mean (pp), the sample
    variance of its ``k`` seeds (pp²) and its test examples ``n``, as a table row holds them."""
    nan = math.nan
    diff = mean_a - mean_b
    if k_a < 2 or k_b < 2:
        return Difference(diff, nan, nan, nan, nan, k_a, k_b, confidence,
                          reason="fewer than 2 seeds on a side")
    seeds_a, seeds_b = var_a / k_a, var_b / k_b
    var = seeds_a + seeds_b + binomial_variance(mean_a, n_a) + binomial_variance(mean_b, n_b)
    if var <= 0:
        return Difference(diff, diff, diff, nan, nan, k_a, k_b, confidence,
                          reason="no spread over seeds and no test-set count")
    seed_df = seeds_a ** 2 / (k_a - 1) + seeds_b ** 2 / (k_b - 1)
    df = var ** 2 / seed_df if seed_df > 0 else math.inf
    se = math.sqrt(var)
    dist = _st.norm if math.isinf(df) else _st.t(df)
    half = float(dist.ppf(0.5 + confidence / 2)) * se
    p = float(2 * dist.sf(abs(diff) / se))
    return Difference(diff, diff - half, diff + half, p, df, k_a, k_b, confidence)


# ----------------------------------------------------------------- paired, example by example
# Two models tested on the same examples err on many of the same ones: their difference varies
# less than two independent accuracies' would. With each run's predictions (predictions.parquet)
# the comparison is read pair by pair: McNemar's exact test per pair of seeds (the examples one
# model gets right and the other wrong), and a bootstrap that resamples the test examples (the
# same draw for both sides) and each side's seeds together, so that the interval holds both the
# test set's and the seeds' error without counting the sides as independent.


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test of one pair of runs on the same examples: ``a_only`` examples the
    first gets right and the second wrong, ``b_only`` the reverse; p two-sided (binomial)."""

    a_only: int
    b_only: int
    p_value: float

    def text(self) -> str:
        p = f"{self.p_value:.3f}" if self.p_value >= 0.001 else f"{self.p_value:.1e}"
        return f"{self.a_only}/{self.b_only}, p = {p}"


def mcnemar(a_correct: np.ndarray, b_correct: np.ndarray) -> McNemar:
    """McNemar's exact test of two runs' right/wrong answers on the same examples."""
    a, b = np.asarray(a_correct, bool), np.asarray(b_correct, bool)
    a_only, b_only = int((a & ~b).sum()), int((~a & b).sum())
    n = a_only + b_only
    p = 1.0 if n == 0 else float(_st.binomtest(a_only, n, 0.5).pvalue)
    return McNemar(a_only, b_only, p)


def paired_bootstrap(a_correct: np.ndarray, b_correct: np.ndarray, *, resamples: int, seed: int,
                     confidence: float = 0.95, subsets: tuple[np.ndarray, np.ndarray] | None = None
                     ) -> Difference:
    """The difference (pp) of mean accuracy over seeds, runs ``a_correct`` (seeds × examples,
    right/wrong) minus ``b_correct`` (seeds × the same examples), with its percentile interval
    and two-sided p from ``resamples`` draws (``seed``): each draw resamples the examples (one
    draw for both sides) and each side's seeds. ``subsets`` (two boolean masks over the
    examples: deep, shallow) reads the difference of the difference instead: (a − b on the
    first) − (a − b on the second), each on the drawn examples that fall in it."""
    a = np.atleast_2d(np.asarray(a_correct, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b_correct, dtype=np.float64))
    n = a.shape[1]
    if b.shape[1] != n or n == 0:
        raise ValueError("paired runs must answer the same, non-empty set of examples")
    rng = np.random.default_rng(seed)
    masks = ([np.ones(n, dtype=np.float64)] if subsets is None
             else [np.asarray(m, dtype=np.float64) for m in subsets])

    def stat(weights: np.ndarray, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
        """Per draw (rows of ``weights``: how often each example was drawn), the statistic."""
        parts = []
        for m in masks:
            w = weights * m
            total = w.sum(axis=1)
            acc_a = (w @ a.T) / total[:, None]  # draws × seeds
            acc_b = (w @ b.T) / total[:, None]
            parts.append(np.take_along_axis(acc_a, sa, 1).mean(1)
                         - np.take_along_axis(acc_b, sb, 1).mean(1))
        return 100 * (parts[0] if len(parts) == 1 else parts[0] - parts[1])

    ones = np.ones((1, n))
    diff = float(stat(ones, np.arange(a.shape[0])[None, :], np.arange(b.shape[0])[None, :])[0])
    draws = []
    chunk = max(1, min(resamples, 2_000_000 // n))
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        weights = rng.multinomial(n, np.full(n, 1 / n), size=k).astype(np.float64)
        sa = rng.integers(0, a.shape[0], size=(k, a.shape[0]))
        sb = rng.integers(0, b.shape[0], size=(k, b.shape[0]))
        with np.errstate(invalid="ignore", divide="ignore"):
            draws.append(stat(weights, sa, sb))
    d = np.concatenate(draws)
    d = d[np.isfinite(d)]  # a draw with no example in a subset says nothing
    if d.size == 0:
        return Difference(diff, math.nan, math.nan, math.nan, math.nan, a.shape[0], b.shape[0],
                          confidence, reason="no resample holds examples of both subsets")
    tail = (1 - confidence) / 2
    low, high = np.quantile(d, [tail, 1 - tail])
    # two-sided, counting the observed draw among the draws: never 0 from finitely many
    p = min(1.0, 2 * (min(int((d <= 0).sum()), int((d >= 0).sum())) + 1) / (d.size + 1))
    return Difference(diff, float(low), float(high), p, math.nan, a.shape[0], b.shape[0],
                      confidence)
