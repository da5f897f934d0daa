"""The building blocks of HKT's tile kernels (``tile.py`` beside it): tile loads, the coarse
levels' broadcast and reduction, λ, visibility and the matmul at the requested precision.
Layouts are stated in ``tile.py``."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["coarse", "dot_fits", "mm", "load_fine", "load_coarse", "coarse_keys", "coarse_queries",
           "broadcast", "reduce", "lam", "visible"]


@triton.constexpr_function
def coarse(block, factor):
    """Coarse positions of a level with upsampling factor ``factor`` in a tile of ``block``
    fine positions: block / factor, or 1 when the tile lies inside one coarse position."""
    return max(block // factor, 1)


@triton.constexpr_function
def dot_fits(m, k, n):
    """Whether ``tl.dot`` takes an (m, k) @ (k, n) product (every side at least 16)."""
    return m >= 16 and k >= 16 and n >= 16


@triton.jit
def mm(a, b, PRECISION: tl.constexpr):
    """a @ b accumulated in float32: ``tl.dot`` where the shapes allow, else a broadcast sum
    (the small coarse tiles of deep levels, and the tiny tiles of the interpreter tests)."""
    if dot_fits(a.shape[0], a.shape[1], b.shape[1]):
        c = tl.dot(a, b, input_precision=PRECISION)
    else:
        c = tl.sum(a[:, :, None].to(tl.float32) * b[None, :, :].to(tl.float32), axis=1)
    return c


@triton.jit
def load_fine(ptr, rows, stride_r, limit, cols, D: tl.constexpr):
    """Rows ``rows`` (< limit) of a (rows, D) slab with row stride ``stride_r``; zeros elsewhere."""
    mask = (rows[:, None] < limit) & (cols[None, :] < D)
    return tl.load(ptr + rows[:, None] * stride_r + cols[None, :], mask=mask, other=0.0)


@triton.jit
def load_coarse(ptr, first, t_pad, stride_r, cols, D: tl.constexpr, STRIDE: tl.constexpr,
                 LEVEL: tl.constexpr, BLOCK: tl.constexpr):
    """Level LEVEL's coarse rows for the tile of BLOCK fine positions starting at ``first``:
    (coarse(BLOCK, s^LEVEL), D) rows ⌊first / s^LEVEL⌋ …, once per tile."""
    F: tl.constexpr = STRIDE**LEVEL
    start = t_pad * 0  # level LEVEL's first row: Σ_{m<LEVEL} T_pad / s^m; its length T_pad / s^LEVEL
    length = t_pad
    for _ in tl.static_range(LEVEL):
        start += length
        length = length // STRIDE
    rows = first // F + tl.arange(0, coarse(BLOCK, F))
    mask = (rows[:, None] < length) & (cols[None, :] < D)
    return tl.load(ptr + (start + rows[:, None]) * stride_r + cols[None, :], mask=mask, other=0.0)


@triton.jit
def coarse_keys(K, k0, n0, t_pad, s_kr, cols, D: tl.constexpr, STRIDE: tl.constexpr,
                LEVELS: tl.constexpr, BN: tl.constexpr):
    """The key tile's coarse keys of levels 1-3 (``kc1``, ``kc2``, ``kc3``): each level's own
    rows where the layer has it, else ``k0`` (never read: Triton keeps no lists, and a name must
    be bound on every path)."""
    kc1 = k0
    kc2 = k0
    kc3 = k0
    if LEVELS > 1:
        kc1 = load_coarse(K, n0, t_pad, s_kr, cols, D, STRIDE, 1, BN)
    if LEVELS > 2:
        kc2 = load_coarse(K, n0, t_pad, s_kr, cols, D, STRIDE, 2, BN)
    if LEVELS > 3:
        kc3 = load_coarse(K, n0, t_pad, s_kr, cols, D, STRIDE, 3, BN)
    return kc1, kc2, kc3


@triton.jit
def coarse_queries(Q, LAM, q0, lam0, m0, rows, t, t_pad, s_qr, s_lt, s_ll, cols, D: tl.constexpr,
                   STRIDE: tl.constexpr, LEVELS: tl.constexpr, BM: tl.constexpr):
    """The query tile's coarse queries and λ of levels 1-3 (``qc1, lam1, qc2, lam2, qc3,
    lam3``), as :func:`coarse_keys` does for keys: ``q0`` and ``lam0`` where a level is absent."""
    qc1 = q0
    qc2 = q0
    qc3 = q0
    lam1 = lam0
    lam2 = lam0
    lam3 = lam0
    if LEVELS > 1:
        qc1 = load_coarse(Q, m0, t_pad, s_qr, cols, D, STRIDE, 1, BM)
        lam1 = lam(LAM, rows, t, s_lt, s_ll, 1)
    if LEVELS > 2:
        qc2 = load_coarse(Q, m0, t_pad, s_qr, cols, D, STRIDE, 2, BM)
        lam2 = lam(LAM, rows, t, s_lt, s_ll, 2)
    if LEVELS > 3:
        qc3 = load_coarse(Q, m0, t_pad, s_qr, cols, D, STRIDE, 3, BM)
        lam3 = lam(LAM, rows, t, s_lt, s_ll, 3)
    return qc1, lam1, qc2, lam2, qc3, lam3

@triton.jit
def broadcast(sc, BM: tl.constexpr, BN: tl.constexpr):
    """Nearest upsampling in registers: (CM, CN) coarse scores -> (BM, BN), each coarse score
    repeated over the BM/CM × BN/CN fine positions it covers (U_l S U_lᵀ on the tile)."""
    CM: tl.constexpr = sc.shape[0]
    CN: tl.constexpr = sc.shape[1]
    wide = tl.broadcast_to(sc[:, None, :, None], (CM, BM // CM, CN, BN // CN))
    return tl.reshape(wide, (BM, BN))


@triton.jit
def reduce(x, CM: tl.constexpr, CN: tl.constexpr):
    """The adjoint of :func:`broadcast`: (BM, BN) -> (CM, CN) sums over each coarse block."""
    BM: tl.constexpr = x.shape[0]
    BN: tl.constexpr = x.shape[1]
    blocks = tl.reshape(x, (CM, BM // CM, CN, BN // CN))
    return tl.sum(tl.sum(blocks, axis=3), axis=1)


@triton.jit
def lam(ptr, rows, t, stride_t, stride_l, LEVEL: tl.constexpr):
    """λ_l for the tile's query rows, float32."""
    return tl.load(ptr + rows * stride_t + LEVEL * stride_l, mask=rows < t, other=0.0).to(tl.float32)


@triton.jit
def visible(rows, keys, t, mask_ptr, CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr):
    """(BM, BN) bool: key j exists (< T), is a real token, and (causal) j <= i."""
    ok = (keys[None, :] < t) & (rows[:, None] >= 0)
    if HAS_MASK:
        real = tl.load(mask_ptr + keys, mask=keys < t, other=0)
        ok = ok & (real[None, :] != 0)
    if CAUSAL:
        ok = ok & (keys[None, :] <= rows[:, None])
    return ok
