"""The error model of a difference (hkt/report/stats.py): Welch over seeds plus the test set's
sampling variance, on the seed terms' degrees of freedom; never narrower than Welch's; Holm
for a family of bucket readings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from hkt.report.stats import (ONE_SEED, difference_with_test_set, given_runs_difference, holm,
                              paired_difference, paired_test_variance, welch_difference)

C = 0.95


def _runs(seed: int, k: int = 3, n: int = 500, p: float = 0.6, flip: float = 0.05):
    """``k`` runs (right/wrong on ``n`` shared examples) that decide most examples alike."""
    rng = np.random.default_rng(seed)
    base = rng.random(n) < p
    return np.vstack([base ^ (rng.random(n) < flip) for _ in range(k)])


def _width(d) -> float:
    return d.ci_high - d.ci_low


@pytest.mark.parametrize("seed", range(8))
def test_the_paired_interval_holds_welchs_over_seeds_on_its_degrees_of_freedom(seed):
    a, b = _runs(seed), _runs(seed + 100, p=0.55)
    d = paired_difference(a, b, C)
    w = welch_difference(100 * a.mean(1), 100 * b.mean(1), C)
    assert d.diff == pytest.approx(w.diff)
    assert d.df == pytest.approx(w.df)  # the seed terms' Welch–Satterthwaite df, unchanged
    assert d.ci_low < w.ci_low and w.ci_high < d.ci_high


@pytest.mark.parametrize("seed", range(8))
def test_the_binomial_interval_never_narrows_welchs(seed):
    """Issue 71: the test set's error added to IMDB's interval had made it narrower."""
    rng = np.random.default_rng(seed)
    a, b = 80 + rng.normal(0, 1.2, 3), 77 + rng.normal(0, 1.2, 3)
    d, w = difference_with_test_set(a, b, 25_000, 25_000, C), welch_difference(a, b, C)
    assert d.df == pytest.approx(w.df)
    assert _width(d) >= _width(w)


def test_the_paired_variance_is_that_of_the_per_example_difference_of_seed_means():
    a = np.array([[1, 1, 0, 0], [1, 0, 0, 1]], bool)
    b = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]], bool)
    d = a.mean(0) - b.mean(0)
    assert paired_test_variance(a, b) == pytest.approx(1e4 * d.var(ddof=1) / 4)
    # two models that err alike: far below the binomial variance of two independent sides
    x, y = _runs(0, n=2000), _runs(0, n=2000, flip=0.06)
    binomial = 1e4 * 2 * 0.6 * 0.4 / 2000
    assert paired_test_variance(x, y) < binomial / 4


def test_one_seed_on_a_side_gives_no_interval_and_says_why():
    a, b = _runs(1), _runs(2)
    for d in (paired_difference(a[:1], b, C), difference_with_test_set([70.0], [60.0, 61.0],
                                                                        2000, 2000, C)):
        assert math.isnan(d.ci_low) and d.reason == ONE_SEED and d.significant is None


def test_a_model_against_a_rule_reads_t_over_its_own_seeds():
    a, rule = _runs(3, k=4), _runs(4, k=1)
    d = paired_difference(a, rule, C, rule=True)
    assert d.df == 3 and (d.n_a, d.n_b) == (4, 1)
    x = 100 * a.mean(1)
    var = x.var(ddof=1) / 4 + paired_test_variance(a, rule)
    from scipy import stats

    assert d.ci_high - d.diff == pytest.approx(stats.t(3).ppf(0.975) * math.sqrt(var))


def test_a_contrast_of_two_subsets_reads_the_difference_of_differences():
    a = _runs(5, n=300)
    b = a.copy()
    deep = np.arange(300) >= 200
    b[:, deep] = False  # b loses everything on the deep third only
    d = paired_difference(a, b, C, subsets=(deep, np.arange(300) < 100))
    assert d.diff == pytest.approx(100 * a[:, deep].mean())
    assert d.ci_low > 0


def test_the_reading_given_these_runs_ignores_the_seeds():
    a, b = _runs(6), _runs(7)
    g, d = given_runs_difference(a, b, C), paired_difference(a, b, C)
    assert g.diff == pytest.approx(d.diff) and _width(g) < _width(d)


def test_holm_is_statsmodels_and_leaves_unread_buckets_out():
    p = [0.01, None, 0.04, 0.03]
    want = multipletests([0.01, 0.04, 0.03], alpha=0.05, method="holm")[1]
    got = holm(p, 0.05)
    assert got[1] is None and got[0] == pytest.approx(want[0])
    assert [got[0], got[2], got[3]] == pytest.approx(list(want))
    assert got[0] == pytest.approx(0.03)  # 3 × 0.01
