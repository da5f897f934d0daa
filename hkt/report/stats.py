"""Statistics behind the tables: the error model of a difference between two trained models.

A difference of mean test accuracies carries two errors (docs/per-example.md, "The error
model"): **training randomness**, the seeds, the unit of replication of "model A beats model
B"; and **the test set's sampling error**, the examples, which every seed shares. The primary
interval of A − B (``k_A``, ``k_B`` seeds) is

    mean_A − mean_B ± t_df · √V,   V = s_A²/k_A + s_B²/k_B + v_ts,

where ``v_ts`` is the test set's sampling variance of the difference: *paired*
(:func:`paired_test_variance`: the variance over examples of the per-example difference of
the two models' seed-averaged correctness, over n) where both sides' predictions are read,
*binomial* (:func:`binomial_variance` of each side, counted as independent) otherwise; and
``df`` is Welch–Satterthwaite's of the seed terms alone, so that adding ``v_ts`` can only widen
the interval: it is never narrower than Welch's over seeds (:func:`welch_difference`). A model
against a rule (one deterministic answer per example, no seeds): t on k − 1 degrees of freedom
over ``s²/k`` plus the paired ``v_ts``. One seed on a side gives no seed variance and no
interval. :func:`given_runs_difference` reads the runs as fixed (only the examples drawn
again): a reading *given these runs*, which no verdict rests on.

For a single run's accuracy: the Wilson score interval. The formulas are ``scipy.stats``'s;
multiplicity (Holm) is ``statsmodels``'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

__all__ = ["Difference", "welch_difference", "wilson_interval", "binomial_variance", "mean_error",
           "seeds_and_test_set", "difference_with_test_set", "summary_difference_with_test_set",
           "paired_test_variance", "paired_difference", "given_runs_difference", "holm"]


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


def welch_difference(a: Sequence[float], b: Sequence[float], confidence: float) -> Difference:
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


def wilson_interval(correct: int, n: int, confidence: float) -> tuple[float, float]:
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


def _finite(values: Sequence[float]) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=np.float64)


#: Why a difference has no interval where a side has one seed (the error model needs two).
ONE_SEED = "one seed on a side: no estimate of the seed variance, no verdict over seeds"


def seeds_and_test_set(diff: float, seed_terms: Sequence[tuple[float, int]], v_ts: float,
                       confidence: float) -> Difference:
    """The error model's interval of ``diff`` (pp): ``seed_terms`` holds, per side with seeds,
    its seed variance of the mean (s²/k, pp²) and its k; ``v_ts`` the test set's variance of
    the difference (pp²). t on Welch–Satterthwaite's degrees of freedom of the seed terms (one
    side: k − 1), whose quantile is applied to √(seed terms + ``v_ts``): never narrower than
    the seeds' interval alone."""
    nan = math.nan
    ks = [k for _, k in seed_terms]
    n_a, n_b = (ks + [0, 0])[:2] if len(ks) > 1 else (ks[0], 0)
    if any(k < 2 for k in ks):
        return Difference(diff, nan, nan, nan, nan, n_a, n_b, confidence, reason=ONE_SEED)
    seeds = sum(v for v, _ in seed_terms)
    var = seeds + max(v_ts, 0.0)
    if var <= 1e-12:  # pp²: rounding's, not a spread
        return Difference(diff, diff, diff, nan, nan, n_a, n_b, confidence,
                          reason="no spread over seeds nor over the test examples")
    spread = sum(v ** 2 / (k - 1) for v, k in seed_terms)
    # no spread over seeds: the fewest seeds' degrees of freedom (the most cautious)
    df = seeds ** 2 / spread if spread > 0 else float(min(ks) - 1)
    se = math.sqrt(var)
    dist = _st.t(df)
    half = float(dist.ppf(0.5 + confidence / 2)) * se
    p = float(2 * dist.sf(abs(diff) / se))
    return Difference(diff, diff - half, diff + half, p, df, n_a, n_b, confidence)


def difference_with_test_set(a: Sequence[float], b: Sequence[float], n_a: int | None,
                             n_b: int | None, confidence: float) -> Difference:
    """``mean(a) − mean(b)`` (pp, one accuracy per seed) with the seeds' error and the test
    set's, binomial (each side's p(1 − p)/n, the sides counted as independent): the error
    model where the runs' predictions are not read."""
    x, y = _finite(a), _finite(b)
    var_x = float(x.var(ddof=1)) if x.size > 1 else math.nan
    var_y = float(y.var(ddof=1)) if y.size > 1 else math.nan
    return summary_difference_with_test_set(
        float(x.mean()) if x.size else math.nan, var_x, int(x.size), n_a,
        float(y.mean()) if y.size else math.nan, var_y, int(y.size), n_b, confidence)


def summary_difference_with_test_set(mean_a: float, var_a: float, k_a: int, n_a: int | None,
                                     mean_b: float, var_b: float, k_b: int, n_b: int | None,
                                     confidence: float) -> Difference:
    """:func:`difference_with_test_set` from each side's summary: its mean (pp), the sample
    variance of its ``k`` seeds (pp²) and its test examples ``n``, as a table row holds them."""
    v_ts = binomial_variance(mean_a, n_a) + binomial_variance(mean_b, n_b)
    return seeds_and_test_set(mean_a - mean_b, [(var_a / k_a if k_a > 1 else 0.0, k_a),
                                                (var_b / k_b if k_b > 1 else 0.0, k_b)],
                              v_ts, confidence)


def _subset_means(correct: np.ndarray, subsets: Sequence[np.ndarray] | None) -> np.ndarray:
    """Per seed (rows of ``correct``, seeds × examples), the accuracy (pp), or with
    ``subsets`` (two masks) the accuracy on the first minus on the second."""
    if subsets is None:
        return 100 * correct.mean(axis=1)
    first, second = (np.asarray(m, bool) for m in subsets)
    return 100 * (correct[:, first].mean(axis=1) - correct[:, second].mean(axis=1))


def paired_test_variance(a_correct: np.ndarray, b_correct: np.ndarray,
                         subsets: Sequence[np.ndarray] | None = None) -> float:
    """The test set's sampling variance (pp²) of the difference of two models answered on the
    same examples: var over examples of D_i = ā_i − b̄_i (each side's correctness averaged
    over its seeds) over n; with ``subsets`` (two disjoint masks) that of the contrast (mean D
    on the first − on the second): the sum of each subset's."""
    d = (np.asarray(a_correct, np.float64).mean(axis=0)
         - np.asarray(b_correct, np.float64).mean(axis=0))
    parts = [d] if subsets is None else [d[np.asarray(m, bool)] for m in subsets]
    return float(sum(1e4 * part.var(ddof=1) / part.size if part.size > 1 else math.nan
                     for part in parts))


def paired_difference(a_correct: np.ndarray, b_correct: np.ndarray, confidence: float, *,
                      rule: bool = False, subsets: Sequence[np.ndarray] | None = None
                      ) -> Difference:
    """The error model's reading of runs ``a_correct`` (seeds × examples, right/wrong) minus
    ``b_correct`` (seeds × the same examples), both sides' predictions read: the seed terms of
    each side's per-seed accuracies plus the paired test-set variance. ``rule``: ``b_correct``
    is a rule's one answer per example (no seeds: t over ``a``'s k − 1). ``subsets`` (two
    masks: deep, shallow) reads the contrast (a − b on the first) − (a − b on the second)."""
    a = np.atleast_2d(np.asarray(a_correct, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b_correct, dtype=np.float64))
    if b.shape[1] != a.shape[1] or a.shape[1] == 0:
        raise ValueError("paired runs must answer the same, non-empty set of examples")
    xa, xb = _subset_means(a, subsets), _subset_means(b, subsets)
    terms = [(float(x.var(ddof=1)) / x.size if x.size > 1 else 0.0, x.size)
             for x in ((xa,) if rule else (xa, xb))]
    # rounded below any count's resolution: equal accuracies differ by 0, not by 1e-14
    d = seeds_and_test_set(round(float(xa.mean() - xb.mean()), 9), terms,
                           paired_test_variance(a, b, subsets), confidence)
    return d if not rule else Difference(d.diff, d.ci_low, d.ci_high, d.p_value, d.df,
                                         a.shape[0], b.shape[0], confidence, d.reason)


def given_runs_difference(a_correct: np.ndarray, b_correct: np.ndarray,
                          confidence: float) -> Difference:
    """The difference of runs ``a_correct`` and ``b_correct`` (seeds × the same examples)
    *given these runs*: the trained networks held fixed, only the test examples drawn again
    (normal, the paired test-set variance alone). It says whether these networks differ on
    the population of examples, not whether the models do: no verdict rests on it."""
    a = np.atleast_2d(np.asarray(a_correct, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b_correct, dtype=np.float64))
    diff = 100 * float(a.mean() - b.mean())
    se = math.sqrt(paired_test_variance(a, b))
    if not se > 0:
        return Difference(diff, diff, diff, math.nan, math.inf, a.shape[0], b.shape[0],
                          confidence, reason="the runs answer every example alike")
    half = float(_st.norm.ppf(0.5 + confidence / 2)) * se
    return Difference(diff, diff - half, diff + half, float(2 * _st.norm.sf(abs(diff) / se)),
                      math.inf, a.shape[0], b.shape[0], confidence)


def holm(p_values: Sequence[float | None], alpha: float) -> list[float | None]:
    """Holm's adjusted p-values of a family (statsmodels' ``multipletests``); None stays None
    (a bucket not read is no member of the family)."""
    from statsmodels.stats.multitest import multipletests

    where = [i for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    out: list[float | None] = [None] * len(p_values)
    if where:
        adjusted = multipletests([p_values[i] for i in where], alpha=alpha, method="holm")[1]
        for i, p in zip(where, adjusted):
            out[i] = float(p)
    return out
