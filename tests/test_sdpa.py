"""Value padding of HKT's fused SDPA call: exact either way, and chosen per call (sdpa.py)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import hkt.mixers.hkt as hkt_module
from hkt.mixers import HKTAttention
from hkt.mixers.sdpa import AttentionCall, call_of, fused_backends, pad_value

D, H, T = 16, 2, 23  # head width d = 8; T is not a multiple of any stride power


def make_hkt(impl: str, **kwargs) -> HKTAttention:
    """An HKT layer in float64 with non-trivial parameters (zero-init fusion would hide bugs)."""
    torch.manual_seed(0)
    m = HKTAttention(D, H, impl=impl, **kwargs).double()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m


def outputs_and_grads(m: HKTAttention, x: torch.Tensor, mask: torch.Tensor | None):
    x = x.detach().clone().requires_grad_(True)
    y = m(x, mask)
    weights = torch.randn(y.shape, dtype=y.dtype, generator=torch.Generator().manual_seed(3))
    (y * weights).sum().backward()
    grads = {name: p.grad.clone() for name, p in m.named_parameters()}
    m.zero_grad(set_to_none=True)
    return y.detach(), x.grad, grads


CASES = [
    (levels, causal, masked, fusion, upsample)
    for levels, causal, masked, fusion, upsample in itertools.product(
        (1, 2, 3, 4), (False, True), (False, True), ("dynamic", "static"), ("nearest", "linear"))
    if not (causal and upsample == "linear")
]


@pytest.mark.parametrize("levels,causal,masked,fusion,upsample", CASES)
def test_unpadded_equals_padded_equals_materialised(levels, causal, masked, fusion, upsample,
                                                 monkeypatch):
    """Through the SDPA math backend in float64: outputs and every gradient agree whether V is
    padded to L·d or not, and agree with the materialised path."""
    x = torch.randn(2, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    mask = (torch.arange(T)[None, :] < torch.tensor([T, 15])[:, None]) if masked else None
    kw = dict(levels=levels, causal=causal, fusion=fusion, upsample=upsample)
    results = {}
    with sdpa_kernel(SDPBackend.MATH):
        for pad in (True, False):
            seen = []

            def decide(call, pad=pad, seen=seen):
                seen.append(call)
                return pad

            monkeypatch.setattr(hkt_module, "pad_value", decide)
            results[pad] = outputs_and_grads(make_hkt("sdpa", **kw), x, mask)
            assert seen, "the fused path did not consult the padding decision"
        results["materialised"] = outputs_and_grads(make_hkt("materialised", **kw), x, mask)

    ref_y, ref_gx, ref_g = results["materialised"]
    for pad in (True, False):
        y, gx, g = results[pad]
        torch.testing.assert_close(y, ref_y, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(gx, ref_gx, rtol=1e-10, atol=1e-12)
        assert g.keys() == ref_g.keys()
        for name in g:
            torch.testing.assert_close(g[name], ref_g[name], rtol=1e-10, atol=1e-12, msg=name)


def test_fused_path_pads_on_cpu_flash_and_not_under_math():
    """Left alone, the CPU decision pads (PyTorch's CPU flash kernel needs equal widths); with
    only the math backend enabled padding would be waste, so V stays narrow."""
    m = make_hkt("sdpa", levels=3)
    x = torch.randn(2, T, D, dtype=torch.float64)
    widths = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        widths.append(v.shape[-1])
        return real_sdpa(q, k, v, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
        m(x)
        with sdpa_kernel(SDPBackend.MATH):
            m(x)
    assert widths == [3 * D // H, D // H]


def test_fused_path_keeps_queries_in_the_projection_dtype(monkeypatch):
    """CUDA autocast computes λ's softmax in fp32 while the projections are bf16: q̃ must reach
    SDPA in bf16 (an fp32 q̃ would double its memory), as k̃ and V do."""
    m = HKTAttention(D, H, levels=3)
    seen = []

    def spy(q, k, v, **kwargs):
        seen.append((q.dtype, k.dtype, v.dtype))
        return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=v.dtype)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    from hkt.mixers.upsample import Upsampler

    q = [torch.randn(2, H, T, D // H, dtype=torch.bfloat16) for _ in range(3)]
    lam = torch.softmax(torch.randn(2, H, T, 3), dim=-1)  # fp32, as autocast leaves it
    v = torch.randn(2, H, T, D // H, dtype=torch.bfloat16)
    m._attend_fused(q, q, lam, v, None, False, Upsampler("nearest", 2, T, T), 0.0)
    assert seen == [(torch.bfloat16,) * 3]


# ----------------------------------------------------------------------------- the decision
def cuda(dtype=torch.bfloat16, qk=96, v=32, masked=True, cap=(9, 0), **kw) -> AttentionCall:
    """A CUDA call with the device faked (no GPU needed): HKT's shapes by default (L=3, d=32)."""
    return AttentionCall("cuda", dtype, qk, v, masked, capability=cap, **kw)


@pytest.mark.parametrize("call,pad,why", [
    (cuda(), False, "masked bf16 on sm90: memory-efficient/cuDNN take the narrow V"),
    (cuda(masked=False), False, "unmasked: memory-efficient takes the narrow V"),
    (cuda(qk=192, v=64), False, "IMDB's paper shape: memory-efficient (cuDNN: width > 128)"),
    (cuda(dtype=torch.float32), False, "fp32 on sm80+: alignment 4"),
    (cuda(dtype=torch.float16, cap=(7, 0)), False, "fp16 on V100: alignment 8"),
    (cuda(dtype=torch.float32, cap=(6, 0), qk=6, v=3), False, "pre-Volta fp32: alignment 1"),
    (cuda(qk=8, v=4), True, "V width 4 is not a multiple of 8; the padded call is"),
    (cuda(qk=12, v=4), False, "neither width aligned: math either way, padding is waste"),
    (cuda(dtype=torch.float32, cap=(7, 0), qk=8, v=4), False, "sm7x fp32: alignment 1"),
    (cuda(masked=False, enabled=frozenset({"flash", "math"})), True,
     "memory-efficient and cuDNN off, no mask: only flash, which needs equal widths"),
    (cuda(enabled=frozenset({"flash", "math"})), False, "flash refuses masks: math either way"),
    (cuda(cap=(13, 0)), False, "no fused kernel for this architecture: math either way"),
    (cuda(qk=32, v=32), False, "equal widths (L=1): nothing to pad"),
    (AttentionCall("cpu", torch.float32, 96, 32, True), True, "CPU flash needs equal widths"),
    (AttentionCall("cpu", torch.bfloat16, 96, 32, False), True, "CPU flash, bf16"),
    (AttentionCall("cpu", torch.float32, 96, 32, True, dropout=True), False,
     "CPU flash refuses dropout: math either way"),
    (AttentionCall("cpu", torch.float64, 96, 32, True, enabled=frozenset({"math"})), False,
     "only the math backend enabled"),
    (AttentionCall("mps", torch.float32, 96, 32, True), True, "unknown rules: equal widths"),
])
def test_pad_value(call, pad, why):
    assert pad_value(call) is pad, why


def test_fused_backends_follow_pytorchs_rules():
    """Flash needs equal widths and no mask; memory-efficient takes a narrower V; cuDNN needs
    both widths ≤ 128 and fp16/bf16, and not deterministic algorithms."""
    assert fused_backends(cuda(masked=False, v=96)) == ("flash", "efficient", "cudnn")
    assert fused_backends(cuda(masked=True, v=96)) == ("efficient", "cudnn")
    assert fused_backends(cuda(masked=False)) == ("efficient", "cudnn")
    assert fused_backends(cuda(qk=192, v=64)) == ("efficient",)
    assert fused_backends(cuda(dtype=torch.float32)) == ("efficient",)
    assert fused_backends(cuda(deterministic=True)) == ("efficient",)
    assert fused_backends(cuda(dtype=torch.bfloat16, cap=(7, 5))) == ()  # bf16 needs sm80+
    assert fused_backends(cuda(masked=False, qk=320, v=320)) == ("efficient",)  # flash: ≤ 256


def test_call_of_reads_autocast_dtype_and_enabled_backends():
    q = torch.randn(1, 1, 4, 12)
    v = torch.randn(1, 1, 4, 4)
    plain = call_of(q, v, None, 0.0)
    assert (plain.device, plain.dtype, plain.qk_width, plain.v_width, plain.masked) == (
        "cpu", torch.float32, 12, 4, False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert call_of(q, v, torch.ones(1, 1, 1, 4, dtype=torch.bool), 0.1).dtype == torch.bfloat16
    with sdpa_kernel(SDPBackend.MATH):
        assert call_of(q, v, None, 0.0).enabled == frozenset({"math"})


@pytest.mark.parametrize("deterministic", [False, True])
def test_padding_decision_compiles_without_graph_breaks(deterministic):
    """``train.compile`` wraps the model in torch.compile on CUDA: the per-call decision must not
    break the graph in every layer (the backend flags are not traceable)."""
    m = HKTAttention(D, H, levels=3, impl="sdpa")  # the path CUDA takes
    x, mask = torch.randn(2, T, D), torch.ones(2, T, dtype=torch.bool)
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    try:
        torch._dynamo.reset()
        y = torch.compile(m, backend="eager", fullgraph=True)(x, mask)
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.testing.assert_close(y, m(x, mask))
