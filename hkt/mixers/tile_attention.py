"""HKT attention as one tile kernel (``impl="tile"``): each level scored at its own resolution.

With nearest upsampling, Ŝ^(l)[i, j] = S^(l)[⌊i/f⌋, ⌊j/f⌋] for f = s^l, so on a tile of BM query
rows × BN key columns (BM, BN, f powers of two, tiles aligned to multiples of their size) level
l's scores are those of a coarse tile of CM = max(BM/f, 1) rows × CN = max(BN/f, 1) columns:
``Q^(l)[⌊m0/f⌋ …] K^(l)[⌊n0/f⌋ …]ᵀ``, one (CM × d) @ (d × CN) product, which the kernel
repeats over the fine positions in registers and weights by λ_l(i) (per query row, so after the
broadcast). Level 0 is the usual (BM × d) @ (d × BN) product. Then flash attention: one online
softmax over S = Σ_l λ_l Ŝ^(l) with the key and causal masks, O = P V, and the log-sum-exp kept
for backward. Backward recomputes P per tile (one kernel per query tile for ∂Q^(l) and ∂λ, one
per key tile for ∂K^(l) and ∂V); a coarse gradient is the adjoint of the broadcast, a sum over
each coarse block of λ_l ⊙ ∂S, times the coarse keys or queries. Nothing T × T is stored,
forward or backward: memory is O(T) (the per-level inputs, O, the log-sum-exp and float32
partial gradients of Q^(l), K^(l)).

It computes the materialised path's function (``impl="materialised"``) exactly (to rounding):
the same scores Σ_l λ_l U_l S^(l) U_lᵀ, masks and softmax; only the order of the sums differs
(tests/test_tile.py). A query that sees no key at all (a sequence without one real token) gets
output 0 where the materialised path's softmax gives NaN.

Work per query tile (QK products, multiply-adds, T keys, no causal mask): level 0 BM·T·d, as
MHA; level l max(BM/f, 1)·max(T/f, T/BN)·d, which is BM·T·d / f² while f <= min(BM, BN).
So the scores cost Σ_l s^(-2l) of MHA's (1.3125 for L = 3, s = 2), the paper's ratio, as long
as s^(L-1) <= the tile sizes; deeper levels are recomputed per tile (f/BM and f/BN times).
Per fine score the kernel adds L multiply-adds to apply λ. P V is MHA's. See docs/attention.md.

Limits (each refused with a clear error, by :func:`config_problem` and :func:`unavailable`):
nearest upsampling only, a power-of-two stride, at most :data:`MAX_LEVELS` levels (the kernels
unroll them), no dropout on the attention probabilities, and Triton with a CUDA device (or
Triton's CPU interpreter, ``TRITON_INTERPRET=1``, which the tests use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import Tensor

from hkt.value_checks import integer
from hkt.errors import ConfigValueError

MAX_LEVELS = 4  # levels the kernels unroll (hkt/mixers/kernels/tile.py)


@dataclass(frozen=True)
class TileSizes:
    """Tile sizes of the kernel: ``queries`` rows × ``keys`` columns per tile, powers of two.

    64 × 64 is flash attention's usual tile for head widths 32–64; untuned (no GPU was at
    hand). Smaller tiles make the interpreter tests cheap. A coarse level whose s^l exceeds a
    tile side is recomputed per tile (see the module docstring), so tiles of at least
    s^(L-1) keep the paper's score cost.
    """

    queries: int = 64
    keys: int = 64

    def __post_init__(self) -> None:
        for key in ("queries", "keys"):
            size = integer(getattr(self, key), f"tile.{key}", 1)
            if size & (size - 1):
                raise ConfigValueError(f"tile.{key}", size, "must be a power of two (Triton's tiles are)")


def config_problem(levels: int, stride: int, upsample: str) -> tuple[str, object, str] | None:
    """(key, value, why) of the first setting the tile kernel cannot compute, or None."""
    use_fused = "; use impl='fused' for it"
    if upsample != "nearest":
        return ("upsample", upsample, "impl='tile' computes nearest upsampling only (a coarse "
                "score covers whole blocks of the tile); use upsample='nearest', or impl='fused' "
                "for linear upsampling")
    if stride & (stride - 1):
        return ("stride", stride, "impl='tile' needs a power-of-two stride (a level's blocks "
                "must tile the power-of-two tiles)" + use_fused)
    if levels > MAX_LEVELS:
        return ("levels", levels, f"impl='tile' computes at most {MAX_LEVELS} levels (its "
                "kernels unroll them)" + use_fused)
    return None


def unavailable(x: Tensor) -> str | None:
    """Why the tile kernel cannot run on ``x`` here (what is missing, what to use instead), or
    None when it can: Triton installed, and a CUDA tensor or Triton's interpreter on."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return ("impl='tile' needs Triton, which is not installed here (pip install triton; "
                "Linux; the dev extra has it); use impl='fused'")
    if kernels().INTERPRETED or x.device.type == "cuda":
        return None
    return (f"impl='tile' runs Triton kernels on a CUDA device, and this input is on "
            f"{x.device}; use impl='fused' here (or start Python with TRITON_INTERPRET=1 to run "
            "the kernel in Triton's CPU interpreter: slow, for tests)")


def kernels() -> ModuleType:
    """The kernel module (imports Triton). Triton reads ``TRITON_INTERPRET`` when it is imported
    (its own library is decorated then, like our kernels), so interpreter or GPU is decided once
    per process: set the variable before anything imports triton."""
    from hkt.mixers.kernels import tile

    return tile


@dataclass(frozen=True)
class TileGeometry:
    """Shapes and settings of one call: levels L, stride s, heads H of width d, T real tokens
    on a grid of T_pad (a multiple of s^(L-1)), causal, and the tile sizes BM × BN."""

    levels: int
    stride: int
    heads: int
    head_dim: int
    t: int
    t_pad: int
    causal: bool
    tile_queries: int
    tile_keys: int

    def factor(self, level: int) -> int:
        return self.stride**level

    def lengths(self) -> list[int]:
        """T_l = T_pad / s^l, the rows of each level in the concatenated queries and keys."""
        return [self.t_pad // self.factor(l) for l in range(self.levels)]

    def tiles(self, block: int) -> int:
        return -(-self.t // block)

    def tile_rows(self, block: int) -> list[int]:
        """Coarse rows per tile of ``block`` fine positions, per level."""
        return [max(block // self.factor(l), 1) for l in range(self.levels)]


def _precision(x: Tensor) -> str:
    """tl.dot's input precision: float32 stays IEEE unless torch itself allows TF32 matmuls."""
    if x.dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        return "ieee"
    return "tf32"  # ignored for 16-bit inputs


def _lam_strides(lam: Tensor) -> tuple[int, int, int, int]:
    """λ's strides, 0 on its broadcast axes (static fusion: one λ for every sequence and token)."""
    sb, sh, st, sl = lam.stride()
    return (sb if lam.shape[0] > 1 else 0, sh, st if lam.shape[2] > 1 else 0, sl)


def _from_slab(slab: Tensor, block: int, geo: TileGeometry, dtype: torch.dtype) -> Tensor:
    """Per-tile partial gradients (B, H, rows, d) -> the gradient of the concatenated levels
    (B, Σ T_l, H·d): a level deeper than the tile has one partial row per tile, summed over
    the f / block tiles of its coarse position; rows beyond T_l (tile overhang) are dropped."""
    b, h, _, d = slab.shape
    n_tiles, out, first = geo.tiles(block), [], 0
    for level, (rows, length) in enumerate(zip(geo.tile_rows(block), geo.lengths())):
        part = slab[:, :, first : first + n_tiles * rows]
        first += n_tiles * rows
        group = geo.factor(level) // block
        if group > 1:  # tiles inside one coarse position: sum their partial rows
            part = torch.nn.functional.pad(part, (0, 0, 0, -n_tiles % group))
            part = part.unflatten(2, (-1, group)).sum(3)
        part = part[:, :, :length]
        out.append(torch.nn.functional.pad(part, (0, 0, 0, length - part.shape[2])))
    grad = torch.cat(out, dim=2)
    return grad.transpose(1, 2).reshape(b, -1, h * d).to(dtype)


class _TileAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q_cat: Tensor, k_cat: Tensor, v: Tensor, lam: Tensor,  # type: ignore[override]
                key_mask: Tensor | None, geo: TileGeometry) -> Tensor:
        k = kernels()
        b, t, _ = v.shape
        q_cat, k_cat, v = q_cat.contiguous(), k_cat.contiguous(), v.contiguous()
        out = torch.empty_like(v)
        lse = torch.empty(b, geo.heads, t, dtype=torch.float32, device=v.device)
        mask = v if key_mask is None else key_mask.contiguous().view(torch.uint8)
        scale = 1.0 / math.sqrt(geo.head_dim)
        grid = (geo.tiles(geo.tile_queries), b * geo.heads)
        k.hkt_tile_forward[grid](
            q_cat, k_cat, v, lam, mask, out, lse,
            q_cat.stride(0), q_cat.stride(1), k_cat.stride(0), k_cat.stride(1),
            v.stride(0), v.stride(1), out.stride(0), out.stride(1), *_lam_strides(lam),
            mask.stride(0) if key_mask is not None else 0,
            t, geo.t_pad, geo.heads, scale * math.log2(math.e),
            LEVELS=geo.levels, STRIDE=geo.stride, D=geo.head_dim,
            BD=triton_block(geo.head_dim), BM=geo.tile_queries, BN=geo.tile_keys,
            CAUSAL=geo.causal, HAS_MASK=key_mask is not None, PRECISION=_precision(v),
        )
        ctx.save_for_backward(q_cat, k_cat, v, lam, mask, out, lse)
        ctx.geo, ctx.has_mask = geo, key_mask is not None
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        k = kernels()
        q_cat, k_cat, v, lam, mask, out, lse = ctx.saved_tensors
        geo: TileGeometry = ctx.geo
        b, t, _ = v.shape
        h, d = geo.heads, geo.head_dim
        do = grad_out.contiguous()
        delta = (do.float() * out.float()).view(b, t, h, d).sum(-1).transpose(1, 2).contiguous()
        scale = 1.0 / math.sqrt(d)
        common = dict(LEVELS=geo.levels, STRIDE=geo.stride, D=d, BD=triton_block(d),
                      BM=geo.tile_queries, BN=geo.tile_keys, CAUSAL=geo.causal,
                      HAS_MASK=ctx.has_mask, PRECISION=_precision(v))
        strides = (q_cat.stride(0), q_cat.stride(1), k_cat.stride(0), k_cat.stride(1),
                   v.stride(0), v.stride(1), do.stride(0), do.stride(1), *_lam_strides(lam),
                   mask.stride(0) if ctx.has_mask else 0)

        n_q = geo.tiles(geo.tile_queries)
        slab_q = n_q * sum(geo.tile_rows(geo.tile_queries))
        dq_slab = torch.zeros(b, h, slab_q, d, dtype=torch.float32, device=v.device)
        dlam = torch.empty(b, h, t, geo.levels, dtype=torch.float32, device=v.device)
        k.hkt_tile_backward_query[(n_q, b * h)](
            q_cat, k_cat, v, lam, mask, do, lse, delta, dq_slab, dlam, *strides,
            t, geo.t_pad, h, n_q, slab_q, scale, scale * math.log2(math.e), **common,
        )
        n_k = geo.tiles(geo.tile_keys)
        slab_k = n_k * sum(geo.tile_rows(geo.tile_keys))
        dk_slab = torch.zeros(b, h, slab_k, d, dtype=torch.float32, device=v.device)
        dv = torch.empty_like(v)
        k.hkt_tile_backward_key[(n_k, b * h)](
            q_cat, k_cat, v, lam, mask, do, lse, delta, dk_slab, dv, *strides,
            dv.stride(0), dv.stride(1),
            t, geo.t_pad, h, n_k, slab_k, scale, scale * math.log2(math.e), **common,
        )
        dq = _from_slab(dq_slab, geo.tile_queries, geo, q_cat.dtype)
        dk = _from_slab(dk_slab, geo.tile_keys, geo, k_cat.dtype)
        dlam_out = None
        if ctx.needs_input_grad[3]:
            dlam_out = dlam.sum(0, keepdim=True) if lam.shape[0] == 1 else dlam
            dlam_out = dlam_out.sum(2, keepdim=True) if lam.shape[2] == 1 else dlam_out
            dlam_out = dlam_out.to(lam.dtype)
        return dq, dk, dv, dlam_out, None, None


def triton_block(width: int) -> int:
    """Triton's tensors have power-of-two sides: the head width d rounded up (masked loads)."""
    return 1 << max(width - 1, 0).bit_length()


def tile_attention(q_cat: Tensor, k_cat: Tensor, v: Tensor, lam: Tensor,
                   key_mask: Tensor | None, geo: TileGeometry) -> Tensor:
    """softmax(Σ_l λ_l U_l S^(l) U_lᵀ + masks) V per head, through the tile kernels.

    q_cat, k_cat: (B, Σ_l T_l, H·d), the levels' projections concatenated along time (level 0
    first); v: (B, T, H·d); lam: (1 or B, H, 1 or T, L); key_mask: (B, T) bool, True at real
    tokens. Returns (B, T, H·d), heads side by side, ready for the output projection.
    """
    return _TileAttention.apply(q_cat, k_cat, v, lam, key_mask, geo)
