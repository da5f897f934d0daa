"""What every token mixer shares: argument checks, masks, and the record of an attention's
internals (what ``return_internals=True`` gives, for analysis)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class AttentionInternals:
    """Per-level quantities of one forward pass, for analysis (never built on the normal path).

    Lists have one entry per level l = 0..L-1 (one entry for MHA). Coarse tensors are cropped to
    the level's length for the unpadded input, T_l = ceil(T / s^l).
    """

    features: list[Tensor]  # X^(l): (B, T_l, D), the level's input to its Q/K projections
    queries: list[Tensor]  # Q^(l): (B, H, T_l, d)
    keys: list[Tensor]  # K^(l): (B, H, T_l, d)
    scores: list[Tensor]  # S^(l) = Q^(l) K^(l)^T / sqrt(d): (B, H, T_l, T_l), before upsampling
    lambdas: Tensor  # fusion weights λ: (B, H, T, L), non-negative, summing to 1 over L
    level_masks: list[Tensor | None] = field(default_factory=list)  # (B, T_l) real positions


def cpu_float(x: Tensor) -> bool:
    """A CPU tensor of float32/64 outside autocast: where our CPU-only kernels (HKT's blockwise
    attention, the conv mixer's filter gradient) replace PyTorch's generic path."""
    return (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            and not torch.is_autocast_enabled("cpu"))


def check_heads(d_model: int, n_heads: int) -> int:
    """Return the head width d = d_model / n_heads, or raise a ValueError saying why not."""
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    if d_model < 1 or d_model % n_heads != 0:
        raise ValueError(
            f"d_model ({d_model}) must be a positive multiple of n_heads ({n_heads}): "
            "each head gets d_model / n_heads channels"
        )
    return d_model // n_heads


def check_dropout(dropout: float, name: str = "dropout") -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {dropout}")


def check_key_mask(key_mask: Tensor | None, x: Tensor) -> None:
    """The key mask is boolean (B, T), True at real tokens."""
    if key_mask is None:
        return
    if key_mask.dtype != torch.bool:
        raise ValueError(f"key_mask must be a bool tensor (True = real token), got {key_mask.dtype}")
    if key_mask.shape != x.shape[:2]:
        raise ValueError(
            f"key_mask must have shape (batch, seq_len) = {tuple(x.shape[:2])}, "
            f"got {tuple(key_mask.shape)}"
        )


def sdpa_mask(key_mask: Tensor | None, causal: bool, seq_len: int) -> tuple[Tensor | None, bool]:
    """The (attn_mask, is_causal) pair for scaled_dot_product_attention.

    Without a key mask, causal attention uses the kernels' own ``is_causal`` path (no T×T mask).
    With one, the key mask broadcasts over queries as (B, 1, 1, T); in causal mode it is combined
    with the lower triangle.
    """
    if key_mask is None:
        return None, causal
    mask = key_mask[:, None, None, :]
    if causal:
        tri = torch.ones(seq_len, seq_len, dtype=torch.bool, device=key_mask.device).tril()
        mask = mask & tri
    return mask, False


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, D/H)."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, d) -> (B, T, H*d)."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)
