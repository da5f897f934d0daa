"""Standard multi-head attention, the baseline: softmax(Q K^T / sqrt(d) + mask) V per head."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hkt.mixers.base import (AttentionInternals, TokenMixer, check_key_mask, merge_heads,
                             sdpa_mask, split_heads)
from hkt.mixers.catalog import register


@dataclass
class MHAConfig:
    """MHA's own settings (``model.mixer`` when ``model.name`` is ``mha``): none; width,
    heads, causality and dropout are the encoder's."""


@register("mha")
class MultiHeadAttention(TokenMixer):
    """Multi-head self-attention through ``scaled_dot_product_attention`` (fused kernels).

    Args:
        d_model: model width D.
        n_heads: number of heads H; head width d = D / H.
        causal: query i attends only to keys j <= i.
        dropout: dropout on the attention probabilities (training only).
        config: :class:`MHAConfig` (no settings of its own).
        bias: whether the projections have biases.
    """

    config_class = MHAConfig
    supports_internals: bool = True  # per-level queries, keys and scores for `hkt analyze`

    def build(self, config: MHAConfig, *, bias: bool = True) -> None:
        d_model = self.d_model
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self, x: Tensor, key_mask: Tensor | None = None, *, return_internals: bool = False
    ) -> Tensor | tuple[Tensor, AttentionInternals]:
        """x: (B, T, D); key_mask: (B, T) bool, True at real tokens. Returns (B, T, D)."""
        check_key_mask(key_mask, x)
        h = self.n_heads
        q, k, v = (split_heads(p(x), h) for p in (self.q_proj, self.k_proj, self.v_proj))
        attn_mask, is_causal = sdpa_mask(key_mask, self.causal, x.shape[1])
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
        )
        out = self.out_proj(merge_heads(y))
        if not return_internals:
            return out
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        b, t, _ = x.shape
        internals = AttentionInternals(
            features=[x],
            queries=[q],
            keys=[k],
            scores=[scores],
            lambdas=torch.ones(b, h, t, 1, dtype=x.dtype, device=x.device),
            level_masks=[key_mask],
        )
        return out, internals

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}"
