"""The tables' statistics against textbook cases with published answers."""

from __future__ import annotations

import math

import pytest

from hkt.report.stats import welch_difference, wilson_interval

# Welch's t-test, the two worked examples of its Wikipedia article (t, df, p rounded there).
A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
B1 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
A2 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8]
B2 = [21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5, 23.6,
      21.5, 22.5, 23.5, 21.5, 21.8]


@pytest.mark.parametrize("a,b,df,p,significant,t975", [
    (A1, B1, 25.0, 0.021, True, 2.060),   # t quantiles from a printed t table (df 25; df 9.9 ≈ 10)
    (A2, B2, 9.9, 0.149, False, 2.231),
])
def test_welch_matches_the_textbook_examples(a, b, df, p, significant, t975):
    d = welch_difference(a, b, 0.95)
    assert d.df == pytest.approx(df, abs=0.05) and d.p_value == pytest.approx(p, abs=0.0005)
    assert d.significant is significant and d.verdict.startswith("yes" if significant else "no")
    assert (d.n_a, d.n_b) == (len(a), len(b))
    # the interval is diff ± t(0.975, df) · SE, with the Welch–Satterthwaite SE
    se = math.sqrt(_var(a) / len(a) + _var(b) / len(b))
    half = d.diff - d.ci_low
    assert d.diff == pytest.approx(sum(a) / len(a) - sum(b) / len(b))
    assert d.ci_high - d.diff == pytest.approx(half) and half / se == pytest.approx(t975, abs=0.005)
    assert (d.ci_high < 0) is significant  # a 95% CI excludes 0 exactly when p < 0.05


def _var(x):
    m = sum(x) / len(x)
    return sum((v - m) ** 2 for v in x) / (len(x) - 1)


def test_welch_is_antisymmetric():
    ab, ba = welch_difference(A1, B1, 0.95), welch_difference(B1, A1, 0.95)
    assert ab.diff == pytest.approx(-ba.diff) and ab.p_value == pytest.approx(ba.p_value)
    assert (ab.ci_low, ab.ci_high) == pytest.approx((-ba.ci_high, -ba.ci_low))


def test_undefined_cases_say_why():
    one = welch_difference([0.5], [0.4, 0.41], 0.95)
    assert math.isnan(one.p_value) and one.significant is None and "fewer than 2 seeds" in one.verdict
    assert one.diff == pytest.approx(0.095)
    flat = welch_difference([0.5, 0.5, 0.5], [0.4, 0.4, 0.4], 0.95)
    assert flat.significant is None and "no spread" in flat.verdict and flat.diff == pytest.approx(0.1)


@pytest.mark.parametrize("k,n,low,high", [
    (5, 10, 0.2366, 0.7634),    # symmetric around 1/2
    (0, 10, 0.0, 0.2775),       # z²/(n+z²) at 0 successes, where the normal interval collapses
    (10, 10, 0.7225, 1.0),
    (81, 263, 0.2553, 0.3662),  # Newcombe (1998), Statistics in Medicine 17:857, table I
])
def test_wilson_interval_textbook_values(k, n, low, high):
    assert wilson_interval(k, n, 0.95) == pytest.approx((low, high), abs=5e-4)


def test_wilson_without_examples_is_nan():
    assert all(math.isnan(v) for v in wilson_interval(0, 0, 0.95))
