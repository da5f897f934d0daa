"""Causal depthwise-convolution token mixer: the convolution baseline, in the mixer's slot.

The paper states that HKT strictly subsumes single-head attention and causal convolution, so a
model whose token mixing is *only* a causal convolution belongs in the table beside MHA and HKT.
This module is that model's mixer, ConvMixer-style (Trockman & Kolter, 2022), per block:

    V = X W_V                                   (B, T, D), padded positions zeroed
    C[:, t, c] = Σ_{j=0}^{k-1} w_c[j] V[:, t-j, c] + b_c     depthwise, causal (left padding)
    Y = GELU(C) W_O

One filter of width k (``kernel_size``) per channel; position t sees only t-k+1..t. It has the
same constructor and forward signature as every mixer (``hkt.mixers.catalog``), so the
encoder uses it through ``config/model/conv.yaml`` (``name: conv``) with nothing else changed.

It is always causal (left padding only), so it satisfies ``causal=True`` and is a valid, one-sided
mixer for ``causal=False``. ``n_heads`` is accepted for the common signature and only checked.

Speed on CPU: PyTorch's depthwise ``conv1d`` is fast forward, but its filter gradient is not
(k = 128, 64 channels, batch 32, one thread: 61 ms a layer at T = 320 against 3 ms for the
forward; 236 ms at T = 1024). On CPU the filter gradient is computed by
:func:`depthwise_filter_grad` instead, as one batched matmul (21 and 41 ms); the forward and the
input gradient are PyTorch's own. A conv model's training step: 297 -> 167 ms at T = 320
(``hkt bench train --models conv --seq-len 320 --threads 1``). Same numbers to rounding
(``tests/test_baselines_conv.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hkt.mixers.base import AttentionInternals, TokenMixer, check_key_mask, cpu_float
from hkt.mixers.catalog import register
from hkt.value_checks import choice, integer
from hkt.dropout import Dropout

ACTIVATIONS = ("gelu", "none")


@dataclass
class ConvConfig:
    """The conv mixer's own settings (``model.mixer`` when ``model.name`` is ``conv``).

    Attributes:
        kernel_size: filter width k >= 1: how many past positions (self included) each sees.
        activation: ``gelu`` (ConvMixer) or ``none`` (a purely linear convolution).
    """

    kernel_size: int = 128
    activation: str = "gelu"

    def __post_init__(self) -> None:
        integer(self.kernel_size, "kernel_size", 1)
        choice(self.activation, "activation", ACTIVATIONS)


def depthwise_filter_grad(h: Tensor, grad: Tensor, kernel_size: int) -> Tensor:
    """∂L/∂w of the depthwise convolution ``conv1d(h, w, groups=C)`` (stride 1, no padding):
    ``dw[c, 0, j] = Σ_b Σ_t grad[b, c, t] h[b, c, t + j]``.

    Blocks of k output positions: block i of ``grad`` meets ``h[i k : i k + 2k]`` only, so with
    ``M_c = Σ_{b,i} G_{b,c,i}ᵀ H_{b,c,i}`` (k × 2k, one batched matmul over channels)
    ``dw[c, j] = Σ_r M_c[r, r + j]``, a sum along diagonals. Twice the multiply-adds of a direct
    correlation, at matmul speed. h: (B, C, T + k - 1); grad: (B, C, T). Returns (C, 1, k).
    """
    b, c, t = grad.shape
    k = kernel_size
    blocks = -(-t // k)
    g = F.pad(grad, (0, blocks * k - t)).view(b, c, blocks, k)
    g = g.permute(1, 3, 0, 2).reshape(c, k, b * blocks)
    windows = F.pad(h, (0, (blocks + 1) * k - h.shape[-1])).unfold(2, 2 * k, k)  # (B, C, blocks, 2k)
    windows = windows.permute(1, 0, 2, 3).reshape(c, b * blocks, 2 * k)
    m = torch.bmm(g, windows)  # (C, k, 2k)
    diagonals = m.as_strided((c, k, k), (m.stride(0), m.stride(1) + m.stride(2), m.stride(2)))
    return diagonals.sum(1).unsqueeze(1)


class _DepthwiseConv(torch.autograd.Function):
    """``conv1d(h, w, b, groups=C)`` with PyTorch's forward and input gradient and
    :func:`depthwise_filter_grad` for the filter (CPU: PyTorch's own is slow there)."""

    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(h, weight)
        return F.conv1d(h, weight, bias, groups=weight.shape[0])

    @staticmethod
    def backward(ctx, grad: Tensor):
        h, weight = ctx.saved_tensors
        grad = grad.contiguous()
        grad_h = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_h = torch.ops.aten.convolution_backward(
                grad, h, weight, None, [1], [0], [1], False, [0], weight.shape[0],
                [True, False, False])[0]
        if ctx.needs_input_grad[1]:
            grad_w = depthwise_filter_grad(h, grad, weight.shape[-1])
        if ctx.needs_input_grad[2]:  # False for a missing bias
            grad_b = grad.sum((0, 2))
        return grad_h, grad_w, grad_b


@register("conv")
class CausalConvMixer(TokenMixer):
    """Token mixing by a causal depthwise 1-D convolution per channel.

    Args:
        d_model: model width D (one filter per channel).
        n_heads: accepted for the common attention signature; must divide d_model.
        causal: accepted for the common signature; the mixer is causal either way.
        dropout: dropout on the mixer's output before the output projection (training only).
        config: the mixer's own settings (:class:`ConvConfig`); or give its fields as keywords.
        bias: whether the projections and the convolution have biases.
    """

    config_class = ConvConfig
    supports_internals: bool = False  # no queries, keys or scores: `hkt analyze` does not apply

    def build(self, config: ConvConfig, *, bias: bool = True) -> None:
        d_model = self.d_model
        #: how many positions back (self included) an output sees; None for a whole-sequence mixer
        self.receptive_field: int | None = config.kernel_size
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.conv = nn.Conv1d(d_model, d_model, config.kernel_size, groups=d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = Dropout(self.dropout)

    def forward(
        self, x: Tensor, key_mask: Tensor | None = None, *, return_internals: bool = False
    ) -> Tensor | tuple[Tensor, AttentionInternals]:
        """x: (B, T, D); key_mask: (B, T) bool, True at real tokens. Returns (B, T, D)."""
        if return_internals:
            raise NotImplementedError(
                "the conv mixer has no queries, keys, scores or fusion weights: "
                "attention internals (and `hkt analyze`) apply to attention models (mha, hkt) only")
        check_key_mask(key_mask, x)
        v = self.v_proj(x)
        if key_mask is not None:  # padding must not leak into real positions
            v = v * key_mask.unsqueeze(-1).to(v.dtype)
        h = F.pad(v.transpose(1, 2), (self.config.kernel_size - 1, 0))  # left only: causal
        if cpu_float(h):
            c = _DepthwiseConv.apply(h, self.conv.weight, self.conv.bias)
        else:
            c = self.conv(h)
        c = c.transpose(1, 2)
        if self.config.activation == "gelu":
            c = F.gelu(c)
        return self.out_proj(self.drop(c))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kernel_size={self.config.kernel_size}, activation={self.config.activation}"
