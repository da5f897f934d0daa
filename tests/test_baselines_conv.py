"""The causal depthwise-convolution mixer (hkt/mixers/conv.py): a baseline made by recipe (a)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hkt.mixers import MIXERS, build_mixer
from hkt.models import EncoderConfig, build_model
from hkt.train.run_config import compose_train


def small_cfg(name: str) -> dict:
    cfg = dataclasses.asdict(EncoderConfig(name=name))
    cfg.update(d_model=16, n_heads=2, d_ffn=32, n_layers=2)
    return cfg


def conv_cfg(**overrides) -> dict:
    cfg = small_cfg("conv")
    cfg["mixer"] = dict(cfg["mixer"], kernel_size=5)
    cfg.update(overrides)
    return cfg


def test_registered_by_name_and_config_matches():
    assert "conv" in MIXERS
    cfg = compose_train(["model=conv"]).model
    assert cfg.name == "conv" and cfg.mixer.kernel_size == 128
    # the model config's keys are the same as MHA's, so profiles size every model alike
    assert set(cfg) == set(compose_train(["model=mha"]).model)


def test_causal_by_gradients():
    torch.manual_seed(0)
    mixer = build_mixer("conv", d_model=8, n_heads=2, kernel_size=3).double()
    x = torch.randn(1, 10, 8, dtype=torch.double, requires_grad=True)
    y = mixer(x)
    for i in range(10):
        (g,) = torch.autograd.grad(y[0, i].sum(), x, retain_graph=True)
        seen = g[0].abs().sum(-1) > 0
        assert not seen[i + 1:].any(), f"position {i} sees the future"
        assert seen[max(0, i - 2): i + 1].all(), f"position {i} misses its window"
        assert not seen[: max(0, i - 2)].any(), f"position {i} sees beyond the kernel"


def pad_mask(batch: int, length: int) -> torch.Tensor:
    """Padding on the left of row 0 and in the middle of row 1: a causal conv sees both."""
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[0, :3] = False
    mask[1, 3:6] = False
    return mask


def test_padding_does_not_leak():
    torch.manual_seed(0)
    mixer = build_mixer("conv", d_model=8, n_heads=2, kernel_size=4).double().eval()
    mask = pad_mask(2, 12)
    x = torch.randn(2, 12, 8, dtype=torch.double)
    zero, noisy = x.masked_fill(~mask[..., None], 0.0), x.clone()
    noisy[~mask] = 1e3 * torch.randn(int((~mask).sum()), 8, dtype=torch.double)
    # the real positions right after each pad have it inside their window
    torch.testing.assert_close(mixer(noisy, mask)[mask], mixer(zero, mask)[mask])


def test_model_logits_ignore_padding():
    torch.manual_seed(0)
    model = build_model(conv_cfg(), vocab_size=12, num_classes=3, max_length=64).double().eval()
    mask = pad_mask(2, 21)
    tokens = torch.randint(1, 12, (2, 21))
    base = model(tokens.masked_fill(~mask, 0), mask)
    for seed in range(3):  # other ids at the padded positions: the same logits
        other = tokens.masked_scatter(~mask, torch.randint(
            1, 12, (int((~mask).sum()),), generator=torch.Generator().manual_seed(seed)))
        torch.testing.assert_close(model(other, mask), base, atol=1e-10, rtol=0)


def test_model_trains_and_differs_from_mha_only_in_mixer():
    torch.manual_seed(0)
    conv = build_model(conv_cfg(), vocab_size=12, num_classes=3, max_length=64)
    mha = build_model(small_cfg("mha"), vocab_size=12, num_classes=3, max_length=64)
    non_mixer = lambda m: {k: v.shape for k, v in m.state_dict().items() if ".mixer." not in k}  # noqa: E731
    assert non_mixer(conv) == non_mixer(mha) and len(non_mixer(mha)) > 0
    tokens = torch.randint(1, 12, (4, 20))
    loss = torch.nn.functional.cross_entropy(conv(tokens, tokens != 0), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    assert all(p.grad is not None for p in conv.parameters() if p.requires_grad)


def test_internals_and_bad_arguments_are_clear():
    mixer = build_mixer("conv", d_model=8, n_heads=2, kernel_size=3)
    with pytest.raises(NotImplementedError, match="attention models"):
        mixer(torch.randn(1, 4, 8), return_internals=True)
    with pytest.raises(ValueError, match="kernel_size"):
        build_mixer("conv", d_model=8, n_heads=2, kernel_size=0)
    with pytest.raises(ValueError, match="activation"):
        build_mixer("conv", d_model=8, n_heads=2, activation="relu6")


@pytest.mark.parametrize("batch,channels,length,kernel", [
    (2, 3, 7, 3),    # length not a multiple of the kernel
    (3, 4, 10, 1),   # kernel 1: a per-channel scale
    (2, 2, 3, 5),    # kernel longer than the sequence
    (2, 4, 16, 4),   # whole blocks
    (1, 2, 1, 2),    # one position
])
def test_filter_gradient_is_the_convolutions(batch, channels, length, kernel):
    """The CPU filter gradient (one batched matmul) equals PyTorch's own conv1d gradient."""
    from hkt.mixers.conv import depthwise_filter_grad

    g = torch.Generator().manual_seed(kernel)
    h = torch.randn(batch, channels, length + kernel - 1, dtype=torch.double, generator=g,
                    requires_grad=True)
    w = torch.randn(channels, 1, kernel, dtype=torch.double, generator=g, requires_grad=True)
    grad = torch.randn(batch, channels, length, dtype=torch.double, generator=g)
    (expected,) = torch.autograd.grad(torch.nn.functional.conv1d(h, w, groups=channels), w, grad)
    torch.testing.assert_close(depthwise_filter_grad(h.detach(), grad, kernel), expected,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_mixer_gradients_are_those_of_the_plain_convolution(bias):
    """Every parameter's and the input's gradient through the CPU path equals the gradient of the
    mixer written with nn.Conv1d's own autograd (the path other devices take)."""
    torch.manual_seed(0)
    from hkt.mixers.conv import CausalConvMixer

    mixer = CausalConvMixer(8, 2, kernel_size=5, bias=bias).double()
    mask = pad_mask(2, 13)
    x = torch.randn(2, 13, 8, dtype=torch.double, requires_grad=True)

    def plain(x):
        v = mixer.v_proj(x) * mask.unsqueeze(-1).double()
        h = torch.nn.functional.pad(v.transpose(1, 2), (mixer.config.kernel_size - 1, 0))
        c = torch.nn.functional.conv1d(h, mixer.conv.weight, mixer.conv.bias, groups=8)
        return mixer.out_proj(torch.nn.functional.gelu(c.transpose(1, 2)))

    inputs = [x, *mixer.parameters()]
    out = mixer(x, mask)
    torch.testing.assert_close(out, plain(x), rtol=0, atol=0)  # the forward is PyTorch's own
    grad = torch.randn_like(out)
    for ours, expected in zip(torch.autograd.grad(out, inputs, grad),
                              torch.autograd.grad(plain(x), inputs, grad)):
        torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda x: mixer(x, mask), (x,))
