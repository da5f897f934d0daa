"""HKT's factorised attention on PyTorch's CPU flash kernel, chunked and memory-lean.

Plain autograd through ``scaled_dot_product_attention`` keeps the widened inputs q̃, k̃ (width
L·d) and the zero-padded V and output (the CPU kernel wants equal widths) alive for backward:
about 3× the attention memory of MHA for L = 3. This function instead

* takes the level features X^(l) and the per-level query/key projections, and saves only
  tensors that exist anyway (X^(l) is saved by the rest of the graph too), plus λ, V, the
  output and the log-sum-exp;
* runs over blocks of (sequences, heads), widening and attending one block at a time, so q̃
  and k̃ never exist for the whole batch at once; the byte budget is ``chunk_mib`` of
  HKTAttention;
* in backward, where memory peaks, recomputes each block's projections (a small matmul)
  instead of storing Q^(l), K^(l), and collects ∂L/∂Q^(l), ∂L/∂K^(l) per sequence so that the
  projections' gradients are a few large matmuls rather than many small ones;
* reuses one set of block buffers (q̃, k̃, the zero-padded V, output and output gradient)
  across blocks.

Forward and backward call the same aten kernels that ``scaled_dot_product_attention`` uses on
CPU (``_scaled_dot_product_flash_attention_for_cpu`` and its backward), so results match the
plain path to rounding. Other devices, dropout and autocast take the plain path.

Cost: the kernels run at width L·d with V zero-padded to it, so they do ≈ L× MHA's matmul work
(measured 2.4–2.5× MHA's kernel time at T = 2048, L = 3); the wrapper adds ≈ 0.25× of that."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from hkt.mixers.base import cpu_float, split_heads
from hkt.mixers.upsample import Upsampler

_FORWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def cpu_kernel_applies(x: Tensor, dropout_p: float) -> bool:
    """Whether ``hkt_flash_cpu`` can run: CPU tensors, float32/64, no dropout, no autocast."""
    return cpu_float(x) and dropout_p == 0.0


# Widened tensors alive per block in backward: q̃, k̃, padded V, output and its gradient, and
# the kernel's three input gradients.
_WIDE_TENSORS_PER_CHUNK = 8

Block = tuple[slice, slice]


def _chunks(v: Tensor, n_levels: int, chunk_bytes: float) -> list[Block]:
    """Blocks of (sequences, heads) whose widened tensors fit in ``chunk_bytes`` together:
    whole sequences when one fits, else equal-sized groups of heads of one sequence.

    A block never has fewer (sequence, head) slices than torch has threads: the CPU kernel's
    backward parallelises over them, so a one-head block would leave the other cores idle.
    """
    b, h, t, d = v.shape
    per_head = _WIDE_TENSORS_PER_CHUNK * t * n_levels * d * v.element_size()
    heads = max(1, int(chunk_bytes // per_head), min(h, torch.get_num_threads()))
    if heads >= h:
        rows = heads // h
        return [(slice(i, min(i + rows, b)), slice(0, h)) for i in range(0, b, rows)]
    groups = math.ceil(h / heads)
    heads = math.ceil(h / groups)  # balanced: 4 heads with room for 3 give 2 + 2, not 3 + 1
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


class _Scratch:
    """Reusable per-block buffers: blocks share shapes, so q̃, k̃ and the zero-padded inputs are
    allocated once per call instead of once per block (fresh pages cost as much as the copy).
    Padded buffers are zeroed once; only their first d columns are rewritten per block."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, Tensor] = {}

    def get(self, name: str, like: Tensor, shape: tuple[int, ...], zeroed: bool = False) -> Tensor:
        key = (name, shape)
        buf = self._buffers.get(key)
        if buf is None:
            buf = like.new_zeros(shape) if zeroed else like.new_empty(shape)
            self._buffers[key] = buf
        return buf

    def pad(self, name: str, x: Tensor, n_levels: int) -> Tensor:
        """x (…, d) in the first d columns of a zero buffer of width L·d (the CPU kernel wants
        equal query and value widths; zero columns of V give zero output columns)."""
        d = x.shape[-1]
        wide = self.get(name, x, x.shape[:-1] + (n_levels * d,), zeroed=True)
        wide[..., :d].copy_(x)
        return wide

    def widen(self, ups: Upsampler, queries: Sequence[Tensor], keys: Sequence[Tensor],
              lam: Tensor) -> tuple[Tensor, Tensor]:
        """q̃ = [λ_l U_l Q^(l)]_l and k̃ = [U_l K^(l)]_l (width L·d) for one block, in place."""
        n_levels = len(queries)
        b, h, _, d = queries[0].shape
        shape = (b, h, ups.t, n_levels * d)
        q_tilde, k_tilde = self.get("q", queries[0], shape), self.get("k", queries[0], shape)
        for l in range(n_levels):
            cols = slice(l * d, (l + 1) * d)
            ups.up_into(q_tilde[..., cols], queries[l], l, lam[..., l : l + 1])
            ups.up_into(k_tilde[..., cols], keys[l], l)
        return q_tilde, k_tilde


class _HKTFlashCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ups, n_levels, mask, is_causal, scale, chunk_bytes, lam, v, *tensors):  # type: ignore[override]
        features, wq, bq, wk, bk = _split(tensors, n_levels)
        b, h, t, d = v.shape
        # The output in (B, T, H, d) memory order: merging heads for the output projection is
        # then a view rather than a copy.
        out = v.new_empty(b, t, h, d).transpose(1, 2)
        lse = v.new_empty(b, h, t)
        blocks = _chunks(v, n_levels, chunk_bytes)
        scratch = _Scratch()
        # Whole-batch projections here (a few large matmuls): memory peaks in backward, which
        # projects per block instead.
        queries = [split_heads(F.linear(x, w, bias), h) for x, w, bias in zip(features, wq, bq)]
        keys = [split_heads(F.linear(x, w, bias), h) for x, w, bias in zip(features, wk, bk)]
        for block in blocks:
            q_tilde, k_tilde = scratch.widen(ups, [q[block] for q in queries], [k[block] for k in keys],
                                             _take(lam, block))
            o, lse_block = _FORWARD(
                q_tilde, k_tilde, scratch.pad("v", v[block], n_levels), 0.0, is_causal,
                attn_mask=None if mask is None else _take(mask, block), scale=scale,
            )
            out[block] = o[..., :d]
            lse[block] = lse_block
            del o
        del queries, keys
        ctx.ups, ctx.is_causal, ctx.scale, ctx.n_levels, ctx.blocks = ups, is_causal, scale, n_levels, blocks
        ctx.save_for_backward(mask, lam, v, out, lse, *tensors)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        mask, lam, v, out, lse, *tensors = ctx.saved_tensors
        n_levels, ups = ctx.n_levels, ctx.ups
        features, wq, bq, wk, bk = _split(tensors, n_levels)
        d, n_heads = v.shape[-1], v.shape[1]
        grad_v = torch.empty_like(v)
        grad_lam = torch.empty(v.shape[:3] + (n_levels,), dtype=v.dtype, device=v.device)
        grad_x = [x.new_empty(x.shape) for x in features]  # contiguous: rows are written in place
        grad_wq, grad_wk = [torch.zeros_like(w) for w in wq], [torch.zeros_like(w) for w in wk]
        grad_bq = [None if b is None else torch.zeros_like(b) for b in bq]
        grad_bk = [None if b is None else torch.zeros_like(b) for b in bk]
        scratch = _Scratch()
        grad_q = grad_k = None
        for block in ctx.blocks:
            rows, heads = block
            if heads.start == 0:
                # ∂L/∂Q^(l), ∂L/∂K^(l) of these sequences, in the projections' (r, T_l, H·d)
                # layout: head groups write their columns; the projections' gradients follow
                # once every head of the sequences is done.
                grad_q = [x.new_empty((rows.stop - rows.start,) + x.shape[1:2] + (w.shape[0],))
                          for x, w in zip(features, wq)]
                grad_k = [torch.empty_like(g) for g in grad_q]
            lam_block = _take(lam, block)
            queries, keys = _block_qk(features, wq, bq, wk, bk, block, d)
            q_tilde, k_tilde = scratch.widen(ups, queries, keys, lam_block)
            g_q, g_k, g_v = _BACKWARD(
                scratch.pad("grad_out", grad_out[block], n_levels), q_tilde, k_tilde,
                scratch.pad("v", v[block], n_levels), scratch.pad("out", out[block], n_levels),
                lse[block], 0.0, ctx.is_causal,
                attn_mask=None if mask is None else _take(mask, block), scale=ctx.scale,
            )
            grad_v[block] = g_v[..., :d]
            local = (slice(None), heads)
            for l in range(n_levels):
                cols = slice(l * d, (l + 1) * d)
                grad_lam[block][..., l : l + 1] = ups.dot(g_q[..., cols], queries[l], l)
                ups.adjoint_into(_heads_view(grad_q[l], local, d), g_q[..., cols], l, lam_block[..., l : l + 1])
                ups.adjoint_into(_heads_view(grad_k[l], local, d), g_k[..., cols], l)
            del g_q, g_k, g_v, queries, keys
            if heads.stop == n_heads:
                for l in range(n_levels):
                    x = features[l][rows].flatten(0, 1)
                    gq, gk = grad_q[l].flatten(0, 1), grad_k[l].flatten(0, 1)
                    torch.addmm(gq @ wq[l], gk, wk[l], out=grad_x[l][rows].flatten(0, 1))
                    grad_wq[l].addmm_(gq.T, x)
                    grad_wk[l].addmm_(gk.T, x)
                    if grad_bq[l] is not None:
                        grad_bq[l] += gq.sum(0)
                    if grad_bk[l] is not None:
                        grad_bk[l] += gk.sum(0)
                grad_q = grad_k = None
        grad_lam = grad_lam.sum_to_size(lam.shape)
        return (None, None, None, None, None, None, grad_lam, grad_v,
                *grad_x, *grad_wq, *grad_bq, *grad_wk, *grad_bk)


def _heads_view(g: Tensor, block: Block, d: int) -> Tensor:
    """The (sequences, heads) block of a (B, T_l, H·d) tensor, as a (r, h, T_l, d) view."""
    rows, heads = block
    return g[rows, :, heads.start * d : heads.stop * d].unflatten(-1, (-1, d)).transpose(1, 2)


def _split(tensors: Sequence[Tensor | None], n: int) -> tuple[list, list, list, list, list]:
    """(features, W_Q, b_Q, W_K, b_K), each a list over levels, from the flat argument list."""
    return tuple(list(tensors[i * n : (i + 1) * n]) for i in range(5))  # type: ignore[return-value]


def _block_qk(features, wq, bq, wk, bk, block: Block, d: int) -> tuple[list[Tensor], list[Tensor]]:
    """Q^(l), K^(l) of one block's sequences and heads, every level: (r, h, T_l, d)."""
    rows, heads = block
    queries = [_project(x[rows], w, b, heads, d) for x, w, b in zip(features, wq, bq)]
    keys = [_project(x[rows], w, b, heads, d) for x, w, b in zip(features, wk, bk)]
    return queries, keys


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
