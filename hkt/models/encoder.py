"""Encoder classifier for sequence classification: embed, pre-norm blocks, pool, classify.

The attention is chosen by registry name, so MHA, HKT and any registered baseline share every
other part of the model and differ only where the paper says they differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hkt.attention import build_attention

POSITIONALS = ("learned", "sinusoidal")
POOLINGS = ("mean", "cls")


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """The fixed sin/cos position table of Vaswani et al. (2017): (length, d_model)."""
    position = torch.arange(length, dtype=torch.float64)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: d_model // 2])
    return table.float()


class FeedForward(nn.Module):
    """Position-wise MLP: Linear -> GELU -> Dropout -> Linear."""

    def __init__(self, d_model: int, d_ffn: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ffn)
        self.fc2 = nn.Linear(d_ffn, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.gelu(self.fc1(x))))


class EncoderBlock(nn.Module):
    """Pre-norm block: x + Attn(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, attention: nn.Module, d_model: int, d_ffn: int, dropout: float, norm_eps: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        self.attn = attention
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps)
        self.ffn = FeedForward(d_model, d_ffn, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, key_mask: Tensor | None) -> Tensor:
        x = x + self.dropout(self.attn(self.norm1(x), key_mask))
        return x + self.dropout(self.ffn(self.norm2(x)))


class EncoderClassifier(nn.Module):
    """Token embedding + positions -> N pre-norm blocks -> final LayerNorm -> pooling -> head.

    Args:
        attention: registry name of the attention (``mha``, ``hkt``, …).
        vocab_size: number of token ids, including padding id 0.
        num_classes: output classes.
        max_length: longest sequence the positional encoding supports.
        d_model, n_layers, n_heads, d_ffn: widths and depth.
        dropout: residual/FFN dropout; attn_dropout: on attention probabilities;
        emb_dropout: after embedding + positions.
        positional: ``learned`` or ``sinusoidal``.
        pooling: ``mean`` over real tokens, or ``cls`` (a learned token prepended).
        causal: causal attention in every block.
        attention_kwargs: the attention's own arguments (HKT: levels, stride, …).
    """

    def __init__(
        self,
        attention: str,
        vocab_size: int,
        num_classes: int,
        max_length: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        d_ffn: int,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        emb_dropout: float = 0.0,
        positional: str = "learned",
        pooling: str = "mean",
        causal: bool = False,
        norm_eps: float = 1e-5,
        attention_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("num_classes", num_classes),
                            ("max_length", max_length), ("n_layers", n_layers), ("d_ffn", d_ffn)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        if positional not in POSITIONALS:
            raise ValueError(f"positional must be one of {POSITIONALS}, got {positional!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        for name, value in (("dropout", dropout), ("emb_dropout", emb_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value}")
        self.pooling, self.max_length = pooling, max_length
        # No padding_idx: padded positions are masked out of attention and pooling, so they get
        # no gradient anyway, and for CIFAR-10 id 0 is a real pixel value that must learn.
        self.embed = nn.Embedding(vocab_size, d_model)
        n_positions = max_length + (1 if pooling == "cls" else 0)
        if positional == "learned":
            self.pos = nn.Parameter(torch.zeros(n_positions, d_model))
            nn.init.normal_(self.pos, std=0.02)
        else:
            self.register_buffer("pos", sinusoidal_table(n_positions, d_model), persistent=False)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model)) if pooling == "cls" else None
        self.emb_dropout = nn.Dropout(emb_dropout)
        kwargs = dict(attention_kwargs or {})
        self.blocks = nn.ModuleList(
            EncoderBlock(
                build_attention(attention, d_model=d_model, n_heads=n_heads, causal=causal,
                                dropout=attn_dropout, **kwargs),
                d_model, d_ffn, dropout, norm_eps,
            )
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        """tokens: (B, T) int ids; mask: (B, T) bool, True at real tokens. Returns (B, C) logits."""
        b, t = tokens.shape
        if t > self.max_length:
            raise ValueError(f"sequence length {t} exceeds max_length {self.max_length}")
        x = self.embed(tokens)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(b, 1, -1).to(x.dtype), x], dim=1)
            if mask is not None:
                mask = F.pad(mask, (1, 0), value=True)
        x = self.emb_dropout(x + self.pos[: x.shape[1]].to(x.dtype))
        for block in self.blocks:
            x = block(x, mask)
        x = self.norm(x)
        if self.cls is not None:
            pooled = x[:, 0]
        elif mask is None:
            pooled = x.mean(dim=1)
        else:
            weights = mask.to(x.dtype).unsqueeze(-1)
            pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
        return self.head(pooled)

    def attention_modules(self) -> list[nn.Module]:
        """The attention module of each block, in order (for analysis)."""
        return [block.attn for block in self.blocks]


def build_model(
    model_cfg: Mapping[str, Any], *, vocab_size: int, num_classes: int, max_length: int
) -> EncoderClassifier:
    """Build the classifier described by a ``config/model/*.yaml`` mapping."""
    cfg = dict(model_cfg)
    attention_kwargs = dict(cfg.get("attention") or {})
    return EncoderClassifier(
        attention=cfg["name"],
        vocab_size=vocab_size,
        num_classes=num_classes,
        max_length=max_length,
        d_model=cfg["d_model"],
        n_layers=cfg["n_layers"],
        n_heads=cfg["n_heads"],
        d_ffn=cfg["d_ffn"],
        dropout=cfg.get("dropout", 0.0),
        attn_dropout=cfg.get("attn_dropout", 0.0),
        emb_dropout=cfg.get("emb_dropout", 0.0),
        positional=cfg.get("positional", "learned"),
        pooling=cfg.get("pooling", "mean"),
        causal=cfg.get("causal", False),
        norm_eps=cfg.get("norm_eps", 1e-5),
        attention_kwargs=attention_kwargs,
    )
