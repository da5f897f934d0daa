"""Mardia's multivariate kurtosis and its normal-theory test.

For n samples x_i in R^d with mean x̄ and biased covariance Σ̂ = (1/n) Σ (x_i − x̄)(x_i − x̄)ᵀ:

    b_{2,d} = (1/n) Σ_i ((x_i − x̄)ᵀ Σ̂⁻¹ (x_i − x̄))²,      κ = b_{2,d} / (d (d + 2)).

κ = 1 for Gaussian data (d = 1: κ = m4 / (3 m2²)). The paper reports κ ≈ 33 for trained score
distributions; these functions give the number together with what a Gaussian sample of the same
size would give, so a report can say whether a value is within sampling error.

Numerics: float64 throughout, data centred before the covariance, Mahalanobis distances by a
Cholesky factor and a triangular solve (never an explicit inverse). A singular or near-singular
covariance (e.g. queries of a head whose projection has rank < d, or float32 data that lies in a
subspace) is handled by *projection*: the data are expressed in the eigenbasis of Σ̂, directions
whose variance is ≤ ``rank_rtol`` × the largest variance are dropped, and the statistic is
computed in the remaining d_eff dimensions (the normalisation and the test then use d_eff). This
keeps κ affine invariant within the data's subspace; shrinkage would not. The result records it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hkt.analysis.kernel import as_float64

__all__ = [
    "KurtosisResult",
    "b2_standard_error",
    "expected_b2",
    "expected_kappa",
    "kappa_standard_error",
    "mardia_kurtosis",
    "mardia_test",
    "take_rows",
]

DEFAULT_RANK_RTOL = 1e-10
"""Covariance eigenvalues ≤ this × the largest one count as zero variance (dropped directions).

Float32 data confined to a subspace leaves variance ~1e-14 (relative) off it; real directions of
trained features are many orders above 1e-10."""


@dataclass(frozen=True)
class KurtosisResult:
    """Mardia's kurtosis of one sample, with its test against Gaussianity.

    ``z`` is (b2 − E[b2]) / sqrt(8 d (d+2) / n), E[b2] = d(d+2)(n−1)/(n+1) under normality;
    ``p_value`` its two-sided normal-approximation p-value. ``d`` is the effective dimension
    (``d_input`` minus dropped zero-variance directions).
    """

    n: int  # rows used (after sub-sampling and dropping non-finite rows)
    n_total: int  # rows given
    d_input: int  # variables given
    d: int  # effective dimension: rank of the covariance
    b2: float
    kappa: float
    expected_b2: float
    se_b2: float
    z: float
    p_value: float
    subsampled: bool
    singular: bool  # True when the covariance was rank deficient (d < d_input)
    cov_handling: str  # "cholesky", "projected" (rank-deficient: see module doc) or "constant"
    seed: int | None


def expected_b2(d: int, n: int) -> float:
    """E[b_{2,d}] for n Gaussian samples in d dimensions: d(d+2)(n−1)/(n+1) (Mardia 1970)."""
    return d * (d + 2) * (n - 1) / (n + 1)


def b2_standard_error(d: int, n: int) -> float:
    """Asymptotic standard error of b_{2,d} under normality: sqrt(8 d (d+2) / n)."""
    return math.sqrt(8.0 * d * (d + 2) / n)


def expected_kappa(d: int, n: int) -> float:
    """E[κ] under normality: (n−1)/(n+1) (slightly below 1 for finite n)."""
    return expected_b2(d, n) / (d * (d + 2))


def kappa_standard_error(d: int, n: int) -> float:
    """Standard error of κ under normality: sqrt(8 / (d (d+2) n))."""
    return b2_standard_error(d, n) / (d * (d + 2))


def take_rows(x: Any, k: int | None, rng: np.random.Generator) -> np.ndarray:
    """At most ``k`` rows of x (n, …) as float64 numpy: a sorted uniform sample drawn from ``rng``
    when n > k, else all rows. A torch tensor is indexed on its own device, so only the kept
    rows are copied to the host (the whole tensor may be far larger than the sample)."""
    n = int(x.shape[0])
    if k is not None and n > k:
        idx = np.sort(rng.choice(n, size=int(k), replace=False))
        if hasattr(x, "detach"):
            import torch  # only for torch input: the math stays usable without torch

            x = x[torch.as_tensor(idx, device=x.device)]
        else:
            x = np.asarray(x)[idx]
    return as_float64(x)


def _rows(x: Any, max_samples: int | None, seed: int) -> tuple[np.ndarray, int, bool]:
    """(n, d) float64 array from a numpy array or torch tensor, sub-sampled before conversion."""
    shape = tuple(x.shape)
    if len(shape) == 0:
        raise ValueError("mardia: need an (n, d) or (n,) array, got a scalar")
    if len(shape) == 1:
        x = x.reshape(-1, 1)
    elif len(shape) > 2:  # leading axes are samples, the last axis holds the variables
        x = x.reshape(-1, shape[-1])
    n_total = int(x.shape[0])
    subsampled = max_samples is not None and n_total > max_samples
    return take_rows(x, max_samples, np.random.default_rng(seed)), n_total, subsampled


def mardia_test(
    x: Any,
    *,
    max_samples: int | None = None,
    seed: int = 0,
    rank_rtol: float = DEFAULT_RANK_RTOL,
    drop_nonfinite: bool = False,
) -> KurtosisResult:
    """Mardia's kurtosis b_{2,d}, κ, and the normal-approximation test of Gaussianity.

    x: (n, d) array or tensor (1-D: d = 1; more axes: all but the last are samples).
    max_samples: keep a seeded uniform random subset of this many rows when n is larger
        (``None``, the default: use all rows; the analyses take config/analysis.yaml's).
        Sampling without replacement, so results are reproducible.
    seed: seed of that subset.
    rank_rtol: covariance eigenvalues ≤ rank_rtol × the largest are treated as zero and their
        directions dropped (see the module docstring).
    drop_nonfinite: drop rows holding NaN/±inf (e.g. masked scores) instead of raising.
    """
    arr, n_total, subsampled = _rows(x, max_samples, seed)
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        if not drop_nonfinite:
            raise ValueError("mardia: input holds NaN or inf (pass drop_nonfinite=True to drop those rows)")
        arr = arr[finite]
    n, d_input = arr.shape
    if n < 2 or d_input < 1:
        raise ValueError(f"mardia: need at least 2 rows and 1 column, got shape {arr.shape}")

    xc = arr - arr.mean(axis=0)
    cov = (xc.T @ xc) / n
    evals, evecs = np.linalg.eigh(cov)
    top = float(evals[-1])
    keep = evals > rank_rtol * top if top > 0 else np.zeros_like(evals, dtype=bool)
    d = int(keep.sum())

    nan = float("nan")
    if d == 0:  # constant data: kurtosis undefined
        return KurtosisResult(n, n_total, d_input, 0, nan, nan, nan, nan, nan, nan, subsampled, True,
                              "constant", seed if subsampled else None)
    if d == d_input:
        chol = np.linalg.cholesky(cov)  # cov = L Lᵀ; ‖L⁻¹ x‖² = xᵀ cov⁻¹ x
        w = np.linalg.solve(chol, xc.T)  # generic solve on a triangular L: d³ + n d² flops
        m = np.einsum("ij,ij->j", w, w)
        handling = "cholesky"
    else:  # project onto the numerical range: there cov is diag(evals[keep])
        y = xc @ evecs[:, keep]
        m = np.einsum("ij,ij->i", y, y / evals[keep])
        handling = "projected"

    b2 = float(np.mean(m * m))
    e_b2 = expected_b2(d, n)
    se = b2_standard_error(d, n)
    z = (b2 - e_b2) / se
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return KurtosisResult(
        n=n, n_total=n_total, d_input=d_input, d=d, b2=b2, kappa=b2 / (d * (d + 2)),
        expected_b2=e_b2, se_b2=se, z=z, p_value=p, subsampled=subsampled,
        singular=d < d_input, cov_handling=handling, seed=seed if subsampled else None,
    )


def mardia_kurtosis(x: Any, **kwargs: Any) -> float:
    """Normalised Mardia kurtosis κ = b_{2,d} / (d(d+2)) (1 for Gaussian data); see mardia_test."""
    return mardia_test(x, **kwargs).kappa
