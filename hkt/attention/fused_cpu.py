"""HKT's factorised attention on PyTorch's CPU flash kernel, chunked and memory-lean.

Plain autograd through ``scaled_dot_product_attention`` keeps the widened inputs q̃, k̃ (width
L·d) and the zero-padded V and output (the CPU kernel wants equal widths) alive for backward:
about 3× the attention memory of MHA for L = 3. This function instead

* takes the level features X^(l) and the per-level query/key projections, and saves only
  tensors that exist anyway (X^(l) is saved by the rest of the graph too), plus λ, V, the
  output and the log-sum-exp;
* runs over blocks of (sequences, heads), projecting, widening and attending one block at a
  time, so Q^(l), K^(l), q̃ and k̃ never exist for the whole batch at once; the byte budget
  is ``chunk_mib`` of HKTAttention;
* recomputes the block's projections in backward (a small matmul) instead of storing them.

Forward and backward call the same aten kernels that ``scaled_dot_product_attention`` uses on
CPU (``_scaled_dot_product_flash_attention_for_cpu`` and its backward), so results match the
plain path to rounding. Other devices, dropout and autocast take the plain path.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from hkt.attention.upsample import Upsampler

_FORWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def cpu_kernel_applies(x: Tensor, dropout_p: float) -> bool:
    """Whether ``hkt_flash_cpu`` can run: CPU tensors, float32/64, no dropout, no autocast."""
    return (
        x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and dropout_p == 0.0
        and not torch.is_autocast_enabled("cpu")
    )


# Widened tensors alive per block in backward: q̃, k̃, padded V, output and its gradient, and
# the kernel's three input gradients.
_WIDE_TENSORS_PER_CHUNK = 8

Block = tuple[slice, slice]


def _chunks(v: Tensor, n_levels: int, chunk_bytes: float) -> list[Block]:
    """Blocks of (sequences, heads) whose widened tensors fit in ``chunk_bytes`` together:
    whole sequences when one fits, else groups of heads of one sequence.

    A block never has fewer (sequence, head) slices than torch has threads: the CPU kernel's
    backward parallelises over them, so a one-head block would leave the other cores idle.
    """
    b, h, t, d = v.shape
    per_head = _WIDE_TENSORS_PER_CHUNK * t * n_levels * d * v.element_size()
    heads = max(1, int(chunk_bytes // per_head), min(h, torch.get_num_threads()))
    if heads >= h:
        rows = heads // h
        return [(slice(i, min(i + rows, b)), slice(0, h)) for i in range(0, b, rows)]
    return [(slice(i, i + 1), slice(j, min(j + heads, h))) for i in range(b) for j in range(0, h, heads)]


def _take(t: Tensor, block: Block) -> Tensor:
    """Index a (B, H, …) tensor by a block, leaving broadcast (size-1) axes alone."""
    rows, heads = block
    return t[rows if t.shape[0] != 1 else slice(None), heads if t.shape[1] != 1 else slice(None)]


def _project(x: Tensor, w: Tensor, b: Tensor | None, heads: slice, d: int) -> Tensor:
    """Heads ``heads`` of the projection x W^T + b: (r, T_l, D) -> (r, h, T_l, d)."""
    cols = slice(heads.start * d, heads.stop * d)
    y = F.linear(x, w[cols], None if b is None else b[cols])
    return y.unflatten(-1, (-1, d)).transpose(1, 2)


class _HKTFlashCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ups, n_levels, mask, is_causal, scale, chunk_bytes, lam, v, *tensors):  # type: ignore[override]
        features, wq, bq, wk, bk = _split(tensors, n_levels)
        d = v.shape[-1]
        out = torch.empty_like(v)
        lse = v.new_empty(v.shape[:3])
        blocks = _chunks(v, n_levels, chunk_bytes)
        for block in blocks:
            queries, keys = _block_qk(features, wq, bq, wk, bk, block, d)
            q_tilde, k_tilde = _widen(ups, queries, keys, _take(lam, block))
            del queries, keys
            o, lse_block = _FORWARD(
                q_tilde, k_tilde, _pad(v[block], n_levels), 0.0, is_causal,
                attn_mask=None if mask is None else _take(mask, block), scale=scale,
            )
            out[block] = o[..., :d]
            lse[block] = lse_block
            del q_tilde, k_tilde, o
        ctx.ups, ctx.is_causal, ctx.scale, ctx.n_levels, ctx.blocks = ups, is_causal, scale, n_levels, blocks
        ctx.save_for_backward(mask, lam, v, out, lse, *tensors)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        mask, lam, v, out, lse, *tensors = ctx.saved_tensors
        n_levels, ups = ctx.n_levels, ctx.ups
        features, wq, bq, wk, bk = _split(tensors, n_levels)
        d = v.shape[-1]
        grad_v = torch.empty_like(v)
        grad_lam = torch.empty(v.shape[:3] + (n_levels,), dtype=v.dtype, device=v.device)
        grad_x = [torch.zeros_like(x) for x in features]
        grad_wq, grad_wk = [torch.zeros_like(w) for w in wq], [torch.zeros_like(w) for w in wk]
        grad_bq = [None if b is None else torch.zeros_like(b) for b in bq]
        grad_bk = [None if b is None else torch.zeros_like(b) for b in bk]
        for block in ctx.blocks:
            rows, heads = block
            lam_block = _take(lam, block)
            queries, keys = _block_qk(features, wq, bq, wk, bk, block, d)
            q_tilde, k_tilde = _widen(ups, queries, keys, lam_block)
            g_q, g_k, g_v = _BACKWARD(
                _pad(grad_out[block], n_levels), q_tilde, k_tilde, _pad(v[block], n_levels),
                _pad(out[block], n_levels), lse[block], 0.0, ctx.is_causal,
                attn_mask=None if mask is None else _take(mask, block), scale=ctx.scale,
            )
            del q_tilde, k_tilde
            grad_v[block] = g_v[..., :d]
            cols = slice(heads.start * d, heads.stop * d)
            for l in range(n_levels):
                g_level = g_q[..., l * d : (l + 1) * d]
                t_l = queries[l].shape[2]
                grad_lam[block][..., l : l + 1] = ups.dot(g_level, queries[l], l)
                g_coarse_q = ups.adjoint(g_level, l, t_l, lam_block[..., l : l + 1])
                g_coarse_k = ups.adjoint(g_k[..., l * d : (l + 1) * d], l, t_l)
                x = features[l][rows]
                for g, w, gw, gb in ((g_coarse_q, wq[l], grad_wq[l], grad_bq[l]),
                                     (g_coarse_k, wk[l], grad_wk[l], grad_bk[l])):
                    g = g.transpose(1, 2).flatten(2)  # (r, T_l, h·d): the block's output columns
                    grad_x[l][rows] += g @ w[cols]
                    gw[cols] += g.flatten(0, 1).T @ x.flatten(0, 1)
                    if gb is not None:
                        gb[cols] += g.sum((0, 1))
            del g_q, g_k, g_v, queries, keys
        grad_lam = grad_lam.sum_to_size(lam.shape)
        return (None, None, None, None, None, None, grad_lam, grad_v,
                *grad_x, *grad_wq, *grad_bq, *grad_wk, *grad_bk)


def _split(tensors: Sequence[Tensor | None], n: int) -> tuple[list, list, list, list, list]:
    """(features, W_Q, b_Q, W_K, b_K), each a list over levels, from the flat argument list."""
    return tuple(list(tensors[i * n : (i + 1) * n]) for i in range(5))  # type: ignore[return-value]


def _block_qk(features, wq, bq, wk, bk, block: Block, d: int) -> tuple[list[Tensor], list[Tensor]]:
    """Q^(l), K^(l) of one block's sequences and heads, every level: (r, h, T_l, d)."""
    rows, heads = block
    queries = [_project(x[rows], w, b, heads, d) for x, w, b in zip(features, wq, bq)]
    keys = [_project(x[rows], w, b, heads, d) for x, w, b in zip(features, wk, bk)]
    return queries, keys


def _pad(x: Tensor, n_levels: int) -> Tensor:
    """x (…, d) with zero columns appended to width L·d (the CPU kernel wants equal widths)."""
    d = x.shape[-1]
    wide = x.new_empty(x.shape[:-1] + (n_levels * d,))
    wide[..., :d] = x
    wide[..., d:] = 0
    return wide


def _widen(ups: Upsampler, queries: Sequence[Tensor], keys: Sequence[Tensor], lam: Tensor) -> tuple[Tensor, Tensor]:
    """q̃ = [λ_l U_l Q^(l)]_l and k̃ = [U_l K^(l)]_l (width L·d) for one block, built in place."""
    n_levels = len(queries)
    b, h, _, d = queries[0].shape
    q_tilde = queries[0].new_empty(b, h, ups.t, n_levels * d)
    k_tilde = queries[0].new_empty(b, h, ups.t, n_levels * d)
    for l in range(n_levels):
        cols = slice(l * d, (l + 1) * d)
        ups.up_into(q_tilde[..., cols], queries[l], l, lam[..., l : l + 1])
        ups.up_into(k_tilde[..., cols], keys[l], l)
    return q_tilde, k_tilde


def hkt_flash_cpu(
    features: Sequence[Tensor],
    q_proj: Sequence[torch.nn.Linear],
    k_proj: Sequence[torch.nn.Linear],
    lam: Tensor,
    v: Tensor,
    *,
    upsampler: Upsampler,
    mask: Tensor | None,
    is_causal: bool,
    scale: float,
    chunk_bytes: float,
) -> Tensor:
    """softmax(q̃ k̃^T · scale + mask) V with Q^(l) = q_proj[l](X^(l)), K^(l) = k_proj[l](X^(l)).

    features: X^(l) on the padded grid, (B, T_l, D) per level; λ broadcastable to (B, H, T, L);
    V: (B, H, T, d). ``mask``: a boolean (B or 1, 1, 1 or T, T) attention mask (True = attend)
    or None. ``chunk_bytes`` bounds the widened tensors alive at once."""
    n = len(features)
    float_mask = None
    if mask is not None:
        float_mask = torch.zeros(mask.shape, dtype=v.dtype, device=v.device).masked_fill_(~mask, float("-inf"))
    tensors = [*features, *(p.weight for p in q_proj), *(p.bias for p in q_proj),
               *(p.weight for p in k_proj), *(p.bias for p in k_proj)]
    return _HKTFlashCPU.apply(upsampler, n, float_mask, is_causal, scale, chunk_bytes, lam, v, *tensors)
