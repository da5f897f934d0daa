"""The 1-D upsampling matrices U_l of HKT (docs/design.md §2), applied along time.

U_l ∈ R^{T×T_l} maps level l's T_l = T_pad / s^l positions to the T tokens: nearest
(U[i, ⌊i/s^l⌋] = 1) or linear interpolation (``F.interpolate``, ``align_corners=False``).
Besides U_l z, the fused CPU kernel needs U_l z scaled per token and written into a slice of a
wider tensor, the adjoint U_lᵀ g written into a (strided) gradient buffer, and Σ_d g ⊙ U_l z;
for nearest upsampling these run as broadcasts over a (blocks, s^l) view, without
materialising U_l z.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class Upsampler:
    """U_l for one sequence geometry: ``mode`` nearest|linear, ``stride`` s, T tokens, T_pad grid."""

    def __init__(self, mode: str, stride: int, t: int, t_pad: int) -> None:
        self.mode, self.stride, self.t, self.t_pad = mode, stride, t, t_pad

    def factor(self, level: int) -> int:
        return self.stride**level

    # ------------------------------------------------------------------ U_l z
    def up(self, z: Tensor, level: int) -> Tensor:
        """U_l z: (B, H, T_l, d) -> (B, H, T, d)."""
        t = self.t
        if level == 0:
            return z[:, :, :t]
        if self.mode == "nearest":
            return z.repeat_interleave(self.factor(level), dim=2)[:, :, :t]
        b, h, t_l, d = z.shape
        flat = z.permute(0, 1, 3, 2).reshape(b * h, d, t_l)
        up = F.interpolate(flat, size=self.t_pad, mode="linear", align_corners=False)
        return up[:, :, :t].reshape(b, h, d, t).permute(0, 1, 3, 2)

    def _blocks(self, level: int) -> tuple[int, int]:
        """(f, number of whole blocks of f tokens within T)."""
        f = self.factor(level)
        return f, self.t // f

    def up_into(self, dest: Tensor, z: Tensor, level: int, weight: Tensor | None = None) -> None:
        """dest[...] = weight ⊙ U_l z, with dest (B, H, T, d) (may be a strided slice) and
        weight broadcastable to (B, H, T, 1)."""
        if level == 0 or self.mode != "nearest":
            u = self.up(z, level)
            if weight is None:
                dest.copy_(u)
            else:
                torch.mul(u, weight, out=dest)
            return
        f, n = self._blocks(level)
        b, h = dest.shape[:2]
        d = dest.shape[-1]
        whole = dest[:, :, : n * f].unflatten(2, (n, f))
        src = z[:, :, :n, None, :]
        if weight is None:
            whole.copy_(src.expand_as(whole))
        elif weight.shape[2] == 1:  # one weight for every token (static fusion)
            torch.mul(src.expand_as(whole), weight[:, :, :, None], out=whole)
        else:
            torch.mul(src, weight[:, :, : n * f].unflatten(2, (n, f)), out=whole)
        if n * f < self.t:  # the last, partial block
            tail = z[:, :, n : n + 1]
            w = None if weight is None else (weight if weight.shape[2] == 1 else weight[:, :, n * f :])
            dest[:, :, n * f :].copy_((tail if w is None else tail * w).expand(b, h, self.t - n * f, d))

    # ------------------------------------------------------------------ U_lᵀ g
    def adjoint_into(self, dest: Tensor, g: Tensor, level: int, weight: Tensor | None = None) -> None:
        """dest[...] = U_lᵀ (weight ⊙ g), with dest (B, H, T_l, d) (may be a strided view) and
        weight broadcastable to (B, H, T, 1). Grid positions no token maps to get zeros."""
        if level == 0:
            if weight is None:
                dest[:, :, : self.t].copy_(g)
            else:
                torch.mul(g, weight, out=dest[:, :, : self.t])
            dest[:, :, self.t :].zero_()
            return
        if weight is not None and (self.mode != "nearest" or weight.shape[2] == 1):
            g = g * weight
            weight = None
        if self.mode != "nearest":
            with torch.enable_grad():
                z = g.new_zeros(dest.shape, requires_grad=True)
                (grad,) = torch.autograd.grad(self.up(z, level), z, g)
            dest.copy_(grad)
            return
        f, n = self._blocks(level)
        whole = g[:, :, : n * f].unflatten(2, (n, f))
        if weight is not None:
            whole = whole * weight[:, :, : n * f].unflatten(2, (n, f))
        torch.sum(whole, 3, out=dest[:, :, :n])
        if n * f < self.t:
            tail = g[:, :, n * f :]
            if weight is not None:
                tail = tail * weight[:, :, n * f :]
            dest[:, :, n].copy_(tail.sum(2))
            n += 1
        dest[:, :, n:].zero_()

    # ------------------------------------------------------------------ Σ_d g ⊙ U_l z
    def dot(self, g: Tensor, z: Tensor, level: int) -> Tensor:
        """Σ_d g ⊙ U_l z per token: g (B, H, T, d), z (B, H, T_l, d) -> (B, H, T, 1)."""
        if level == 0 or self.mode != "nearest":
            return torch.linalg.vecdot(g, self.up(z, level)).unsqueeze(-1)
        f, n = self._blocks(level)
        out = g.new_empty(g.shape[0], g.shape[1], self.t, 1)
        whole = g[:, :, : n * f].unflatten(2, (n, f))
        out[:, :, : n * f] = (whole * z[:, :, :n, None, :]).sum(-1, keepdim=True).flatten(2, 3)
        if n * f < self.t:
            out[:, :, n * f :] = (g[:, :, n * f :] * z[:, :, n : n + 1]).sum(-1, keepdim=True)
        return out
