"""The building blocks of HKT's tile kernels (``tile.py`` beside it): tile loads, the coarse
levels' broadcast and reduction, λ, visibility and the matmul at the requested precision.
Layouts are stated in ``tile.py`` (the kernels)."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["coarse", "dot_fits", "mm", "load_fine", "load_coarse", "coarse_keys", "coarse_queries",
           "broadcast", "reduce", "lam", "visible", "backward_head", "backward_query_tile",
           "backward_key_tile", "store_partial", "store_levels"]


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


@triton.jit
def backward_head(Q, K, V, DO, LAM, MASK, s_qb, s_kb, s_vb, s_db, s_lb, s_lh, s_mb, H,
                  D: tl.constexpr):
    """A backward program's (sequence, head) ``bh`` (the grid's second axis), its sequence ``b``
    and head ``h``, and the pointers Q, K, V, dO, λ and the key mask moved to them."""
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    return (bh, b, h, Q + b * s_qb + h * D, K + b * s_kb + h * D, V + b * s_vb + h * D,
            DO + b * s_db + h * D, LAM + b * s_lb + h * s_lh, MASK + b * s_mb)


@triton.jit
def backward_query_tile(Q, DO, LAM, LSE, DELTA, m0, bh, t, t_pad, s_qr, s_dr, s_lt, s_ll, cols,
                        D: tl.constexpr, STRIDE: tl.constexpr, LEVELS: tl.constexpr,
                        BM: tl.constexpr):
    """What backward reads of the query tile at ``m0``: its rows, the fine queries, dO, the
    log-sum-exp, Δ, λ_0 and each level's coarse queries and λ (:func:`coarse_queries`)."""
    rows = m0 + tl.arange(0, BM)
    q0 = load_fine(Q, rows, s_qr, t, cols, D)
    do = load_fine(DO, rows, s_dr, t, cols, D)
    lse = tl.load(LSE + bh * t + rows, mask=rows < t, other=float("inf"))
    delta = tl.load(DELTA + bh * t + rows, mask=rows < t, other=0.0)
    lam0 = lam(LAM, rows, t, s_lt, s_ll, 0)
    qc1, lam1, qc2, lam2, qc3, lam3 = coarse_queries(Q, LAM, q0, lam0, m0, rows, t, t_pad, s_qr,
                                                     s_lt, s_ll, cols, D, STRIDE, LEVELS, BM)
    return rows, q0, do, lse, delta, lam0, qc1, lam1, qc2, lam2, qc3, lam3


@triton.jit
def backward_key_tile(K, V, n0, t, t_pad, s_kr, s_vr, cols, D: tl.constexpr,
                      STRIDE: tl.constexpr, LEVELS: tl.constexpr, BN: tl.constexpr):
    """What backward reads of the key tile at ``n0``: its keys, the fine keys, V and each
    level's coarse keys (:func:`coarse_keys`)."""
    keys = n0 + tl.arange(0, BN)
    k0 = load_fine(K, keys, s_kr, t, cols, D)
    v = load_fine(V, keys, s_vr, t, cols, D)
    kc1, kc2, kc3 = coarse_keys(K, k0, n0, t_pad, s_kr, cols, D, STRIDE, LEVELS, BN)
    return keys, k0, v, kc1, kc2, kc3


@triton.jit
def store_partial(ptr, acc, first, n_rows, D: tl.constexpr, cols):
    """Rows ``first …`` of a float32 (rows, D) partial-gradient slab."""
    r = first + tl.arange(0, acc.shape[0])
    tl.store(ptr + r[:, None] * D + cols[None, :], acc, mask=(r[:, None] < n_rows) & (cols[None, :] < D))


@triton.jit
def store_levels(ptr, acc0, acc1, acc2, acc3, scale, pid, n_tiles, cols, D: tl.constexpr,
                 LEVELS: tl.constexpr):
    """One tile's partial gradients of every level, times ``scale``, into the partial slab of
    one (sequence, head) at ``ptr``: per level n_tiles × its rows per tile, levels one after
    another (level 0's rows per tile are the tile's, level l's its coarse rows)."""
    B0: tl.constexpr = acc0.shape[0]
    C1: tl.constexpr = acc1.shape[0]
    C2: tl.constexpr = acc2.shape[0]
    store_partial(ptr, acc0 * scale, pid * B0, n_tiles * B0, D, cols)
    if LEVELS > 1:
        ptr += n_tiles * B0 * D
        store_partial(ptr, acc1 * scale, pid * C1, n_tiles * C1, D, cols)
    if LEVELS > 2:
        ptr += n_tiles * C1 * D
        store_partial(ptr, acc2 * scale, pid * C2, n_tiles * C2, D, cols)
    if LEVELS > 3:
        ptr += n_tiles * C2 * D
        store_partial(ptr, acc3 * scale, pid * acc3.shape[0], n_tiles * acc3.shape[0], D, cols)
