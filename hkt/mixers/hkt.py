"""Hierarchical Kernel Transformer attention (arXiv 2604.08829), docs/design.md §2.

Levels l = 0..L-1. X^(0) = X; X^(l) = GELU(LayerNorm(DWConv_l(X^(l-1)))), a causal depthwise
convolution with stride s. Each level has its own query/key projections; values stay at full
resolution. Per-level scores S^(l) = Q^(l) K^(l)^T / sqrt(d) are upsampled to T×T,
Ŝ^(l) = U_l S^(l) U_l^T, fused with convex weights λ, and one softmax attends:

    Y = softmax(Σ_l λ_l ⊙ Ŝ^(l) + mask) V.

Three computations of the same function with the same parameters (``impl``, chosen per call
by :func:`choose_kernel`):

* ``impl="materialised"`` materialises every S^(l), interpolates it and fuses: the paper, line by
  line. O(T²) memory; for correctness checks and analysis.
* ``impl="fused"`` uses the exact factorisation Ŝ^(l) = (U_l Q^(l)) (U_l K^(l))^T / sqrt(d) and
  λ depending only on the query: with q̃_i = [λ_l(i) (U_l Q^(l))_i]_l and k̃_j = [(U_l K^(l))_j]_l,
  S = q̃ k̃^T / sqrt(d), so the whole layer is one ``scaled_dot_product_attention`` call with
  query/key width L·d. No T×T tensor anywhere. On CPU it runs blockwise through the kernel
  wrapper of ``fused_cpu.py``, which never holds whole Q^(l), K^(l).
* ``impl="sdpa"``: the same single SDPA call on every device (the CPU wrapper's plain-autograd
  counterpart, for benchmarks and equivalence tests).
* ``impl="tile"`` scores each level at its own resolution inside flash-attention tiles
  (``tile_attention.py``, Triton; CUDA, or Triton's CPU interpreter for tests): the paper's score
  cost.

:func:`truncate_levels` keeps only the first levels for a while (the level-truncation analysis).

This module is the whole mixer: its typed settings (:class:`HKTConfig`, ``model.mixer`` when the
model is HKT), the per-call kernel choice (:func:`choose_kernel`), the analytic score cost
(:func:`score_cost_ratio`, docs/design.md §2) and the layer (:class:`HKTAttention`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from hkt.value_checks import boolean, choice, integer, number
from hkt.errors import ConfigValueError
from hkt.mixers.base import (AttentionInternals, TokenMixer, check_key_mask, merge_heads,
                             sdpa_mask, split_heads)
from hkt.mixers.fused_cpu import cpu_kernel_applies, hkt_flash_cpu
from hkt.mixers.pyramid import DynamicFusion, PyramidLevel, StaticFusion
from hkt.mixers.catalog import register
from hkt.mixers.sdpa import call_of, pad_value
from hkt.mixers.tile_attention import (TileGeometry, TileSizes, config_problem, tile_attention,
                                       unavailable)
from hkt.mixers.upsample import Upsampler

__all__ = ["FUSIONS", "UPSAMPLES", "IMPLS", "HKTConfig", "choose_kernel", "score_cost_ratio",
           "max_levels", "score_cost_limit", "HKTAttention", "truncate_levels"]

FUSIONS = ("dynamic", "static")
UPSAMPLES = ("nearest", "linear")
IMPLS = ("fused", "sdpa", "materialised", "tile")


@dataclass
class HKTConfig:
    """HKT's own settings (``model.mixer`` when ``model.name`` is ``hkt``).

    Attributes:
        levels: L >= 1 pyramid levels (1 = standard attention), at most the L with
            stride^(L-1) <= T, the task's ``max_length`` (:meth:`check_length`): there the
            coarsest level is one position per sequence, and a level more would only pad.
        stride: s >= 2, downsampling factor between consecutive levels.
        kernel_size: k >= s, width of the depthwise pyramid convolutions (k = s: disjoint
            blocks; k > s: overlapping).
        fusion: ``dynamic`` (λ per query token and head) or ``static`` (λ per head).
        upsample: ``nearest`` or ``linear`` interpolation of the coarse scores (linear mixes
            later positions into earlier ones, so causal mode needs ``nearest``).
        impl: ``fused`` (one SDPA call; blockwise CPU kernel on CPU), ``sdpa`` (one SDPA call on
            every device), ``materialised`` (materialised scores; slow) or ``tile`` (the Triton tile
            kernel: CUDA only; nearest upsampling, power-of-two stride, levels <= 4, no
            attention dropout). Same numbers.
        chunk_mib: CPU fused path only: the widened per-block tensors alive at once stay within
            this many MiB (smaller saves memory, larger saves per-block overhead).

    The tile kernel's tile sizes are not here: they change no number (beyond rounding), and
    every field here is part of a run's identity (config comparisons, the workflow's rerun
    digest). They are :class:`hkt.mixers.tile_attention.TileSizes`, given to :class:`HKTAttention`.
    """

    levels: int = 3
    stride: int = 2
    kernel_size: int = 2
    fusion: str = "dynamic"
    upsample: str = "nearest"
    impl: str = "fused"
    chunk_mib: float = 32.0

    def __post_init__(self) -> None:
        integer(self.levels, "levels", 1)
        integer(self.stride, "stride", 2)
        integer(self.kernel_size, "kernel_size", 1)
        if self.kernel_size < self.stride:
            raise ConfigValueError("kernel_size", self.kernel_size,
                                   f"must be >= stride ({self.stride}), otherwise the "
                                   "convolution skips tokens")
        choice(self.fusion, "fusion", FUSIONS)
        choice(self.upsample, "upsample", UPSAMPLES)
        choice(self.impl, "impl", IMPLS)
        number(self.chunk_mib, "chunk_mib", 0, lo_open=True)
        if self.impl == "tile" and (problem := config_problem(self.levels, self.stride, self.upsample)):
            raise ConfigValueError(*problem)

    def check_length(self, max_length: int) -> None:
        """Refuse more levels than a sequence of ``max_length`` tokens has: the coarsest level's
        block, stride^(levels-1) tokens, must fit in it. At that bound the coarsest level is one
        position per sequence already; every level beyond it would be one position too, and
        would only pad the sequence to its block (levels=40 at stride 2 pads to 2^39 tokens)."""
        block = self.stride ** (self.levels - 1)
        if block > max_length:
            most = max_levels(self.stride, max_length)
            raise ConfigValueError(
                "levels", self.levels,
                f"stride^(levels-1) = {self.stride}^{self.levels - 1} = {block:,} tokens exceeds "
                f"the task's sequence length (task.max_length = {max_length}): at most {most} "
                f"levels at stride {self.stride}, whose coarsest level is already one position per "
                "sequence; more levels add nothing but padding to their block (and memory)")

    def check_causal(self, causal: bool) -> None:
        """The one cross-module rule: linear upsampling is not causal."""
        if boolean(causal, "causal") and self.upsample == "linear":
            raise ConfigValueError("upsample", self.upsample,
                                   "linear upsampling mixes later positions into earlier ones; "
                                   "causal mode (causal=true) needs 'nearest'")


def choose_kernel(impl: str, v: Tensor, dropout_p: float, return_internals: bool) -> str:
    """Which computation of the layer runs: ``"cpu_blocks"``, ``"sdpa"``, ``"materialised"`` or
    ``"tile"``.

    All give the same numbers (tests/test_attention.py, tests/test_tile.py); they differ in
    memory and speed. ``tile`` runs only where asked for, and raises where it cannot run.
    """
    if impl == "materialised":
        return "materialised"  # asked for: the paper's materialised scores
    if impl == "tile":
        if reason := unavailable(v):
            raise ConfigValueError("impl", impl, reason)
        return "tile"
    if impl == "fused" and not return_internals and cpu_kernel_applies(v, dropout_p):
        # On CPU (fp32/64, no dropout, no autocast) the blockwise wrapper projects Q^(l), K^(l)
        # per block, so they never exist whole: far less memory than one big SDPA call.
        return "cpu_blocks"
    # GPU, autocast, dropout, impl="sdpa", or internals requested (they need whole Q^(l), K^(l))
    return "sdpa"


def score_cost_ratio(levels: int, stride: int) -> float:
    """Σ_l T_l² d / (T² d) = Σ_{l<L} s^(-2l) for T divisible by s^(L-1).

    1.3125 for (levels=3, stride=2); tends to s²/(s²-1) = 4/3 for stride 2 as levels grow.
    """
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    if stride < 2:
        raise ValueError(f"stride must be >= 2, got {stride}")
    return sum(float(stride) ** (-2 * level) for level in range(levels))


def max_levels(stride: int, max_length: int) -> int:
    """The most levels a sequence of ``max_length`` tokens has at ``stride``: the largest L with
    stride^(L-1) <= max_length (:meth:`HKTConfig.check_length`)."""
    levels = 1
    while stride ** levels <= max_length:
        levels += 1
    return levels


def score_cost_limit(stride: int) -> float:
    """The bound of ``score_cost_ratio`` over all levels: s² / (s² - 1)."""
    if stride < 2:
        raise ValueError(f"stride must be >= 2, got {stride}")
    return stride**2 / (stride**2 - 1)


@register("hkt")
class HKTAttention(TokenMixer):
    """Multi-scale HKT attention.

    Args:
        d_model: model width D.
        n_heads: heads H; head width d = D / H.
        causal: query i sees only keys j <= i (requires nearest upsampling).
        dropout: dropout on the attention probabilities (training only).
        config: HKT's own settings (:class:`HKTConfig`); or give its fields as keywords.
        bias: whether the projections have biases.
        norm_eps: LayerNorm epsilon in the pyramid.
        tile: ``impl="tile"`` only: its tile sizes (default :class:`TileSizes`' defaults).
    """

    config_class = HKTConfig
    supports_internals: bool = True  # per-level queries, keys, scores and λ for `hkt analyze`

    def build(self, config: HKTConfig, *, bias: bool = True, norm_eps: float = 1e-5,
              tile: TileSizes | None = None) -> None:
        config.check_causal(self.causal)
        if config.impl == "tile" and self.dropout > 0:
            raise ValueError(f"dropout ({self.dropout}) on the attention probabilities is not "
                             "computed by impl='tile'; set the attention dropout to 0 or use "
                             "impl='fused'")
        d_model, n_heads = self.d_model, self.n_heads
        levels, stride, kernel_size = config.levels, config.stride, config.kernel_size
        self.tile = TileSizes() if tile is None else tile
        self._levels_in_use = levels  # changed only inside truncate_levels()

        self.q_proj = nn.ModuleList(nn.Linear(d_model, d_model, bias=bias) for _ in range(levels))
        self.k_proj = nn.ModuleList(nn.Linear(d_model, d_model, bias=bias) for _ in range(levels))
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.pyramid = nn.ModuleList(
            PyramidLevel(d_model, stride, kernel_size, norm_eps) for _ in range(levels - 1)
        )
        self.fusion: nn.Module | None = None
        if levels > 1:
            self.fusion = (
                DynamicFusion(d_model, n_heads, levels)
                if config.fusion == "dynamic"
                else StaticFusion(n_heads, levels)
            )

    # ------------------------------------------------------------------- settings (config)
    @property
    def levels(self) -> int:
        """L, the pyramid's levels (``config.levels``)."""
        return self.config.levels

    @property
    def stride(self) -> int:
        """s, the downsampling factor between levels (``config.stride``)."""
        return self.config.stride

    @property
    def upsample(self) -> str:
        """How coarse scores are upsampled: ``nearest`` or ``linear`` (``config.upsample``)."""
        return self.config.upsample

    @property
    def impl(self) -> str:
        """Which computation runs (``config.impl``; :func:`choose_kernel`)."""
        return self.config.impl

    # ----------------------------------------------------------------------------- geometry
    def padded_length(self, seq_len: int) -> int:
        """Internal length: a multiple of s^(L-1), so that every level has an integer length.

        Linear upsampling interpolates a token between its coarse block and the next one; one
        extra coarse block keeps that neighbour inside the grid for every real token, so results
        never depend on whether the grid happens to end at the sequence's end.
        """
        block = self.stride ** (self.n_levels - 1)
        blocks = -(-seq_len // block)
        if self.upsample == "linear" and self.n_levels > 1:
            blocks += 1
        return blocks * block

    @property
    def n_levels(self) -> int:
        """Levels in use: all, or fewer inside :func:`truncate_levels`."""
        return self._levels_in_use

    # ----------------------------------------------------------------------------- pieces
    def _pyramid(
        self, x: Tensor, key_mask: Tensor | None, n_levels: int
    ) -> tuple[list[Tensor], list[Tensor | None], int]:
        """Levels X^(0..n-1) on the padded grid, their masks, and the padded length."""
        b, t, _ = x.shape
        t_pad = self.padded_length(t)
        mask = key_mask
        if t_pad != t:
            x = F.pad(x, (0, 0, 0, t_pad - t))
            if mask is None:
                mask = torch.ones(b, t, dtype=torch.bool, device=x.device)
            mask = F.pad(mask, (0, t_pad - t), value=False)
        features, masks = [x], [mask]
        for level in range(1, n_levels):
            step = self.pyramid[level - 1]
            if torch.is_grad_enabled() and x.requires_grad:
                # Recompute the cheap conv/LayerNorm/GELU in backward instead of keeping their
                # intermediate activations: only the level outputs X^(l) stay alive.
                x = checkpoint(step, x, mask, use_reentrant=False)
            else:
                x = step(x, mask)
            # Coarse position p is real when the last input it sees, p·s, is real.
            mask = None if mask is None else mask[:, :: self.stride]
            features.append(x)
            masks.append(mask)
        return features, masks, t_pad

    def _fusion_weights(self, x: Tensor, n_levels: int) -> Tensor:
        """λ: (1 or B, H, 1 or T, n_levels), convex over the last axis."""
        if self.fusion is None or n_levels == 1:
            return x.new_ones(1, self.n_heads, 1, 1)
        return torch.softmax(self.fusion(x)[..., :n_levels], dim=-1)

    def _upsample_scores(self, s: Tensor, level: int, t_pad: int, t: int) -> Tensor:
        """Ŝ^(l) = U_l S^(l) U_l^T through ``F.interpolate``: (B, H, T_l, T_l) -> (B, H, T, T)."""
        if level > 0:
            mode = "nearest" if self.upsample == "nearest" else "bilinear"
            extra = {} if mode == "nearest" else {"align_corners": False}
            s = F.interpolate(s, size=(t_pad, t_pad), mode=mode, **extra)
        return s[:, :, :t, :t]

    # ----------------------------------------------------------------------------- forward
    def forward(
        self, x: Tensor, key_mask: Tensor | None = None, *, return_internals: bool = False
    ) -> Tensor | tuple[Tensor, AttentionInternals]:
        """x: (B, T, D); key_mask: (B, T) bool, True at real tokens. Returns (B, T, D)."""
        check_key_mask(key_mask, x)
        b, t, _ = x.shape
        n_levels, h = self.n_levels, self.n_heads
        features, masks, t_pad = self._pyramid(x, key_mask, n_levels)
        lam = self._fusion_weights(x, n_levels)
        values = self.v_proj(x)
        v = split_heads(values, h)
        dropout_p = self.dropout if self.training else 0.0
        attn_mask, is_causal = sdpa_mask(key_mask, self.causal, t)
        ups = Upsampler(self.upsample, self.stride, t, t_pad)
        queries = keys = None
        kernel = choose_kernel(self.impl, v, dropout_p, return_internals)
        if kernel == "tile":
            out, queries, keys = self._attend_tile(features, lam, values, key_mask, t, t_pad)
            if not return_internals:
                return out
            return out, self._internals(features, masks, queries, keys, lam, t)
        if kernel == "cpu_blocks":
            # Projects per block inside the kernel wrapper: Q^(l), K^(l) never exist whole.
            y = hkt_flash_cpu(
                features, self.q_proj[:n_levels], self.k_proj[:n_levels], lam, v, upsampler=ups,
                mask=attn_mask, is_causal=is_causal, scale=1.0 / math.sqrt(self.head_dim),
                chunk_bytes=self.config.chunk_mib * 2**20,
            )
        else:
            queries = [split_heads(self.q_proj[l](features[l]), h) for l in range(n_levels)]
            keys = [split_heads(self.k_proj[l](features[l]), h) for l in range(n_levels)]
            attend = self._attend_fused if kernel == "sdpa" else self._attend_materialised
            y = attend(queries, keys, lam, v, attn_mask, is_causal, ups, dropout_p)
        out = self.out_proj(merge_heads(y))
        if not return_internals:
            return out
        return out, self._internals(features, masks, queries, keys, lam, t)

    def _attend_tile(
        self, features: list[Tensor], lam: Tensor, values: Tensor, key_mask: Tensor | None,
        t: int, t_pad: int,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """The tile kernel on the levels' projections concatenated along time; returns the
        output and the per-level Q^(l), K^(l) (views, for internals)."""
        n_levels, h = len(features), self.n_heads
        geo = TileGeometry(levels=n_levels, stride=self.stride, heads=h, head_dim=self.head_dim,
                           t=t, t_pad=t_pad, causal=self.causal,
                           tile_queries=self.tile.queries, tile_keys=self.tile.keys)
        q_cat = torch.cat([self.q_proj[l](features[l]) for l in range(n_levels)], dim=1)
        k_cat = torch.cat([self.k_proj[l](features[l]) for l in range(n_levels)], dim=1)
        lengths = geo.lengths()
        queries = [split_heads(q, h) for q in q_cat.split(lengths, dim=1)]
        keys = [split_heads(k, h) for k in k_cat.split(lengths, dim=1)]
        y = tile_attention(q_cat, k_cat, values, lam, key_mask, geo)
        return self.out_proj(y), queries, keys

    def _attend_fused(
        self,
        queries: list[Tensor],
        keys: list[Tensor],
        lam: Tensor,
        v: Tensor,
        attn_mask: Tensor | None,
        is_causal: bool,
        ups: Upsampler,
        dropout_p: float,
    ) -> Tensor:
        """One SDPA call on q̃ = [λ_l U_l Q^(l)]_l, k̃ = [U_l K^(l)]_l (width L·d)."""
        d, n_levels = self.head_dim, len(queries)
        # Under autocast λ's softmax runs in fp32; cast it so that q̃ stays in the projections'
        # precision (an fp32 q̃ would double its memory and add a cast copy inside SDPA).
        lam = lam.to(queries[0].dtype)
        q_tilde = torch.cat([lam[..., l : l + 1] * ups.up(q, l) for l, q in enumerate(queries)], dim=-1)
        k_tilde = torch.cat([ups.up(k, l) for l, k in enumerate(keys)], dim=-1)
        # Zero-pad V to L·d only where a fused kernel needs equal widths (sdpa.py says which);
        # exact: zero columns of V give zero output columns, dropped below.
        pad = pad_value(call_of(q_tilde, v, attn_mask, dropout_p))
        v_in = F.pad(v, (0, (n_levels - 1) * d)) if pad else v
        y = F.scaled_dot_product_attention(
            q_tilde,
            k_tilde,
            v_in,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=1.0 / math.sqrt(d),
        )
        return y[..., :d]

    def _attend_materialised(
        self,
        queries: list[Tensor],
        keys: list[Tensor],
        lam: Tensor,
        v: Tensor,
        attn_mask: Tensor | None,
        is_causal: bool,
        ups: Upsampler,
        dropout_p: float,
    ) -> Tensor:
        """The paper line by line: S = Σ_l λ_l ⊙ U_l S^(l) U_l^T; Y = softmax(S + mask) V."""
        t, t_pad = ups.t, ups.t_pad
        scale = 1.0 / math.sqrt(self.head_dim)
        scores = 0.0  # S, summed level by level
        for l, (q, k) in enumerate(zip(queries, keys)):
            s_l = (q @ k.transpose(-1, -2)) * scale  # S^(l): (B, H, T_l, T_l)
            scores = scores + lam[..., l : l + 1] * self._upsample_scores(s_l, l, t_pad, t)
        if is_causal:
            attn_mask = torch.ones(t, t, dtype=torch.bool, device=v.device).tril()
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        probs = F.dropout(torch.softmax(scores, dim=-1), p=dropout_p)
        return probs @ v

    def _internals(
        self,
        features: list[Tensor],
        masks: list[Tensor | None],
        queries: list[Tensor],
        keys: list[Tensor],
        lam: Tensor,
        t: int,
    ) -> AttentionInternals:
        lengths = [-(-t // self.stride**l) for l in range(len(queries))]
        qs = [q[:, :, :n] for q, n in zip(queries, lengths)]
        ks = [k[:, :, :n] for k, n in zip(keys, lengths)]
        b = features[0].shape[0]
        return AttentionInternals(
            features=[f[:, :n] for f, n in zip(features, lengths)],
            queries=qs,
            keys=ks,
            scores=[q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) for q, k in zip(qs, ks)],
            lambdas=lam.expand(b, self.n_heads, t, lam.shape[-1]),
            level_masks=[None if m is None else m[:, :n] for m, n in zip(masks, lengths)],
        )

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, levels={self.levels}, "
            f"stride={self.stride}, kernel_size={self.config.kernel_size}, fusion={self.config.fusion!r}, "
            f"upsample={self.upsample!r}, causal={self.causal}, impl={self.impl!r}"
        )


@contextmanager
def truncate_levels(model: nn.Module, n: int) -> Iterator[nn.Module]:
    """Within the block, every :class:`HKTAttention` in ``model`` keeps only levels l < n.

    λ is renormalised over the kept levels (the softmax runs over them only); a layer with at
    most n levels is unchanged. The previous levels are restored on exit, even on error, so
    nothing leaks into later calls. ``model`` may be one layer or a whole model.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"truncate_levels: n must be an integer >= 1 (levels to keep), got {n!r}")
    layers = [m for m in model.modules() if isinstance(m, HKTAttention)]
    before = [m._levels_in_use for m in layers]
    try:
        for m in layers:
            m._levels_in_use = min(n, m.levels)
        yield model
    finally:
        for m, levels in zip(layers, before):
            m._levels_in_use = levels
