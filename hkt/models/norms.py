"""The encoder's normalisation layers: LayerNorm, or BatchNorm whose statistics leave padding out.

S4's LRA models normalise with BatchNorm after each residual block (``norm: batch``). Over a
padded batch, a plain ``nn.BatchNorm1d`` would count the padded positions in its batch mean and
variance (and in its running statistics), so a real token's output would depend on how much
padding its batch carries. :class:`MaskedBatchNorm` takes its statistics over the real positions
only: with a mask, it is ``nn.BatchNorm1d`` applied to the real tokens of the batch gathered into
one (N, D) batch, and padded positions come out as zeros.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

NORMS = ("layer", "batch")


class MaskedBatchNorm(nn.BatchNorm1d):
    """BatchNorm over the D channels of (B, T, D) sequences, statistics over real positions.

    In training it normalises by the mean and (biased) variance of the real positions of the
    batch and updates its running statistics with them, as ``nn.BatchNorm1d`` does; in eval
    mode it uses the running statistics, so each sequence's output depends on it alone.
    Without a mask every position counts (exactly ``nn.BatchNorm1d``).
    """

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:  # type: ignore[override]
        """x: (B, T, D); mask: (B, T) bool, True at real tokens. Returns (B, T, D), zeros at
        padded positions."""
        b, t, d = x.shape
        if mask is None:
            return super().forward(x.reshape(b * t, d)).reshape(b, t, d)
        real = super().forward(x[mask])  # (N, D): the real tokens only
        out = torch.zeros(b, t, d, dtype=real.dtype, device=x.device)
        out[mask] = real
        return out


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` with the norms' one signature, ``norm(x, mask)``: a LayerNorm is per
    position, so the padding mask changes nothing (same parameters and state_dict keys)."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:  # type: ignore[override]
        return super().forward(x)


def make_norm(kind: str, d_model: int, eps: float) -> nn.Module:
    """The norm of kind ``layer`` (:class:`LayerNorm`) or ``batch`` (:class:`MaskedBatchNorm`),
    each called as ``norm(x, mask)``."""
    if kind == "layer":
        return LayerNorm(d_model, eps=eps)
    if kind == "batch":
        return MaskedBatchNorm(d_model, eps=eps)
    raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}")
