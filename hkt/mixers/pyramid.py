"""HKT's pyramid and fusion weights (docs/design.md §2, steps 1 and 4): the levels
X^(l) = GELU(LayerNorm(DWConv(X^(l-1)))) and the convex weights λ that fuse their scores.
:class:`hkt.mixers.hkt.HKTAttention` holds them (their parameter names are its state_dict's)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["PyramidLevel", "StaticFusion", "DynamicFusion"]


class PyramidLevel(nn.Module):
    """One pyramid step: X^(l) = GELU(LayerNorm(DWConv(X^(l-1)))).

    The depthwise convolution has stride s and kernel k >= s and is padded on the left only, so
    output position p sees inputs at positions <= p·s (causal). Padded positions are zeroed first
    so that the result does not depend on how much padding a batch carries.
    """

    def __init__(self, d_model: int, stride: int, kernel_size: int, norm_eps: float) -> None:
        super().__init__()
        self.stride, self.kernel_size = stride, kernel_size
        self.conv = nn.Conv1d(d_model, d_model, kernel_size, stride=stride, groups=d_model)
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """x: (B, T, D) with T a multiple of the stride -> (B, T / s, D)."""
        if mask is not None:
            x = x * mask.unsqueeze(-1).to(x.dtype)
        return F.gelu(self.norm(self._conv(x)))

    def _conv(self, x: Tensor) -> Tensor:
        """The depthwise convolution in (B, T, D) layout: Σ_r w_r ⊙ x[p·s − (k−1) + r] + b.

        The same map as ``self.conv`` on the left-padded, channels-first input, as k strided
        multiply-adds: for kernels this small it is faster than the convolution routine, which
        needs two transposed copies around it.
        """
        k, s = self.kernel_size, self.stride
        n = x.shape[1] // s
        xp = F.pad(x, (0, 0, k - 1, 0))
        w = self.conv.weight[:, 0]  # (D, k)
        y = torch.addcmul(self.conv.bias, xp[:, : (n - 1) * s + 1 : s], w[:, 0])
        for r in range(1, k):
            y = torch.addcmul(y, xp[:, r : r + (n - 1) * s + 1 : s], w[:, r])
        return y


class StaticFusion(nn.Module):
    """λ = softmax(w) per head: one convex combination of the levels for every token."""

    def __init__(self, n_heads: int, levels: int) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(n_heads, levels))

    def forward(self, x: Tensor) -> Tensor:
        """Fusion logits broadcastable to (B, H, T, L): here (1, H, 1, L)."""
        return self.logits[None, :, None, :]


class DynamicFusion(nn.Module):
    """λ_l(i) = softmax_l(G x_i + b) per head and query token i (the paper's "for each token")."""

    def __init__(self, d_model: int, n_heads: int, levels: int) -> None:
        super().__init__()
        self.n_heads, self.levels = n_heads, levels
        self.gate = nn.Linear(d_model, n_heads * levels)
        # Start from uniform λ: every level contributes equally until training says otherwise.
        nn.init.zeros_(self.gate.weight)
        nn.init.zeros_(self.gate.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Fusion logits (B, H, T, L)."""
        b, t, _ = x.shape
        return self.gate(x).view(b, t, self.n_heads, self.levels).transpose(1, 2)
