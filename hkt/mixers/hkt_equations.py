"""HKT attention on one page, written from the paper's equations (docs/design.md §2): a file to
read, not to train with. Every T × T matrix of the equations is built as written; the layer
used for training, :class:`hkt.mixers.hkt.HKTAttention`, computes the same function without
them, and its parameters have the same names, so its ``state_dict`` loads here
(tests/test_hkt_equations.py holds the two equal). No padding mask, no dropout.

    X⁽⁰⁾ = X,   X⁽ˡ⁾ = GELU(LayerNorm(DWConv_l(X⁽ˡ⁻¹⁾)))      the pyramid, l = 1 … L−1
    S⁽ˡ⁾ = Q⁽ˡ⁾ K⁽ˡ⁾ᵀ / √d,   Q⁽ˡ⁾ = X⁽ˡ⁾ W_Q⁽ˡ⁾,  K⁽ˡ⁾ = X⁽ˡ⁾ W_K⁽ˡ⁾   scores, per level and head
    Ŝ⁽ˡ⁾ = U_l S⁽ˡ⁾ U_lᵀ,   U_l[i, ⌊i / sˡ⌋] = 1               nearest upsampling to T × T
    S = Σ_l λ_l ⊙ Ŝ⁽ˡ⁾,   λ = softmax(w) (static) or softmax_l(G x_i + b) (dynamic)
    Y = softmax(S + mask) X W_V,   then the output projection W_O
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["HKTFromEquations"]


class PyramidStep(nn.Module):
    """X⁽ˡ⁾ = GELU(LayerNorm(DWConv_l(X⁽ˡ⁻¹⁾))): depthwise, stride s, kernel k ≥ s, padded on
    the left only, so that coarse position p sees the inputs at positions ≤ p·s."""

    def __init__(self, d_model: int, stride: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d_model, d_model, kernel_size, stride=stride, groups=d_model)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor) -> Tensor:  # (B, T_l, D) -> (B, T_l / s, D)
        left = F.pad(x.transpose(1, 2), (self.conv.kernel_size[0] - 1, 0))
        return F.gelu(self.norm(self.conv(left).transpose(1, 2)))


class HKTFromEquations(nn.Module):
    """HKT attention, T × T scores and all: ``levels`` L, ``stride`` s, ``fusion`` static or
    dynamic, ``causal`` (nearest upsampling keeps it: U_l never moves a key before a query)."""

    def __init__(self, d_model: int, n_heads: int, *, levels: int = 3, stride: int = 2,
                 kernel_size: int = 2, fusion: str = "dynamic", causal: bool = False) -> None:
        super().__init__()
        self.n_heads, self.levels, self.stride, self.causal = n_heads, levels, stride, causal
        linear = lambda: nn.Linear(d_model, d_model)  # noqa: E731  (W_Q⁽ˡ⁾, W_K⁽ˡ⁾, W_V, W_O)
        self.q_proj = nn.ModuleList(linear() for _ in range(levels))
        self.k_proj = nn.ModuleList(linear() for _ in range(levels))
        self.v_proj, self.out_proj = linear(), linear()
        self.pyramid = nn.ModuleList(PyramidStep(d_model, stride, kernel_size)
                                     for _ in range(levels - 1))
        if levels > 1 and fusion == "static":  # w: one logit per head and level
            self.fusion = nn.ParameterDict({"logits": nn.Parameter(torch.zeros(n_heads, levels))})
        elif levels > 1:  # G, b: logits per head and level from each token x_i
            self.fusion = nn.ModuleDict({"gate": nn.Linear(d_model, n_heads * levels)})

    def fusion_weights(self, x: Tensor) -> Tensor:
        """λ, convex over levels: (1, H, 1, L) static, (B, H, T, L) dynamic."""
        b, t, _ = x.shape
        if self.levels == 1:
            return x.new_ones(1, self.n_heads, 1, 1)
        if "logits" in self.fusion:
            return torch.softmax(self.fusion["logits"][None, :, None, :], dim=-1)
        logits = self.fusion["gate"](x).view(b, t, self.n_heads, self.levels).transpose(1, 2)
        return torch.softmax(logits, dim=-1)

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, T, D) -> (B, T, D)."""
        b, t, d_model = x.shape
        s, h, d = self.stride, self.n_heads, d_model // self.n_heads
        # T padded with zeros to whole positions of the coarsest level; the convolutions look
        # left only, so the zeros past T never reach a position that U_l maps a token to
        block = s ** (self.levels - 1)
        features = [F.pad(x, (0, 0, 0, -(-t // block) * block - t))]  # X⁽⁰⁾
        for step in self.pyramid:
            features.append(step(features[-1]))  # X⁽ˡ⁾, T_l = T_pad / sˡ positions

        def heads(z: Tensor) -> Tensor:  # (B, T, D) -> (B, H, T, d)
            return z.view(b, -1, h, d).transpose(1, 2)

        lam = self.fusion_weights(x)
        scores = x.new_zeros(b, h, t, t)  # S
        for l, x_l in enumerate(features):
            q, k = heads(self.q_proj[l](x_l)), heads(self.k_proj[l](x_l))
            s_l = q @ k.transpose(-1, -2) / math.sqrt(d)  # S⁽ˡ⁾: (B, H, T_l, T_l)
            rows, cols = (torch.arange(n, device=x.device) for n in (t, x_l.shape[1]))
            u = (rows[:, None] // s**l == cols[None, :]).to(x)  # U_l: T × T_l
            scores = scores + lam[..., l:l + 1] * (u @ s_l @ u.T)  # λ_l ⊙ Ŝ⁽ˡ⁾
        if self.causal:  # query i sees keys j ≤ i
            scores = scores.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf"))
        y = torch.softmax(scores, dim=-1) @ heads(self.v_proj(x))  # (B, H, T, d)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, d_model))
