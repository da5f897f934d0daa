"""Which ``scaled_dot_product_attention`` calls need V zero-padded to the query/key width.

HKT's fused path (docs/design.md §2) is one SDPA call with query/key width L·d and value width
d. Zero-padding V to L·d is exact (zero columns of V give zero output columns), but it multiplies
the P·V, dP and dV work and the output width by L. It pays only where it lets a fused kernel run
that would not run on the narrow V. PyTorch's backend filters (``aten/src/ATen/native/
transformers/sdp_utils_cpp.cpp`` and ``cuda/sdp_utils.cpp``; read for PyTorch 2.13) say:

* CPU flash: q, k and v widths all equal, no dropout; fp32/fp64/bf16/fp16. Otherwise the math
  backend runs, which materialises the T×T matrix: so on CPU, pad.
* CUDA flash (sm80–sm121): q, k and v widths equal and ≤ 256, **no attn_mask**, fp16/bf16.
* CUDA memory-efficient (sm50–sm121): only q and k widths must match; both the q and the v width
  must be multiples of the GEMM alignment: 8 for fp16/bf16 and 4 for fp32 on sm80+, 8 for fp16
  and 1 for fp32 on sm7x, 1 below; any mask; fp16/fp32, and bf16 on sm80+.
* CUDA cuDNN (sm80–sm121): fp16/bf16, both widths multiples of 8 and ≤ 128 (forward and
  backward), not under ``torch.use_deterministic_algorithms`` (unless warn-only).

These rules are read, not measured, and torch's change between releases: on an H200 (sm90,
torch 2.11, cuDNN 9.19) cuDNN took q/k width 192 with V 64, wider than the 128 above. They only
decide padding, and there both cuDNN and memory-efficient take the narrow V, so the decision
holds. ``hkt doctor`` asks PyTorch itself (any fused kernel passes) and says whether a padding
was needed on the installed torch.

Decision (:func:`pad_value`): keep V narrow when some fused kernel accepts the narrow call; pad
only when the padded call reaches a fused kernel and the narrow one does not; keep V narrow
when neither does (the math backend accepts any widths, so padding would be pure waste). Every
real batch carries a key-padding mask, which rules out CUDA flash anyway, so on CUDA the
memory-efficient or cuDNN backend runs on the narrow V. On devices whose rules we have not read
(MPS, XPU, …), V is padded: equal widths are what every fused kernel accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["BACKENDS", "AttentionCall", "call_of", "enabled_backends", "fused_backends", "pad_value"]

BACKENDS = ("flash", "efficient", "cudnn", "math")
"""SDPA backends by PyTorch's names (``torch.backends.cuda.<name>_sdp_enabled``)."""

_HALF = (torch.float16, torch.bfloat16)
_CPU_FLASH_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class AttentionCall:
    """What decides which SDPA backends accept a call.

    ``dtype`` is the dtype the kernel sees (the autocast dtype under autocast); ``capability``
    the CUDA compute capability (major, minor), None off CUDA; ``enabled`` the backends the
    user left on (``torch.nn.attention.sdpa_kernel`` narrows them).
    """

    device: str
    dtype: torch.dtype
    qk_width: int
    v_width: int
    masked: bool
    dropout: bool = False
    capability: tuple[int, int] | None = None
    enabled: frozenset[str] = frozenset(BACKENDS)
    deterministic: bool = False

    def widened(self) -> AttentionCall:
        """The same call with V zero-padded to the query/key width."""
        return AttentionCall(self.device, self.dtype, self.qk_width, self.qk_width, self.masked,
                             self.dropout, self.capability, self.enabled, self.deterministic)


def _gemm_alignment(capability: tuple[int, int], half: bool) -> int:
    """The memory-efficient kernel's width alignment (``minimum_gemm_alignment`` in PyTorch)."""
    major = capability[0]
    if major >= 8:
        return 8 if half else 4
    if major == 7:
        return 8 if half else 1
    return 1


def _sm_in(capability: tuple[int, int], low: tuple[int, int], high: tuple[int, int]) -> bool:
    return low <= tuple(capability) <= high


def fused_backends(call: AttentionCall) -> tuple[str, ...]:
    """The fused (non-math) backends, among the enabled ones, that accept ``call``."""
    out = []
    if call.device == "cpu":
        if ("flash" in call.enabled and call.qk_width == call.v_width and not call.dropout
                and call.dtype in _CPU_FLASH_DTYPES):
            out.append("flash")
        return tuple(out)
    if call.device != "cuda" or call.capability is None:
        return tuple(out)
    cap, half = call.capability, call.dtype in _HALF
    modern = cap[0] >= 8
    if ("flash" in call.enabled and _sm_in(cap, (8, 0), (12, 1)) and half and not call.masked
            and call.qk_width == call.v_width <= 256):
        out.append("flash")
    align = _gemm_alignment(cap, half)
    if ("efficient" in call.enabled and _sm_in(cap, (5, 0), (12, 1))
            and (call.dtype in (torch.float16, torch.float32) or (modern and half))
            and call.qk_width % align == 0 and call.v_width % align == 0):
        out.append("efficient")
    if ("cudnn" in call.enabled and _sm_in(cap, (8, 0), (12, 1)) and half and not call.deterministic
            and call.qk_width <= 128 and call.v_width <= 128
            and call.qk_width % 8 == 0 and call.v_width % 8 == 0):
        out.append("cudnn")
    return tuple(out)


def pad_value(call: AttentionCall) -> bool:
    """Whether to zero-pad V to the query/key width for this call (see the module docstring)."""
    if call.v_width == call.qk_width:
        return False
    if call.device not in ("cpu", "cuda"):
        return True
    if fused_backends(call):
        return False
    return bool(fused_backends(call.widened()))


def enabled_backends() -> frozenset[str]:
    """The SDPA backends currently enabled (global flags, also read by the CPU dispatcher)."""
    flags = torch.backends.cuda
    on = {"flash": flags.flash_sdp_enabled(), "efficient": flags.mem_efficient_sdp_enabled(),
          "cudnn": flags.cudnn_sdp_enabled(), "math": flags.math_sdp_enabled()}
    return frozenset(name for name, enabled in on.items() if enabled)


def call_of(q: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float) -> AttentionCall:
    """The :class:`AttentionCall` for ``scaled_dot_product_attention(q, k, v, attn_mask, …)``
    as it would run here and now: the autocast dtype, the device's capability, enabled backends."""
    device = q.device.type
    dtype = q.dtype
    if torch.is_autocast_enabled(device) and dtype.is_floating_point:
        dtype = torch.get_autocast_dtype(device)
    capability = torch.cuda.get_device_capability(q.device) if device == "cuda" else None
    if torch.compiler.is_compiling():
        # torch.compile cannot trace these global flags (a graph break in every layer):
        # inside a compiled model assume the defaults.
        enabled, deterministic = frozenset(BACKENDS), False
    else:
        enabled = enabled_backends()
        deterministic = (torch.are_deterministic_algorithms_enabled()
                         and not torch.is_deterministic_algorithms_warn_only_enabled())
    return AttentionCall(device, dtype, q.shape[-1], v.shape[-1], attn_mask is not None,
                         dropout_p > 0.0, capability, enabled, deterministic)
