"""Calibration of the error model (hkt/report/stats.py, docs/per-example.md): simulated
publications whose true difference is known, read by the very functions the tables use.

A population of examples of varying difficulty (most decided alike by every run, a fifth
hard); a publication draws a shared test set of 2,000 of them and trains 3 seeds a side, each
seed shifting its model's accuracy by a per-seed effect of known spread (1.5 and 1.9 pp); the
runs decide about 92 % of the examples alike. The true difference is defined on the population
(each model's accuracy averaged over its seed distribution), 0 and 2 pp. Each interval must
cover it in at least 93 % of 2,000 publications, and in at most 99.5 % (an interval far too
wide wastes power and fails too); the rates print with ``pytest -s`` (docs/per-example.md
quotes them). The binomial interval, read where the runs' predictions are not, cannot see the
errors the two models share: it is conservative by construction (it covers in every
publication here) and is held to the lower bound only.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import expit

from hkt.report.report_settings import load_settings
from hkt.report.stats import difference_with_test_set, paired_difference, paired_test_variance

PUBLICATIONS, EXAMPLES, SEEDS = 2_000, 2_000, 3
TAU_A, TAU_B = 0.4, 0.5          # per-seed effects (logit): 1.5 and 1.9 pp of accuracy
CONFIDENCE = load_settings().confidence
LOW, HIGH = 0.93, 0.995  # the coverage every interval must reach, and not pass
_rng = np.random.default_rng(20240571)
_hard = _rng.random(50_000) < 0.2
#: the population's difficulty (logit of a run's chance to answer right): a fifth hard
POPULATION = np.where(_hard, _rng.normal(0, 1.5, _hard.size),
                      np.where(_rng.random(_hard.size) < 0.5, -1, 1) * _rng.normal(6, 1, _hard.size))
RULE = POPULATION > 0  # a rule's one answer per example: right where the example is easy-right
BUCKET = np.abs(POPULATION) < 3  # the hard examples: one bucket of a breakdown
_X, _W = np.polynomial.hermite_e.hermegauss(40)
_W = _W / _W.sum()


def expected(beta: float, tau: float, where: np.ndarray | None = None) -> float:
    """A model's accuracy (pp) on the population (or its part ``where``), averaged over its
    seed distribution: the truth the intervals are about."""
    z = POPULATION if where is None else POPULATION[where]
    return 100 * float((expit(z[:, None] + beta + tau * _X[None, :]) @ _W).mean())


def beta_for(truth_pp: float) -> float:
    """Model A's shift that makes A − B (B unshifted) ``truth_pp`` on the population."""
    base = expected(0.0, TAU_B)
    return optimize.brentq(lambda b: expected(b, TAU_A) - base - truth_pp, -2, 2)


def publications(beta_a: float, seed: int):
    """``PUBLICATIONS`` simulated publications: per one, A's and B's right/wrong answers
    (seeds × examples) on a shared test set, and that test set's example indices."""
    rng = np.random.default_rng(seed)
    for start in range(0, PUBLICATIONS, 250):
        m = min(250, PUBLICATIONS - start)
        idx = rng.integers(0, POPULATION.size, (m, EXAMPLES))
        z = POPULATION[idx][:, None, :]
        sides = []
        for beta, tau in ((beta_a, TAU_A), (0.0, TAU_B)):
            shift = beta + rng.normal(0, tau, (m, SEEDS, 1))
            sides.append(rng.random((m, SEEDS, EXAMPLES)) < expit(z + shift))
        yield from zip(sides[0], sides[1], idx)


def coverage(truth: float, beta_a: float, read, seed: int) -> float:
    """The share of publications whose interval ``read(a, b, idx)`` holds ``truth``."""
    hits = [d.ci_low <= truth <= d.ci_high for d in
            (read(a, b, idx) for a, b, idx in publications(beta_a, seed))]
    return float(np.mean(hits))


def _paired(a, b, idx):
    return paired_difference(a, b, CONFIDENCE)


def _binomial(a, b, idx):
    return difference_with_test_set(100 * a.mean(1), 100 * b.mean(1), EXAMPLES, EXAMPLES,
                                     CONFIDENCE)


@pytest.mark.parametrize("truth", [0.0, 2.0])
@pytest.mark.parametrize("read", [_paired, _binomial], ids=["paired", "binomial"])
def test_the_difference_of_two_models_covers_the_truth(truth, read):
    rate = coverage(truth, beta_for(truth), read, seed=int(truth) + 1)
    print(f"\n{read.__name__[1:]} interval of A − B (truth {truth:+.1f} pp): covers in "
          f"{100 * rate:.1f}% of {PUBLICATIONS:,} publications")
    assert LOW <= rate <= (1.0 if read is _binomial else HIGH)


def test_a_model_against_a_rule_covers_the_truth():
    beta = beta_for(2.0)
    truth = expected(beta, TAU_A) - 100 * RULE.mean()
    rate = coverage(truth, beta, lambda a, b, idx: paired_difference(
        a, RULE[idx][None, :], CONFIDENCE, rule=True), seed=3)
    print(f"\nmodel against a rule: covers in {100 * rate:.1f}%")
    assert LOW <= rate <= HIGH


def test_a_bucket_reading_covers_the_truth_on_its_part_of_the_population():
    beta = beta_for(2.0)
    truth = expected(beta, TAU_A, BUCKET) - expected(0.0, TAU_B, BUCKET)
    rate = coverage(truth, beta, lambda a, b, idx: paired_difference(
        a[:, BUCKET[idx]], b[:, BUCKET[idx]], CONFIDENCE), seed=4)
    print(f"\nbucket (the hard fifth, about {int(BUCKET.mean() * EXAMPLES)} examples): "
          f"covers in {100 * rate:.1f}%")
    assert LOW <= rate <= HIGH


class _Old:
    """The old crossed bootstrap's interval in closed form: the seeds resampled with
    replacement shrink each side's seed variance to (k − 1)/k of s²/k, and its quantiles are
    normal, with the paired test-set variance added."""

    def __init__(self, a: np.ndarray, b: np.ndarray) -> None:
        xa, xb = 100 * a.mean(1), 100 * b.mean(1)
        k = a.shape[0]
        var = (xa.var(ddof=1) + xb.var(ddof=1)) * (k - 1) / k / k + paired_test_variance(a, b)
        half = stats.norm.ppf(0.5 + CONFIDENCE / 2) * np.sqrt(var)
        self.ci_low, self.ci_high = xa.mean() - xb.mean() - half, xa.mean() - xb.mean() + half


def test_the_old_bootstrap_like_interval_fails_this_calibration():
    rate = coverage(0.0, beta_for(0.0), lambda a, b, idx: _Old(a, b), seed=5)
    print(f"\nold bootstrap-like interval: covers in {100 * rate:.1f}%")
    assert rate < LOW
