"""HKT's factorised attention on PyTorch's CPU flash kernel, chunked and memory-lean.

Plain autograd through ``scaled_dot_product_attention`` keeps the widened inputs q̃, k̃ (width
L·d) and the zero-padded V and output (the CPU kernel wants equal widths) alive for backward:
about 3× the attention memory of MHA for L = 3. This function instead

* saves only the narrow tensors (coarse per-level Q^(l), K^(l), λ, V, the output and the
  log-sum-exp) and rebuilds q̃, k̃ in backward (cheap: repeats and concatenations);
* runs the kernel over blocks of (sequences, heads), so the widened tensors exist for one
  block at a time, within a byte budget (``chunk_mib`` of HKTAttention).

Forward and backward call the same aten kernels that ``scaled_dot_product_attention`` uses on
CPU (``_scaled_dot_product_flash_attention_for_cpu`` and its backward), so results match the
plain path to rounding. Other devices, dropout and autocast take the plain path.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
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


def _chunks(v: Tensor, n_levels: int, chunk_bytes: float) -> list[tuple[slice, slice]]:
    """Blocks of whole sequences (all heads) whose widened tensors fit in ``chunk_bytes``.

    Never fewer than one sequence per block: splitting heads too was measured slower, since
    the CPU kernel then has too little parallel work per call.
    """
    b, h, t, d = v.shape
    per_row = _WIDE_TENSORS_PER_CHUNK * h * t * n_levels * d * v.element_size()
    rows = max(1, int(chunk_bytes // per_row))
    return [(slice(i, min(i + rows, b)), slice(None)) for i in range(0, b, rows)]


def _take(t: Tensor, block: tuple[slice, slice]) -> Tensor:
    """Index a (B, H, …) tensor by a block, leaving broadcast (size-1) axes alone."""
    rows, heads = block
    return t[rows if t.shape[0] != 1 else slice(None), heads if t.shape[1] != 1 else slice(None)]


class _HKTFlashCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ups, mask, is_causal, scale, chunk_bytes, lam, v, *coarse):  # type: ignore[override]
        n_levels = len(coarse) // 2
        queries, keys = coarse[:n_levels], coarse[n_levels:]
        d = v.shape[-1]
        out = torch.empty_like(v)
        lse = v.new_empty(v.shape[:3])
        blocks = _chunks(v, n_levels, chunk_bytes)
        for block in blocks:
            q_tilde, k_tilde = _widen(ups, queries, keys, _take(lam, block), block)
            o, lse_block = _FORWARD(
                q_tilde, k_tilde, _pad(v[block], n_levels), 0.0, is_causal,
                attn_mask=None if mask is None else _take(mask, block), scale=scale,
            )
            out[block] = o[..., :d]
            lse[block] = lse_block
            del q_tilde, k_tilde, o
        ctx.ups, ctx.is_causal, ctx.scale, ctx.n_levels, ctx.blocks = ups, is_causal, scale, n_levels, blocks
        ctx.save_for_backward(mask, lam, v, out, lse, *coarse)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        mask, lam, v, out, lse, *coarse = ctx.saved_tensors
        n_levels, ups = ctx.n_levels, ctx.ups
        queries, keys = coarse[:n_levels], coarse[n_levels:]
        d = v.shape[-1]
        grad_v = torch.empty_like(v)
        grad_q = [torch.empty_like(q) for q in queries]
        grad_k = [torch.empty_like(k) for k in keys]
        grad_lam = torch.empty(v.shape[:3] + (n_levels,), dtype=v.dtype, device=v.device)
        for block in ctx.blocks:
            lam_block = _take(lam, block)
            q_tilde, k_tilde = _widen(ups, queries, keys, lam_block, block)
            g_q, g_k, g_v = _BACKWARD(
                _pad(grad_out[block], n_levels), q_tilde, k_tilde, _pad(v[block], n_levels),
                _pad(out[block], n_levels), lse[block], 0.0, ctx.is_causal,
                attn_mask=None if mask is None else _take(mask, block), scale=ctx.scale,
            )
            del q_tilde, k_tilde
            grad_v[block] = g_v[..., :d]
            for l in range(n_levels):
                g_level = g_q[..., l * d : (l + 1) * d]
                q_block, k_block = _take(queries[l], block), _take(keys[l], block)
                grad_lam[block][..., l : l + 1] = ups.dot(g_level, q_block, l)
                grad_q[l][block] = ups.adjoint(g_level, l, q_block.shape[2], lam_block[..., l : l + 1])
                grad_k[l][block] = ups.adjoint(g_k[..., l * d : (l + 1) * d], l, k_block.shape[2])
            del g_q, g_k, g_v
        grad_lam = grad_lam.sum_to_size(lam.shape)
        return (None, None, None, None, None, grad_lam, grad_v, *grad_q, *grad_k)


def _pad(x: Tensor, n_levels: int) -> Tensor:
    """x (…, d) with zero columns appended to width L·d (the CPU kernel wants equal widths)."""
    d = x.shape[-1]
    wide = x.new_empty(x.shape[:-1] + (n_levels * d,))
    wide[..., :d] = x
    wide[..., d:] = 0
    return wide


def _widen(
    ups: Upsampler, queries: Sequence[Tensor], keys: Sequence[Tensor], lam: Tensor, block: tuple[slice, slice]
) -> tuple[Tensor, Tensor]:
    """q̃ = [λ_l U_l Q^(l)]_l and k̃ = [U_l K^(l)]_l (width L·d) for one block, built in place."""
    n_levels = len(queries)
    q0 = _take(queries[0], block)
    b, h, _, d = q0.shape
    q_tilde = q0.new_empty(b, h, ups.t, n_levels * d)
    k_tilde = q0.new_empty(b, h, ups.t, n_levels * d)
    for l in range(n_levels):
        cols = slice(l * d, (l + 1) * d)
        ups.up_into(q_tilde[..., cols], _take(queries[l], block), l, lam[..., l : l + 1])
        ups.up_into(k_tilde[..., cols], _take(keys[l], block), l)
    return q_tilde, k_tilde


def hkt_flash_cpu(
    queries: Sequence[Tensor],
    keys: Sequence[Tensor],
    lam: Tensor,
    v: Tensor,
    *,
    upsampler: Upsampler,
    mask: Tensor | None,
    is_causal: bool,
    scale: float,
    chunk_bytes: float,
) -> Tensor:
    """softmax(q̃ k̃^T · scale + mask) V for coarse per-level Q/K (B, H, T_l, d), λ broadcastable to
    (B, H, T, L), V (B, H, T, d). ``mask`` is a boolean (B or 1, 1, 1 or T, T) attention mask
    (True = attend) or None. ``chunk_bytes`` bounds the widened tensors alive at once."""
    float_mask = None
    if mask is not None:
        float_mask = torch.zeros(mask.shape, dtype=v.dtype, device=v.device).masked_fill_(~mask, float("-inf"))
    return _HKTFlashCPU.apply(upsampler, float_mask, is_causal, scale, chunk_bytes, lam, v, *queries, *keys)
