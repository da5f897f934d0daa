"""HKT's typed settings (``model.mixer`` when ``model.name`` is ``hkt``): :class:`HKTConfig`, its
checks, and the choices its fields take. Imported by :mod:`hkt.mixers.hkt`, which re-exports
it."""

from __future__ import annotations

from dataclasses import dataclass

from hkt.mixers.tile import config_problem
from hkt.checks import boolean, choice, integer, number
from hkt.errors import ConfigValueError

__all__ = ["FUSIONS", "UPSAMPLES", "IMPLS", "HKTConfig"]

FUSIONS = ("dynamic", "static")
UPSAMPLES = ("nearest", "linear")
IMPLS = ("fused", "sdpa", "reference", "tile")


@dataclass
class HKTConfig:
    """HKT's own settings (``model.mixer`` when ``model.name`` is ``hkt``).

    Attributes:
        levels: L >= 1 pyramid levels (1 = standard attention).
        stride: s >= 2, downsampling factor between consecutive levels.
        kernel_size: k >= s, width of the depthwise pyramid convolutions (k = s: disjoint
            blocks; k > s: overlapping).
        fusion: ``dynamic`` (λ per query token and head) or ``static`` (λ per head).
        upsample: ``nearest`` or ``linear`` interpolation of the coarse scores (linear mixes
            later positions into earlier ones, so causal mode needs ``nearest``).
        impl: ``fused`` (one SDPA call; blockwise CPU kernel on CPU), ``sdpa`` (one SDPA call on
            every device), ``reference`` (materialised scores; slow) or ``tile`` (the Triton tile
            kernel: CUDA only; nearest upsampling, power-of-two stride, levels <= 4, no
            attention dropout). Same numbers.
        chunk_mib: CPU fused path only: the widened per-block tensors alive at once stay within
            this many MiB (smaller saves memory, larger saves per-block overhead).

    The tile kernel's tile sizes are not here: they change no number (beyond rounding), and
    every field here is part of a run's identity (config comparisons, the workflow's rerun
    digest). They are :class:`hkt.mixers.tile.TileSizes`, given to :class:`HKTAttention`.
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

    def check_causal(self, causal: bool) -> None:
        """The one cross-module rule: linear upsampling is not causal."""
        if boolean(causal, "causal") and self.upsample == "linear":
            raise ConfigValueError("upsample", self.upsample,
                                   "linear upsampling mixes later positions into earlier ones; "
                                   "causal mode (causal=true) needs 'nearest'")
