"""Numerical core of the analyses: Mardia kurtosis, bilinear-form decomposition, Gram rank, λ stats.

Known values used (derivations in the comments next to each test):
  Gaussian: κ = 1 (E[κ̂] = (n−1)/(n+1), SE = sqrt(8 / (d(d+2) n))).
  Multivariate t_ν (ν > 4): β_{2,d} = d(d+2)(ν−2)/(ν−4), so κ = (ν−2)/(ν−4) = 4/3 for ν = 10.
  Laplace (d = 1): kurtosis m4/m2² = 6, so κ = 2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hkt.analysis import (
    decompose_bilinear,
    decompose_matrix,
    dominant_level,
    expected_kappa,
    gram_rank_report,
    head_columns,
    kappa_standard_error,
    lambda_stats,
    mardia_kurtosis,
    mardia_test,
    psd_condition,
)

N = 200_000  # large enough for ~1 % standard errors on the heavy-tailed known values


# ---------------------------------------------------------------- Mardia kurtosis


@pytest.mark.parametrize("d", [1, 16])
def test_gaussian_kappa_within_sampling_error(d: int) -> None:
    rng = np.random.default_rng(100 + d)
    a = rng.standard_normal((d, d)) + 2 * np.eye(d)  # non-identity covariance
    x = rng.standard_normal((N, d)) @ a + rng.standard_normal(d)
    res = mardia_test(x, max_samples=None)
    se = kappa_standard_error(d, N)
    assert res.d == d and res.n == N and not res.singular and res.cov_handling == "cholesky"
    assert abs(res.kappa - expected_kappa(d, N)) < 4 * se
    assert abs(res.z) < 4 and res.p_value > 1e-4
    assert res.p_value == pytest.approx(math.erfc(abs(res.z) / math.sqrt(2)))


def test_student_t_known_kappa() -> None:
    # X = Z / sqrt(W/ν), Z ~ N(0, I_d), W ~ χ²_ν; Cov X = ν/(ν−2) I. With Q = ZᵀZ ~ χ²_d:
    # Mahalanobis m = (ν−2) Q / W, E[m²] = (ν−2)² E[Q²] E[W⁻²] = (ν−2)² d(d+2) / ((ν−2)(ν−4)).
    nu, d = 10, 4
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, d)) / np.sqrt(rng.chisquare(nu, size=(N, 1)) / nu)
    kappa = mardia_kurtosis(x, max_samples=None)
    # SE of κ̂ here ≈ 1 % (needs E[m⁴], finite for ν > 8); 5 % is ~5 SE but far from κ = 1.
    assert kappa == pytest.approx((nu - 2) / (nu - 4), rel=0.05)
    assert mardia_test(x, max_samples=None).z > 10


def test_laplace_known_kappa() -> None:
    # Laplace(b=1): m2 = 2, m4 = 24 → m4/m2² = 6 → κ = 6/3 = 2. The delta-method SE of κ̂ is
    # sqrt(Var[x⁴/4 − 6x² + 6] / n) / 3 = sqrt(1188 / n) / 3 ≈ 0.026 (1.3 %) at n = 2e5.
    x = np.random.default_rng(11).laplace(size=N)
    kappa = mardia_kurtosis(x, max_samples=None)
    assert kappa == pytest.approx(2.0, rel=0.05)


def test_affine_invariance() -> None:
    rng = np.random.default_rng(3)
    d = 16
    x = rng.laplace(size=(20_000, d)) @ rng.standard_normal((d, d))  # non-Gaussian, correlated
    a = rng.standard_normal((d, d)) + 4 * np.eye(d)
    b = 100 * rng.standard_normal(d)
    k0 = mardia_test(x).b2
    k1 = mardia_test(x @ a + b).b2
    assert k1 == pytest.approx(k0, rel=1e-8)


def test_singular_covariance_is_projected() -> None:
    rng = np.random.default_rng(5)
    z = rng.laplace(size=(10_000, 3))
    b = rng.standard_normal((3, 5))  # 5 variables spanning a 3-D subspace
    res = mardia_test(z @ b + 1.0)
    assert res.singular and res.d == 3 and res.d_input == 5 and res.cov_handling == "projected"
    # κ of the projected data equals κ of the 3-D source (affine invariance within the subspace)
    assert res.b2 == pytest.approx(mardia_test(z).b2, rel=1e-8)
    # float32 data confined to the subspace: still detected
    res32 = mardia_test(torch.tensor(z @ b, dtype=torch.float32))
    assert res32.d == 3 and res32.kappa == pytest.approx(res.kappa, rel=1e-3)
    # a constant column, and constant data
    x = np.column_stack([rng.standard_normal(1000), np.full(1000, 2.0)])
    assert mardia_test(x).d == 1
    const = mardia_test(np.ones((50, 2)))
    assert const.cov_handling == "constant" and math.isnan(const.kappa)


def test_subsampling_deterministic_and_torch() -> None:
    x = np.random.default_rng(9).standard_normal((5_000, 3))
    r1 = mardia_test(x, max_samples=1_000, seed=4)
    r2 = mardia_test(torch.from_numpy(x).float(), max_samples=1_000, seed=4)
    assert r1.subsampled and r1.n == 1_000 and r1.n_total == 5_000 and r1.seed == 4
    assert r2.kappa == pytest.approx(r1.kappa, rel=1e-5)  # same rows, float32 rounding only
    assert mardia_test(x, max_samples=1_000, seed=4).kappa == r1.kappa
    assert mardia_test(x, max_samples=1_000, seed=5).kappa != r1.kappa
    assert not mardia_test(x).subsampled


def test_nonfinite_rows() -> None:
    x = np.random.default_rng(2).standard_normal(100)
    x[3] = -np.inf
    with pytest.raises(ValueError):
        mardia_test(x)
    assert mardia_test(x, drop_nonfinite=True).n == 99


# ---------------------------------------------------------------- bilinear decomposition


def test_decomposition_reconstructs() -> None:
    rng = np.random.default_rng(0)
    wq, wk = rng.standard_normal((32, 8)), rng.standard_normal((32, 8))
    p = decompose_bilinear(wq, wk, 8)
    np.testing.assert_allclose(p.m, wq @ wk.T / math.sqrt(8), rtol=1e-14)
    np.testing.assert_allclose(p.m_sym + p.m_anti, p.m, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(p.m_sym, p.m_sym.T)
    np.testing.assert_array_equal(p.m_anti, -p.m_anti.T)
    norms = np.linalg.norm(p.m_sym) ** 2 + np.linalg.norm(p.m_anti) ** 2
    assert norms == pytest.approx(np.linalg.norm(p.m) ** 2)
    assert 0 < p.antisym_share < 1 and p.rank == 16  # rank M ≤ 8 → rank M_s ≤ 16
    assert not p.psd and p.neg_mass_share > 0  # a generic W_Q W_Kᵀ is indefinite
    assert decompose_matrix(np.eye(4)).antisym_share == 0
    assert decompose_matrix(np.array([[0.0, 1.0], [-1.0, 0.0]])).antisym_share == 1


def test_head_columns_match_torch_linear() -> None:
    torch.manual_seed(0)
    dm, h, d = 12, 3, 4
    lq, lk = torch.nn.Linear(dm, h * d, bias=False), torch.nn.Linear(dm, h * d, bias=False)
    x = torch.randn(5, dm, dtype=torch.float64)
    lq, lk = lq.double(), lk.double()
    with torch.no_grad():
        q, k = lq(x).view(5, h, d), lk(x).view(5, h, d)
    for head in range(h):
        wq, wk = head_columns(lq.weight, head, d), head_columns(lk.weight, head, d)
        scores = (q[:, head] @ k[:, head].T / math.sqrt(d)).numpy()
        m = decompose_bilinear(wq, wk, d).m
        np.testing.assert_allclose(x.numpy() @ m @ x.numpy().T, scores, rtol=1e-12, atol=1e-12)


def test_psd_checks() -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 4))
    p = decompose_bilinear(w, w, 4)  # W Wᵀ/2: PSD, rank 4
    assert p.psd and p.rank == 4 and p.neg_mass_share == 0 and p.lambda_min >= -p.tol
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    ind = decompose_matrix(q @ np.diag([3.0, 1.0, 0.0, -2.0]) @ q.T)
    np.testing.assert_allclose(ind.eigvals, [-2, 0, 1, 3], atol=1e-12)
    assert not ind.psd and ind.rank == 3 and ind.neg_mass_share == pytest.approx(2 / 6)
    assert psd_condition([p, p], [0.3, 0.7])
    assert not psd_condition([p, p], [-0.1, 1.1])
    cond = psd_condition([p, ind], np.full((10, 2), 0.5))  # per-token λ
    assert not cond and cond.levels_psd == (True, False) and cond.lambdas_nonneg == (True, True)


# ---------------------------------------------------------------- Gram rank


def _levels(rng: np.random.Generator, t: int, dm: int, d: int, n_levels: int, psd: bool):
    """Nearest-upsampled pyramid features (level l repeats each row 2^l times) and parts."""
    feats, parts = [], []
    for lvl in range(n_levels):
        coarse = rng.standard_normal((t // 2**lvl, dm))
        feats.append(np.repeat(coarse, 2**lvl, axis=0))
        wq = rng.standard_normal((dm, d))
        parts.append(decompose_bilinear(wq, wq if psd else rng.standard_normal((dm, d)), d))
    return feats, parts


def test_gram_rank_bound_and_static_equals_symmetric_scores() -> None:
    rng = np.random.default_rng(2)
    t, dm, d = 64, 32, 4
    feats, parts = _levels(rng, t, dm, d, 3, psd=False)
    lam = np.array([0.5, 0.3, 0.2])
    rep = gram_rank_report(feats, parts, lam)
    assert rep.level_ranks == (8, 8, 8) and rep.rank_bound == 24
    assert rep.rank <= rep.rank_bound and rep.rank == 24  # generic: the bound is attained
    assert not rep.psd and rep.n_negative > 0 and not rep.condition_holds
    s = sum(v * x @ p.m @ x.T for v, x, p in zip(lam, feats, parts))  # fused scores
    g = (s + s.T) / 2
    assert rep.lambda_min == pytest.approx(np.linalg.eigvalsh(g)[0], rel=1e-9)
    # per-token λ constant over tokens gives the static Gram
    rep_tok = gram_rank_report(feats, parts, np.tile(lam, (t, 1)))
    assert rep_tok.lambda_mode == "per_token" and rep_tok.rank == rep.rank
    assert rep_tok.lambda_min == pytest.approx(rep.lambda_min, rel=1e-9)


def test_gram_psd_and_low_rank_inputs() -> None:
    rng = np.random.default_rng(4)
    t, dm, d = 48, 16, 2
    feats, parts = _levels(rng, t, dm, d, 3, psd=True)
    lam = rng.dirichlet(np.ones(3), size=t)  # per-token convex weights
    rep = gram_rank_report(feats, parts, lam)
    assert rep.condition_holds and rep.psd and rep.n_negative == 0
    assert rep.rank_bound == 6 and rep.rank == 6
    # inputs of rank 1 per level: rank(G) ≤ L even though the bound says 6
    low = [np.outer(rng.standard_normal(t), rng.standard_normal(dm)) for _ in range(3)]
    rep_low = gram_rank_report(low, parts, lam)
    assert rep_low.rank == 3 <= rep_low.rank_bound
    with pytest.raises(ValueError):
        gram_rank_report(feats, parts, -lam)


# ---------------------------------------------------------------- fusion weights


def test_lambda_stats_known_values() -> None:
    lam = np.array([[1.0, 0, 0], [0, 1.0, 0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0]])
    st = lambda_stats(torch.tensor(lam).reshape(2, 2, 3))  # leading axes pooled; torch accepted
    assert st.n == 4 and st.n_levels == 3
    np.testing.assert_allclose(st.mean, lam.mean(axis=0))
    np.testing.assert_allclose(st.std, lam.std(axis=0))
    np.testing.assert_allclose(st.quantiles, np.quantile(lam, [0.05, 0.5, 0.95], axis=0))
    assert st.mean_entropy == pytest.approx((math.log(3) + math.log(2)) / 4)
    assert st.max_entropy == pytest.approx(math.log(3))
    np.testing.assert_allclose(st.dominant_share, [0.75, 0.25, 0.0])  # ties → lowest level
    np.testing.assert_array_equal(dominant_level(lam), [0, 1, 0, 0])
    assert st.rows()[1]["q50"] == pytest.approx(np.median(lam[:, 1]))
    assert lambda_stats(np.ones((5, 1))).mean_entropy == 0
    with pytest.raises(ValueError):
        lambda_stats(np.array([[0.6, 0.6]]))
    with pytest.raises(ValueError):
        lambda_stats(np.array([[1.2, -0.2]]))
