"""``hkt doctor``'s ``sdpa`` check: which SDPA backend PyTorch picks for MHA's and HKT's calls at
each task's shape, and whether that keeps attention's memory linear in T."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator

import torch

from hkt.mixers.sdpa import AttentionCall
from hkt.suite.doctor.context import Check, Context, job_name

__all__ = ["FUSED", "Pick", "sdpa_verdict", "torch_pick", "check_sdpa"]


FUSED = ("flash", "efficient", "cudnn")
"""PyTorch's fused SDPA kernels: any of them keeps attention's memory linear in T."""

Pick = Callable[[AttentionCall], str]
"""PyTorch's choice of SDPA backend for a call: a name of :data:`hkt.mixers.sdpa.BACKENDS`,
or ``"none"`` when no enabled backend accepts it."""


def sdpa_verdict(call: AttentionCall, pick: Pick) -> tuple[bool, str]:
    """Judge one SDPA call of the model (``call``: V at the width the model computes it) on
    this machine: (passes, what to print).

    ``sdpa.py`` pads V where it expects that to reach a fused kernel (:func:`pad_value`); the
    call as made (padded or not) is then given to ``pick``, PyTorch's choice. Any fused kernel
    passes, whichever it is; the math fallback (T×T memory) and a call no backend accepts fail.
    Where V was padded, the narrow call is asked too: the line says whether padding was needed
    on this torch. Pure given ``pick``: the doctor asks torch, the tests simulate its answers."""
    from hkt.mixers.sdpa import fused_backends, pad_value

    pad = pad_value(call)
    made = call.widened() if pad else call
    picked, expected = pick(made), fused_backends(made)
    v = "" if call.v_width == call.qk_width else f"V {call.v_width} "
    if pad:
        v = f"V {call.v_width} padded to {made.v_width} "
    line = f"{v}-> {picked}"
    if picked in FUSED:
        ok = True
        if picked not in expected:  # fine: sdpa.py's rules only decide whether to pad V
            line += f" (fused; sdpa.py's rules expected {', '.join(expected) or 'none'})"
    elif picked == "math":
        ok = False
        line += (" (the math fallback, T×T memory; sdpa.py expected " + ", ".join(expected) + ")"
                 if expected else " (the math fallback, T×T memory: no fused kernel takes this call here)")
    else:
        ok = False
        line += (" (no SDPA backend accepts this call; sdpa.py expected "
                 + (", ".join(expected) or "the math fallback") + ")")
    if pad:
        narrow = pick(call)
        line += (f"; padding needed here: V {call.v_width} -> {narrow}" if narrow not in FUSED
                 else f"; padding not needed on this torch: V {call.v_width} -> {narrow}")
    return ok, line


def torch_pick(batch: int, heads: int, seq_len: int, device: torch.device,
                dtype: torch.dtype) -> Pick:
    """PyTorch's own choice (``torch._fused_sdp_choice``) for calls of this shape."""
    from torch.nn.attention import SDPBackend

    names = {SDPBackend.FLASH_ATTENTION: "flash", SDPBackend.EFFICIENT_ATTENTION: "efficient",
             SDPBackend.CUDNN_ATTENTION: "cudnn", SDPBackend.MATH: "math"}

    def pick(call: AttentionCall) -> str:
        kw = dict(device=device, dtype=dtype, requires_grad=True)
        q = torch.zeros(batch, heads, seq_len, call.qk_width, **kw)
        v = torch.zeros(batch, heads, seq_len, call.v_width, **kw)
        mask = (torch.ones(batch, 1, 1, seq_len, dtype=torch.bool, device=device)
                if call.masked else None)
        try:
            with warnings.catch_warnings():  # torch's reasons for refusing: the line says it
                warnings.simplefilter("ignore")
                choice = SDPBackend(int(torch._fused_sdp_choice(
                    q, q, v, mask, 0.0, False, scale=1.0 / math.sqrt(call.v_width),
                    enable_gqa=False)))
        except RuntimeError:  # "No available kernel": every enabled backend refused
            return "none"
        return names.get(choice, "none" if choice == SDPBackend.ERROR else choice.name.lower())

    return pick


def check_sdpa(ctx: Context) -> Iterator[Check]:
    from hkt.mixers.sdpa import call_of

    seen = set()
    for job, cfg in ctx.configs.items():
        if cfg.model.name not in ("mha", "hkt"):  # the mixer built, whatever the model's label
            continue
        h, t = int(cfg.model.n_heads), int(cfg.task.max_length)
        d = int(cfg.model.d_model) // h
        levels = int(cfg.model.mixer.levels) if cfg.model.name == "hkt" else 1
        if (t, h, d, levels) in seen:  # what the kernel choice depends on
            continue
        seen.add((t, h, d, levels))
        pick = torch_pick(2, h, t, ctx.device, ctx.dtype)
        q = torch.zeros(2, h, t, levels * d, device=ctx.device, dtype=ctx.dtype)
        v = torch.zeros(2, h, t, d, device=ctx.device, dtype=ctx.dtype)
        lines, ok = [], True
        for mask in (torch.ones(2, 1, 1, t, dtype=torch.bool, device=ctx.device), None):
            good, line = sdpa_verdict(call_of(q, v, mask, 0.0), pick)
            ok &= good
            lines.append(f"{'masked' if mask is not None else 'unmasked'}: {line}")
        yield Check(f"sdpa {job_name(job)}", ok,
                    f"T={t}, H={h}, q/k width {levels * d}, {ctx.precision}; " + "; ".join(lines))
