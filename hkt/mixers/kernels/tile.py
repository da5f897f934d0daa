"""Triton kernels of HKT's tile attention; the maths and the host side are in
``hkt/mixers/tile_attention.py``, the kernels' building blocks in ``tile_parts.py``.

In a subpackage: the mixer registry does not import it, so importing ``hkt.mixers``
never needs Triton. ``@triton.jit`` reads ``TRITON_INTERPRET`` when it
decorates, here and in Triton's own library (``tl.zeros``, ``tl.sum``, …) when triton is first
imported, so the whole process either interprets or compiles; :data:`INTERPRETED` records which.

Layouts. Per-level queries and keys are concatenated along time: ``Q[b, r, h·D + c]`` with
level l's rows at ``start_l = Σ_{m<l} T_pad / s^m``, ``T_l = T_pad / s^l`` rows long. V, O and dO
are ``(B, T, H·D)``; λ is ``(B, H, T, L)`` with stride 0 on broadcast axes; LSE and Δ are
``(B, H, T)`` float32. Scores are kept in log2 units inside the softmax (``exp2``).

Levels are unrolled up to four (``tile.MAX_LEVELS``): level l ≥ 1 has its own coarse query / key tiles and
accumulators (``qc1``, ``dk2``, …), named by level because Triton keeps no lists of tensors; the
per-level loads are ``tile_parts.coarse_queries`` and ``coarse_keys``, one helper each.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton import knobs

from hkt.mixers.kernels.tile_parts import (backward_head, backward_key_tile, backward_query_tile,
                                            broadcast, coarse, coarse_keys, coarse_queries, lam,
                                            load_fine, mm, reduce, store_levels, visible)

INTERPRETED: bool = bool(knobs.runtime.interpret)


@triton.jit
def hkt_tile_forward(
    Q, K, V, LAM, MASK, O, LSE,
    s_qb, s_qr, s_kb, s_kr, s_vb, s_vr, s_ob, s_or, s_lb, s_lh, s_lt, s_ll, s_mb,
    t, t_pad, H, scale_log2,
    LEVELS: tl.constexpr, STRIDE: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One query tile of one (sequence, head): O = softmax(Σ_l λ_l Ŝ^(l) + mask) V, online."""
    m0 = tl.program_id(0) * BM
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    Q += b * s_qb + h * D
    K += b * s_kb + h * D
    V += b * s_vb + h * D
    LAM += b * s_lb + h * s_lh
    MASK += b * s_mb
    rows = m0 + tl.arange(0, BM)
    cols = tl.arange(0, BD)
    # once per query tile: the fine queries, the coarse queries of each level, λ
    q0 = load_fine(Q, rows, s_qr, t, cols, D)
    lam0 = lam(LAM, rows, t, s_lt, s_ll, 0)
    qc1, lam1, qc2, lam2, qc3, lam3 = coarse_queries(Q, LAM, q0, lam0, m0, rows, t, t_pad, s_qr,
                                                     s_lt, s_ll, cols, D, STRIDE, LEVELS, BM)

    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, BD], tl.float32)
    hi = t
    if CAUSAL:
        hi = tl.minimum(t, m0 + BM)
    for n0 in range(0, hi, BN):
        keys = n0 + tl.arange(0, BN)
        k0 = load_fine(K, keys, s_kr, t, cols, D)
        kc1, kc2, kc3 = coarse_keys(K, k0, n0, t_pad, s_kr, cols, D, STRIDE, LEVELS, BN)
        s = lam0[:, None] * mm(q0, tl.trans(k0), PRECISION)
        if LEVELS > 1:  # level l: one (BM/f × BN/f) product per tile pair, broadcast
            s += lam1[:, None] * broadcast(mm(qc1, tl.trans(kc1), PRECISION), BM, BN)
        if LEVELS > 2:
            s += lam2[:, None] * broadcast(mm(qc2, tl.trans(kc2), PRECISION), BM, BN)
        if LEVELS > 3:
            s += lam3[:, None] * broadcast(mm(qc3, tl.trans(kc3), PRECISION), BM, BN)
        s = tl.where(visible(rows, keys, t, MASK, CAUSAL, HAS_MASK), s * scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = load_fine(V, keys, s_vr, t, cols, D)
        acc = acc * alpha[:, None] + mm(p.to(v.dtype), v, PRECISION)
        m_i = m_new
    seen = l_i > 0.0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    lse = tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), float("inf"))
    O += b * s_ob + h * D
    tl.store(O + rows[:, None] * s_or + cols[None, :], out.to(O.dtype.element_ty),
             mask=(rows[:, None] < t) & (cols[None, :] < D))
    tl.store(LSE + bh * t + rows, lse, mask=rows < t)


@triton.jit
def _probs(q0, k0, lam0, qc1, kc1, lam1, qc2, kc2, lam2, qc3, kc3, lam3, rows, keys, t, MASK, lse,
           scale_log2, LEVELS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
           CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr, PRECISION: tl.constexpr):
    """Recomputed tile of P and each level's unweighted fine scores q·k (BM, BN)."""
    r0 = mm(q0, tl.trans(k0), PRECISION)
    s = lam0[:, None] * r0
    r1 = r0
    r2 = r0
    r3 = r0
    if LEVELS > 1:
        r1 = broadcast(mm(qc1, tl.trans(kc1), PRECISION), BM, BN)
        s += lam1[:, None] * r1
    if LEVELS > 2:
        r2 = broadcast(mm(qc2, tl.trans(kc2), PRECISION), BM, BN)
        s += lam2[:, None] * r2
    if LEVELS > 3:
        r3 = broadcast(mm(qc3, tl.trans(kc3), PRECISION), BM, BN)
        s += lam3[:, None] * r3
    s = tl.where(visible(rows, keys, t, MASK, CAUSAL, HAS_MASK), s * scale_log2, float("-inf"))
    p = tl.exp2(s - lse[:, None])
    return p, r0, r1, r2, r3


@triton.jit
def hkt_tile_backward_query(
    Q, K, V, LAM, MASK, DO, LSE, DELTA, DQ, DLAM,
    s_qb, s_qr, s_kb, s_kr, s_vb, s_vr, s_db, s_dr, s_lb, s_lh, s_lt, s_ll, s_mb,
    t, t_pad, H, n_tiles, slab, scale, scale_log2,
    LEVELS: tl.constexpr, STRIDE: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One query tile: ∂/∂Q^(l) (fine rows for l = 0, the tile's coarse rows for l ≥ 1) into
    the partial slab DQ (B, H, rows, D) and ∂/∂λ into DLAM (B, H, T, L)."""
    pid = tl.program_id(0)
    m0 = pid * BM
    bh, b, h, Q, K, V, DO, LAM, MASK = backward_head(Q, K, V, DO, LAM, MASK, s_qb, s_kb, s_vb,
                                                     s_db, s_lb, s_lh, s_mb, H, D)
    cols = tl.arange(0, BD)
    rows, q0, do, lse, delta, lam0, qc1, lam1, qc2, lam2, qc3, lam3 = backward_query_tile(
        Q, DO, LAM, LSE, DELTA, m0, bh, t, t_pad, s_qr, s_dr, s_lt, s_ll, cols, D, STRIDE, LEVELS,
        BM)
    dq0 = tl.zeros([BM, BD], tl.float32)
    dq1 = tl.zeros([coarse(BM, STRIDE), BD], tl.float32)
    dq2 = tl.zeros([coarse(BM, STRIDE * STRIDE), BD], tl.float32)
    dq3 = tl.zeros([coarse(BM, STRIDE * STRIDE * STRIDE), BD], tl.float32)
    dl0 = tl.zeros([BM], tl.float32)
    dl1 = tl.zeros([BM], tl.float32)
    dl2 = tl.zeros([BM], tl.float32)
    dl3 = tl.zeros([BM], tl.float32)
    hi = t
    if CAUSAL:
        hi = tl.minimum(t, m0 + BM)
    for n0 in range(0, hi, BN):
        keys, k0, v, kc1, kc2, kc3 = backward_key_tile(K, V, n0, t, t_pad, s_kr, s_vr, cols, D,
                                                       STRIDE, LEVELS, BN)
        p, r0, r1, r2, r3 = _probs(q0, k0, lam0, qc1, kc1, lam1, qc2, kc2, lam2, qc3, kc3, lam3,
                                   rows, keys, t, MASK, lse, scale_log2, LEVELS, BM, BN, CAUSAL,
                                   HAS_MASK, PRECISION)
        ds = p * (mm(do, tl.trans(v), PRECISION) - delta[:, None])  # ∂/∂S, S = Σ_l λ_l Ŝ^(l)
        dl0 += tl.sum(ds * r0, 1)
        dq0 += mm((ds * lam0[:, None]).to(k0.dtype), k0, PRECISION)
        if LEVELS > 1:
            dl1 += tl.sum(ds * r1, 1)
            dq1 += mm(reduce(ds * lam1[:, None], dq1.shape[0], kc1.shape[0]).to(kc1.dtype), kc1,
                      PRECISION)
        if LEVELS > 2:
            dl2 += tl.sum(ds * r2, 1)
            dq2 += mm(reduce(ds * lam2[:, None], dq2.shape[0], kc2.shape[0]).to(kc2.dtype), kc2,
                      PRECISION)
        if LEVELS > 3:
            dl3 += tl.sum(ds * r3, 1)
            dq3 += mm(reduce(ds * lam3[:, None], dq3.shape[0], kc3.shape[0]).to(kc3.dtype), kc3,
                      PRECISION)
    # the partial slab of one (sequence, head): `slab` rows
    store_levels(DQ + bh * slab * D, dq0, dq1, dq2, dq3, scale, pid, n_tiles, cols, D, LEVELS)
    DLAM += bh * t * LEVELS
    tl.store(DLAM + rows * LEVELS, dl0 * scale, mask=rows < t)
    if LEVELS > 1:
        tl.store(DLAM + rows * LEVELS + 1, dl1 * scale, mask=rows < t)
    if LEVELS > 2:
        tl.store(DLAM + rows * LEVELS + 2, dl2 * scale, mask=rows < t)
    if LEVELS > 3:
        tl.store(DLAM + rows * LEVELS + 3, dl3 * scale, mask=rows < t)


@triton.jit
def hkt_tile_backward_key(
    Q, K, V, LAM, MASK, DO, LSE, DELTA, DK, DV,
    s_qb, s_qr, s_kb, s_kr, s_vb, s_vr, s_db, s_dr, s_lb, s_lh, s_lt, s_ll, s_mb, s_dvb, s_dvr,
    t, t_pad, H, n_tiles, slab, scale, scale_log2,
    LEVELS: tl.constexpr, STRIDE: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One key tile: ∂/∂V (its rows of DV) and ∂/∂K^(l) (fine rows for l = 0, the tile's coarse
    rows for l ≥ 1) into the partial slab DK (B, H, rows, D), over every query tile that sees it."""
    pid = tl.program_id(0)
    n0 = pid * BN
    bh, b, h, Q, K, V, DO, LAM, MASK = backward_head(Q, K, V, DO, LAM, MASK, s_qb, s_kb, s_vb,
                                                     s_db, s_lb, s_lh, s_mb, H, D)
    cols = tl.arange(0, BD)
    keys, k0, v, kc1, kc2, kc3 = backward_key_tile(K, V, n0, t, t_pad, s_kr, s_vr, cols, D,
                                                   STRIDE, LEVELS, BN)
    dv = tl.zeros([BN, BD], tl.float32)
    dk0 = tl.zeros([BN, BD], tl.float32)
    dk1 = tl.zeros([coarse(BN, STRIDE), BD], tl.float32)
    dk2 = tl.zeros([coarse(BN, STRIDE * STRIDE), BD], tl.float32)
    dk3 = tl.zeros([coarse(BN, STRIDE * STRIDE * STRIDE), BD], tl.float32)
    lo = 0
    if CAUSAL:
        lo = (n0 // BM) * BM  # earlier query tiles see none of these keys
    for m0 in range(lo, t, BM):
        rows, q0, do, lse, delta, lam0, qc1, lam1, qc2, lam2, qc3, lam3 = backward_query_tile(
            Q, DO, LAM, LSE, DELTA, m0, bh, t, t_pad, s_qr, s_dr, s_lt, s_ll, cols, D, STRIDE,
            LEVELS, BM)
        p, r0, r1, r2, r3 = _probs(q0, k0, lam0, qc1, kc1, lam1, qc2, kc2, lam2, qc3, kc3, lam3,
                                   rows, keys, t, MASK, lse, scale_log2, LEVELS, BM, BN, CAUSAL,
                                   HAS_MASK, PRECISION)
        dv += mm(tl.trans(p).to(do.dtype), do, PRECISION)
        ds = p * (mm(do, tl.trans(v), PRECISION) - delta[:, None])
        dk0 += mm(tl.trans(ds * lam0[:, None]).to(q0.dtype), q0, PRECISION)
        if LEVELS > 1:
            dk1 += mm(tl.trans(reduce(ds * lam1[:, None], qc1.shape[0], dk1.shape[0])).to(qc1.dtype),
                      qc1, PRECISION)
        if LEVELS > 2:
            dk2 += mm(tl.trans(reduce(ds * lam2[:, None], qc2.shape[0], dk2.shape[0])).to(qc2.dtype),
                      qc2, PRECISION)
        if LEVELS > 3:
            dk3 += mm(tl.trans(reduce(ds * lam3[:, None], qc3.shape[0], dk3.shape[0])).to(qc3.dtype),
                      qc3, PRECISION)
    DV += b * s_dvb + h * D
    tl.store(DV + keys[:, None] * s_dvr + cols[None, :], dv.to(DV.dtype.element_ty),
             mask=(keys[:, None] < t) & (cols[None, :] < D))
    store_levels(DK + bh * slab * D, dk0, dk1, dk2, dk3, scale, pid, n_tiles, cols, D, LEVELS)
