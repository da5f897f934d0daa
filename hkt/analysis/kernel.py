"""The kernel view of HKT scores: bilinear forms, their symmetric parts, PSD and rank.

Level l of one head scores tokens with the bilinear form s(x, y) = x M^(l) yᵀ,
M^(l) = W_Q^(l) W_K^(l)ᵀ / √d (D×D, rank ≤ d). Its symmetric part M_s = (M + Mᵀ)/2 is the
reciprocal (kernel) part, M_a = (M − Mᵀ)/2 the directional part. The paper's sufficient condition
for a PSD fused kernel is λ_l ≥ 0 and λ_min(M_s^(l)) ≥ 0 for every level, and the symmetrised Gram
has rank ≤ Σ_l rank(M_s^(l)).

Slicing a torch ``nn.Linear(D, H·d)`` (weight shape (H·d, D), q = x @ weight.T) for head h:
``W_Q = weight[h*d:(h+1)*d, :].T`` (shape (D, d)); see :func:`head_columns`. Projection biases
make the score affine rather than bilinear; they are not part of M and are ignored here.

Tolerances follow ``numpy.linalg.matrix_rank``: an eigenvalue counts as zero when
|λ| ≤ rtol × max|λ|, with rtol = N × machine epsilon (N the matrix size) unless given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = [
    "BilinearParts",
    "GramReport",
    "PSDCondition",
    "decompose_bilinear",
    "decompose_matrix",
    "gram_rank_report",
    "head_columns",
    "psd_condition",
]

_EPS = float(np.finfo(np.float64).eps)


def as_float64(x: Any) -> np.ndarray:
    """float64 numpy copy of an array or torch tensor."""
    if hasattr(x, "detach"):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _tol(evals: np.ndarray, size: int, rtol: float | None) -> float:
    """Absolute zero threshold: rtol (default size·eps) × max|λ|."""
    scale = float(np.max(np.abs(evals))) if evals.size else 0.0
    return (size * _EPS if rtol is None else rtol) * scale


def head_columns(weight: Any, head: int, head_dim: int) -> np.ndarray:
    """(D_in, d) columns of head ``head`` from an nn.Linear weight of shape (H·d, D_in)."""
    w = as_float64(weight)
    return w[head * head_dim:(head + 1) * head_dim, :].T


@dataclass(frozen=True)
class BilinearParts:
    """M = M_s + M_a for one level and head, with the spectrum of M_s.

    ``eigvals`` ascending (eigvalsh of M_s); ``tol`` is the zero threshold used for ``rank``,
    ``psd`` (λ_min ≥ −tol) and ``neg_mass_share`` (Σ|λ| over λ < −tol, divided by Σ|λ|).
    """

    m: np.ndarray
    m_sym: np.ndarray
    m_anti: np.ndarray
    antisym_share: float  # ‖M_a‖_F / ‖M‖_F (0: symmetric; 1: antisymmetric); nan for M = 0
    eigvals: np.ndarray
    lambda_min: float
    lambda_max: float
    neg_mass_share: float
    rank: int  # numerical rank of M_s
    tol: float
    psd: bool

    def summary(self) -> dict[str, Any]:
        """Scalars only (for a report row)."""
        return {k: float(getattr(self, k)) for k in ("antisym_share", "lambda_min", "lambda_max",
                                                     "neg_mass_share", "rank", "psd")}


def decompose_matrix(m: Any, *, rtol: float | None = None) -> BilinearParts:
    """Symmetric/antisymmetric split and M_s spectrum of a square matrix M (see BilinearParts)."""
    m = as_float64(m)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"decompose_matrix: need a square matrix, got shape {m.shape}")
    m_sym = (m + m.T) / 2
    m_anti = (m - m.T) / 2
    norm = float(np.linalg.norm(m))
    evals = np.linalg.eigvalsh(m_sym)
    tol = _tol(evals, m.shape[0], rtol)
    abs_mass = float(np.abs(evals).sum())
    neg_mass = float(-evals[evals < -tol].sum())
    return BilinearParts(
        m=m, m_sym=m_sym, m_anti=m_anti,
        antisym_share=float(np.linalg.norm(m_anti)) / norm if norm > 0 else float("nan"),
        eigvals=evals, lambda_min=float(evals[0]), lambda_max=float(evals[-1]),
        neg_mass_share=neg_mass / abs_mass if abs_mass > 0 else 0.0,
        rank=int(np.sum(np.abs(evals) > tol)), tol=tol, psd=bool(evals[0] >= -tol),
    )


def decompose_bilinear(w_q: Any, w_k: Any, head_dim: int | None = None, *,
                       rtol: float | None = None) -> BilinearParts:
    """Parts of M = W_Q W_Kᵀ / √head_dim for one head; W_Q, W_K: (D, d) (see head_columns).

    head_dim: the d in the score scale 1/√d; defaults to W_Q's column count.
    rtol: relative eigenvalue threshold (default D·eps, as numpy.linalg.matrix_rank).
    """
    w_q, w_k = as_float64(w_q), as_float64(w_k)
    if w_q.ndim != 2 or w_q.shape != w_k.shape:
        raise ValueError(f"decompose_bilinear: W_Q {w_q.shape} and W_K {w_k.shape} must both be (D, d)")
    d = w_q.shape[1] if head_dim is None else head_dim
    return decompose_matrix(w_q @ w_k.T / math.sqrt(d), rtol=rtol)


def _parts(p: Any, rtol: float | None) -> BilinearParts:
    return p if isinstance(p, BilinearParts) else decompose_matrix(p, rtol=rtol)


@dataclass(frozen=True)
class PSDCondition:
    """The paper's sufficient condition; truthy when it holds."""

    holds: bool
    lambdas_nonneg: tuple[bool, ...]  # per level: λ_l ≥ 0 (for every token when per-token)
    levels_psd: tuple[bool, ...]  # per level: λ_min(M_s^(l)) ≥ −tol
    lambda_min: tuple[float, ...]  # per level λ_min(M_s^(l))

    def __bool__(self) -> bool:
        return self.holds


def psd_condition(parts_per_level: Sequence[Any], lambdas: Any, *,
                  rtol: float | None = None) -> PSDCondition:
    """λ_l ≥ 0 and λ_min(M_s^(l)) ≥ 0 for all l (sufficient for a PSD fused kernel).

    parts_per_level: BilinearParts or square matrices M^(l), one per level.
    lambdas: (L,) static weights or (..., L) per-token weights (level on the last axis).
    """
    parts = [_parts(p, rtol) for p in parts_per_level]
    lam = as_float64(lambdas)
    if lam.shape[-1:] != (len(parts),):
        raise ValueError(f"psd_condition: lambdas' last axis must have {len(parts)} levels, got {lam.shape}")
    nonneg = tuple(bool(np.all(v >= 0)) for v in lam.reshape(-1, len(parts)).T)
    psd = tuple(p.psd for p in parts)
    return PSDCondition(all(nonneg) and all(psd), nonneg, psd, tuple(p.lambda_min for p in parts))


@dataclass(frozen=True)
class GramReport:
    """Numerical rank and spectrum of the symmetrised fused Gram G on one input (see gram_rank_report)."""

    T: int
    rank: int
    rank_bound: int  # Σ_l rank(M_s^(l)) (the paper's bound; also rank ≤ T)
    level_ranks: tuple[int, ...]
    lambda_min: float  # smallest eigenvalue of G
    lambda_max: float
    n_negative: int  # eigenvalues < −tol
    psd: bool  # G is PSD on these inputs (λ_min ≥ −tol)
    tol: float
    lambda_mode: str  # "static" or "per_token"
    condition_holds: bool  # the sufficient condition (psd_condition)


def gram_rank_report(features_per_level: Sequence[Any], parts_per_level: Sequence[Any],
                     lambdas: Any, *, rtol: float | None = None) -> GramReport:
    """Rank and PSD-ness of G = Σ_l D_l X̃_l M_s^(l) X̃_lᵀ D_l on real inputs.

    features_per_level: X̃_l = U_l X^(l), each (T, D): the level's pyramid features upsampled to
        full resolution (the inputs of that level's projections).
    parts_per_level: BilinearParts or square M^(l) (only M_s^(l) is used).
    lambdas: (L,) static — D_l = √λ_l I, so G = Σ_l λ_l X̃_l M_s X̃_lᵀ = (S + Sᵀ)/2, the symmetric
        part of the bias-free pre-softmax scores; or (T, L) per query token — D_l = diag(√λ_l(i)),
        the symmetric kernel k(i, j) = Σ_l √(λ_l(i) λ_l(j)) x̃_i M_s x̃_jᵀ that equals the static
        one for constant λ (per-token λ must be ≥ 0). Either way each term has rank ≤ rank(M_s^(l)),
        hence rank(G) ≤ Σ_l rank(M_s^(l)), and each term is PSD when M_s^(l) is and λ_l ≥ 0.
    rtol: relative threshold for G's rank (default max(T, D)·eps) and for the per-level ranks.
    """
    feats = [as_float64(x) for x in features_per_level]
    parts = [_parts(p, rtol) for p in parts_per_level]
    if len(feats) != len(parts) or not feats:
        raise ValueError(f"gram_rank_report: {len(feats)} feature levels vs {len(parts)} parts")
    t = feats[0].shape[0]
    for x, p in zip(feats, parts):
        if x.shape != (t, p.m_sym.shape[0]):
            raise ValueError(f"gram_rank_report: features {x.shape} do not match (T={t}, D={p.m_sym.shape[0]})")
    lam = as_float64(lambdas)
    if lam.shape == (len(parts),):
        mode = "static"  # G = Σ λ_l X̃ M_s X̃ᵀ; any sign of λ is allowed here
        g = sum(float(v) * (x @ p.m_sym @ x.T) for v, x, p in zip(lam, feats, parts))
    elif lam.shape == (t, len(parts)):
        if np.any(lam < 0):
            raise ValueError("gram_rank_report: per-token lambdas must be ≥ 0 (they enter as √λ)")
        mode = "per_token"
        g = 0.0
        for lvl, (x, p) in enumerate(zip(feats, parts)):
            y = x * np.sqrt(lam[:, lvl])[:, None]  # D_l X̃_l
            g = g + y @ p.m_sym @ y.T
    else:
        raise ValueError(f"gram_rank_report: lambdas must be (L,) or (T, L) = ({t}, {len(parts)}), got {lam.shape}")
    g = (g + g.T) / 2  # exact symmetry for eigvalsh
    evals = np.linalg.eigvalsh(g)
    size = max(t, parts[0].m_sym.shape[0])
    tol = _tol(evals, size, rtol)
    return GramReport(
        T=t, rank=int(np.sum(np.abs(evals) > tol)), rank_bound=sum(p.rank for p in parts),
        level_ranks=tuple(p.rank for p in parts), lambda_min=float(evals[0]),
        lambda_max=float(evals[-1]), n_negative=int(np.sum(evals < -tol)),
        psd=bool(evals[0] >= -tol), tol=tol, lambda_mode=mode,
        condition_holds=psd_condition(parts, lam, rtol=rtol).holds,
    )
