"""Causal depthwise-convolution token mixer: the convolution baseline, in attention's slot.

The paper states that HKT strictly subsumes single-head attention and causal convolution, so a
model whose token mixing is *only* a causal convolution belongs in the table beside MHA and HKT.
This module is that model's mixer, ConvMixer-style (Trockman & Kolter, 2022), per block:

    V = X W_V                                   (B, T, D), padded positions zeroed
    C[:, t, c] = Σ_{j=0}^{k-1} w_c[j] V[:, t-j, c] + b_c     depthwise, causal (left padding)
    Y = GELU(C) W_O

One filter of width k (``kernel_size``) per channel; position t sees only t-k+1..t. It has the
same constructor and forward signature as every attention (``hkt.attention.registry``), so the
encoder uses it through ``config/model/conv.yaml`` (``name: conv``) with nothing else changed.

It is always causal (left padding only), so it satisfies ``causal=True`` and is a valid, one-sided
mixer for ``causal=False``. ``n_heads`` is accepted for the common signature and only checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from hkt.attention.base import AttentionInternals, check_dropout, check_heads, check_key_mask
from hkt.attention.registry import register
from hkt.checks import choice, integer

ACTIVATIONS = ("gelu", "none")


@dataclass
class ConvConfig:
    """The conv mixer's own settings (``model.attention`` when ``model.name`` is ``conv``).

    Attributes:
        kernel_size: filter width k >= 1: how many past positions (self included) each sees.
        activation: ``gelu`` (ConvMixer) or ``none`` (a purely linear convolution).
    """

    kernel_size: int = 128
    activation: str = "gelu"

    def __post_init__(self) -> None:
        integer(self.kernel_size, "kernel_size", 1)
        choice(self.activation, "activation", ACTIVATIONS)


@register("conv")
class CausalConvMixer(nn.Module):
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

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        config: ConvConfig | None = None,
        *,
        bias: bool = True,
        **settings: object,
    ) -> None:
        super().__init__()
        if config is not None and settings:
            raise TypeError("give CausalConvMixer a config or its fields as keywords, not both")
        config = ConvConfig(**settings) if config is None else config  # type: ignore[arg-type]
        check_heads(d_model, n_heads)
        check_dropout(dropout)
        self.config = config
        self.d_model, self.n_heads, self.causal = d_model, n_heads, causal
        self.kernel_size, self.activation, self.dropout = config.kernel_size, config.activation, dropout
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.conv = nn.Conv1d(d_model, d_model, self.kernel_size, groups=d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

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
        h = F.pad(v.transpose(1, 2), (self.kernel_size - 1, 0))  # left only: causal
        c = self.conv(h).transpose(1, 2)
        if self.activation == "gelu":
            c = F.gelu(c)
        return self.out_proj(self.drop(c))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kernel_size={self.kernel_size}, activation={self.activation}"
