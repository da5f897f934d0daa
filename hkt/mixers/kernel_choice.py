"""Which computation of HKT attention runs for one call (:func:`choose_kernel`): the CPU blockwise
kernel, one SDPA call, the materialised reference or the Triton tile kernel; all give the same
numbers."""

from __future__ import annotations

from torch import Tensor

from hkt.mixers.fused_cpu import cpu_kernel_applies
from hkt.mixers.tile import unavailable
from hkt.errors import ConfigValueError

__all__ = ["choose_kernel"]


def choose_kernel(impl: str, v: Tensor, dropout_p: float, return_internals: bool) -> str:
    """Which computation of the layer runs: ``"cpu_blocks"``, ``"sdpa"``, ``"reference"`` or
    ``"tile"``.

    All give the same numbers (tests/test_attention.py, tests/test_tile.py); they differ in
    memory and speed. ``tile`` runs only where asked for, and raises where it cannot run.
    """
    if impl == "reference":
        return "reference"  # asked for: the paper's materialised scores
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
