"""Behaviour of the attention mixers (MHA, HKT) that users rely on: equalities, invariances,
errors. What every registered mixer keeps is tests/test_mixer_contract.py."""

from __future__ import annotations

import itertools

import pytest
import torch

from hkt.mixers import (
    HKTAttention,
    MultiHeadAttention,
    build_mixer,
    score_cost_limit,
    score_cost_ratio,
)
from hkt.mixers.hkt import IMPLS, HKTConfig, choose_kernel, truncate_levels

D, H = 16, 2
# the computations that run on any CPU; impl="tile" (Triton) is compared with the materialised path in
# tests/test_tile.py, in Triton's interpreter
CPU_IMPLS = tuple(impl for impl in IMPLS if impl != "tile")


def make_hkt(seed: int = 0, **kwargs) -> HKTAttention:
    """An HKT layer in float64 with non-trivial fusion weights (zero-init would hide bugs)."""
    torch.manual_seed(seed)
    m = HKTAttention(D, H, **kwargs).double()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m


def random_input(b: int = 2, t: int = 23, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, D, dtype=torch.float64, generator=g)


def prefix_mask(lengths: list[int], t: int) -> torch.Tensor:
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


COMBOS = [
    (fusion, upsample, causal, levels, stride, masked)
    for fusion, upsample, causal, levels, stride, masked in itertools.product(
        ("dynamic", "static"), ("nearest", "linear"), (False, True), (1, 2, 3, 4), (2, 4), (False, True)
    )
    if not (causal and upsample == "linear")
]


@pytest.mark.parametrize("fusion,upsample,causal,levels,stride,masked", COMBOS)
def test_fused_equals_materialised(fusion, upsample, causal, levels, stride, masked):
    """The factorised single-SDPA path computes exactly the paper's materialised scores."""
    t = 23  # not a multiple of any stride^(levels-1) > 1
    m = make_hkt(levels=levels, stride=stride, kernel_size=stride + 1, fusion=fusion,
                 upsample=upsample, causal=causal)
    x = random_input(t=t).requires_grad_(True)
    mask = prefix_mask([t, 15], t) if masked else None

    outputs, grads = [], []
    # fused through the CPU kernel wrapper, fused through plain autograd SDPA (the GPU path),
    # and the materialised path: the same layer's weights in three layers
    layers = {impl: HKTAttention(D, H, causal=causal, config=HKTConfig(**{**vars(m.config), "impl": impl})).double()
              for impl in CPU_IMPLS}
    for layer in layers.values():
        layer.load_state_dict(m.state_dict())
    for impl in ("fused", "sdpa", "materialised"):
        m = layers[impl]
        m.zero_grad()
        x.grad = None
        y = m(x, mask)
        weight = torch.randn_like(y, generator=torch.Generator().manual_seed(3))
        (y * weight).sum().backward()
        outputs.append(y.detach())
        grads.append([x.grad.clone()] + [p.grad.clone() for p in m.parameters() if p.grad is not None])
    for other in (1, 2):
        torch.testing.assert_close(outputs[0], outputs[other], atol=1e-6, rtol=0)
        assert len(grads[0]) == len(grads[other])
        for g_fused, g_other in zip(grads[0], grads[other]):
            torch.testing.assert_close(g_fused, g_other, atol=1e-6, rtol=0)


def test_fused_and_materialised_share_parameters():
    fused = HKTAttention(D, H, levels=3, impl="fused")
    ref = HKTAttention(D, H, levels=3, impl="materialised")
    assert fused.state_dict().keys() == ref.state_dict().keys()
    ref.load_state_dict(fused.state_dict())
    x = torch.randn(2, 20, D)
    torch.testing.assert_close(fused(x), ref(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_one_level_is_mha(causal, masked):
    """HKT with L=1 and the weights of an MHA is that MHA."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, causal=causal).double()
    hkt = HKTAttention(D, H, levels=1, causal=causal).double()
    for name in ("q_proj", "k_proj"):
        getattr(hkt, name)[0].load_state_dict(getattr(mha, name).state_dict())
    hkt.v_proj.load_state_dict(mha.v_proj.state_dict())
    hkt.out_proj.load_state_dict(mha.out_proj.state_dict())
    x = random_input(t=19)
    mask = prefix_mask([19, 7], 19) if masked else None
    for impl in CPU_IMPLS:
        layer = HKTAttention(D, H, causal=causal, levels=1, impl=impl).double()
        layer.load_state_dict(hkt.state_dict())
        torch.testing.assert_close(layer(x, mask), mha(x, mask), atol=1e-10, rtol=0)


HKT_VARIANTS = [
    dict(levels=3, stride=2, fusion="dynamic", upsample="nearest"),
    dict(levels=3, stride=2, fusion="static", upsample="linear"),
    dict(levels=2, stride=4, kernel_size=6, fusion="dynamic", upsample="linear"),
    dict(levels=4, stride=2, kernel_size=3, fusion="dynamic", upsample="nearest", causal=True),
]


@pytest.mark.parametrize("impl", ["fused", "materialised"])
@pytest.mark.parametrize("kwargs", HKT_VARIANTS)
def test_padding_invariance(kwargs, impl):
    """Outputs at real positions do not depend on how much padding the batch carries."""
    m = make_hkt(impl=impl, **kwargs)
    x = random_input(b=1, t=13)
    base = m(x, prefix_mask([13], 13))
    for extra in (1, 3, 8, 20):
        padded = torch.cat([x, 5.0 * torch.randn(1, extra, D, dtype=x.dtype)], dim=1)
        y = m(padded, prefix_mask([13], 13 + extra))
        torch.testing.assert_close(y[:, :13], base, atol=1e-9, rtol=0)
    # No mask at all is the same as an all-true mask.
    torch.testing.assert_close(m(x), base, atol=1e-12, rtol=0)


def test_causal_gradients_with_overlapping_pyramid_kernels():
    """In causal mode ∂y_i/∂x_j = 0 for every j > i, also where HKT's pyramid convolutions
    overlap (kernel_size > stride). Every mixer's default is checked by
    tests/test_mixer_contract.py."""
    torch.manual_seed(0)
    m = build_mixer("hkt", d_model=D, n_heads=H, causal=True, levels=3, stride=2,
                        kernel_size=3).double()
    t = 21
    x = random_input(b=1, t=t)
    jac = torch.autograd.functional.jacobian(lambda inp: m(inp).sum(-1), x)  # (1, T, 1, T, D)
    dep = jac[0, :, 0].abs().sum(-1)  # (T query, T input)
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    assert dep[future].max().item() == 0.0
    assert dep[~future].max().item() > 0.0  # the test can see dependence when there is some


@pytest.mark.parametrize("fusion", ["dynamic", "static"])
def test_fusion_weights_are_convex(fusion):
    m = make_hkt(levels=3, fusion=fusion)
    x = random_input(t=17)
    _, internals = m(x, return_internals=True)
    lam = internals.lambdas
    assert lam.shape == (2, H, 17, 3)
    assert (lam >= 0).all()
    torch.testing.assert_close(lam.sum(-1), torch.ones_like(lam[..., 0]), atol=1e-12, rtol=0)
    if fusion == "static":  # one λ per head, shared by all tokens and sequences
        assert torch.equal(lam, lam[:1, :, :1].expand_as(lam))
    else:
        assert not torch.allclose(lam[:, :, :1], lam)


def test_internals_expose_per_level_scores():
    m = make_hkt(levels=3, stride=2)
    x = random_input(t=17)
    y, internals = m(x, return_internals=True)
    torch.testing.assert_close(y, m(x), atol=0, rtol=0)  # the flag does not change the output
    assert [s.shape[-1] for s in internals.scores] == [17, 9, 5]
    assert [q.shape[2] for q in internals.queries] == [17, 9, 5]
    q, k = internals.queries[1], internals.keys[1]
    torch.testing.assert_close(internals.scores[1], q @ k.transpose(-1, -2) / (D // H) ** 0.5)


def test_level_truncation_renormalises():
    """Keeping all levels is the full model; keeping one is attention on level 0 only, with the
    full model's level-0 projections; leaving the block restores every level."""
    m = make_hkt(levels=3)
    x = random_input(t=16)
    full = m(x)
    with truncate_levels(m, 3):
        torch.testing.assert_close(m(x), full, atol=0, rtol=0)
    with truncate_levels(m, 1):
        one, internals = m(x, return_internals=True)
    assert internals.lambdas.shape[-1] == 1
    torch.testing.assert_close(internals.lambdas, torch.ones_like(internals.lambdas))
    single = HKTAttention(D, H, levels=1).double()  # L=1: standard attention on level 0
    single.load_state_dict({k: v for k, v in m.state_dict().items()
                            if k.split(".")[0] in ("v_proj", "out_proj") or k.startswith(("q_proj.0.", "k_proj.0."))})
    torch.testing.assert_close(one, single(x), atol=1e-12, rtol=0)
    assert not torch.allclose(one, full)
    torch.testing.assert_close(m(x), full, atol=0, rtol=0)  # restored after the block


def test_level_truncation_restores_on_error_and_rejects_zero():
    m = make_hkt(levels=3)
    with pytest.raises(RuntimeError, match="boom"):
        with truncate_levels(m, 2):
            assert m.n_levels == 2
            raise RuntimeError("boom")
    assert m.n_levels == 3
    with truncate_levels(m, 7):  # more than the layer has: all of them
        assert m.n_levels == 3
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        with truncate_levels(m, 0):
            pass


def test_kernel_choice():
    """The CPU block kernel only where it applies; internals need the whole Q and K."""
    v = torch.zeros(1, H, 8, D // H)
    assert choose_kernel("fused", v, 0.0, False) == "cpu_blocks"
    assert choose_kernel("fused", v, 0.1, False) == "sdpa"  # dropout: the SDPA kernel's
    assert choose_kernel("fused", v, 0.0, True) == "sdpa"
    assert choose_kernel("sdpa", v, 0.0, False) == "sdpa"
    assert choose_kernel("materialised", v, 0.0, False) == "materialised"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert choose_kernel("fused", v, 0.0, False) == "sdpa"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(levels=0), "levels"),
        (dict(stride=1), "stride"),
        (dict(stride=2, kernel_size=1), "kernel_size"),
        (dict(upsample="linear", causal=True), "linear.*causal|causal"),
        (dict(fusion="mean"), "fusion"),
        (dict(upsample="cubic"), "upsample"),
        (dict(impl="triton"), "impl"),
        (dict(dropout=1.5), "dropout"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HKTAttention(D, H, **kwargs)


@pytest.mark.parametrize("cls", [MultiHeadAttention, HKTAttention])
def test_heads_must_divide_width(cls):
    with pytest.raises(ValueError, match="d_model .*n_heads"):
        cls(10, 3)


@pytest.mark.parametrize("cls", [MultiHeadAttention, HKTAttention])
def test_bad_mask_raises(cls):
    m = cls(D, H)
    x = torch.randn(2, 8, D)
    with pytest.raises(ValueError, match="key_mask must have shape"):
        m(x, torch.ones(2, 9, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_mask must be a bool"):
        m(x, torch.ones(2, 8))


def test_score_cost_ratio():
    assert score_cost_ratio(1, 2) == 1.0
    assert score_cost_ratio(3, 2) == 1.3125
    assert score_cost_ratio(2, 4) == 1.0625
    assert score_cost_ratio(40, 2) == pytest.approx(4 / 3, abs=1e-12)
    assert all(score_cost_ratio(n, 2) < score_cost_limit(2) for n in range(1, 12))
    with pytest.raises(ValueError, match="levels"):
        score_cost_ratio(0, 2)


@pytest.mark.parametrize("kernel_size,stride", [(2, 2), (3, 2), (4, 4), (7, 4)])
def test_pyramid_convolution_is_the_causal_depthwise_conv(kernel_size, stride):
    """The pyramid's strided multiply-adds compute nn.Conv1d on the left-padded input."""
    from hkt.mixers.pyramid import PyramidLevel

    torch.manual_seed(0)
    level = PyramidLevel(D, stride, kernel_size, 1e-5).double()
    x = torch.randn(3, 8 * stride, D, dtype=torch.float64, requires_grad=True)
    y = level._conv(x)
    padded = torch.nn.functional.pad(x.transpose(1, 2), (kernel_size - 1, 0))
    expected = level.conv(padded).transpose(1, 2)
    torch.testing.assert_close(y, expected, atol=1e-12, rtol=0)
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, level.conv.weight, level.conv.bias), g)
    grads_ref = torch.autograd.grad(expected, (x, level.conv.weight, level.conv.bias), g)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize("chunk_mib", [1e-9, 0.002])  # one head per block; a few sequences per block
@pytest.mark.parametrize("fusion", ["dynamic", "static"])
def test_cpu_kernel_blocks_agree(chunk_mib, fusion, monkeypatch):
    """However the CPU wrapper splits (sequences, heads) into blocks, it computes the same."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # allow one-head blocks
    torch.manual_seed(0)
    x = random_input(b=5, t=29).requires_grad_(True)
    mask = prefix_mask([29, 3, 17, 29, 11], 29)
    results = []
    for impl, chunk in (("materialised", 16.0), ("fused", chunk_mib)):
        m = make_hkt(levels=3, stride=2, kernel_size=3, fusion=fusion, impl=impl, chunk_mib=chunk)
        x.grad = None
        y = m(x, mask)
        (y * torch.randn_like(y, generator=torch.Generator().manual_seed(3))).sum().backward()
        results.append((y.detach(), x.grad.clone(), [p.grad.clone() for p in m.parameters()]))
    (y_ref, gx_ref, gp_ref), (y, gx, gp) = results
    torch.testing.assert_close(y, y_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(gx, gx_ref, atol=1e-6, rtol=0)
    for a, b in zip(gp, gp_ref):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
