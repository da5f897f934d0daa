"""The contract every registered token mixer keeps (``hkt.attention.ATTENTION``), checked for each
one without naming any: a mixer added as a file in ``hkt/attention/`` is tested by this file.

* shape: ``forward(x[B, T, D], key_mask[B, T])`` returns ``[B, T, D]``;
* key mask: a padded batch's real positions equal each sequence's unpadded run;
* causality: built with ``causal=True`` (unless the class says ``supports_causal = False``),
  ∂y_i/∂x_j is zero for j > i, up to rounding (S4D's FFT convolution leaks ~1e-16 relative);
* internals: a class with ``supports_internals`` returns ``(y, AttentionInternals)``;
* training: its ``config/model/NAME.yaml`` composes, and one optimizer step of a tiny model
  built from it (``hkt train``'s step) gives a finite loss and moves the mixer's weights.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from hkt.attention import ATTENTION, build_attention
from hkt.attention.base import AttentionInternals

D, H = 16, 2
MIXERS = sorted(ATTENTION)
CAUSAL_LEAK = 1e-12  # the largest future dependence allowed, relative to the largest one


def mixer(name: str, *, causal: bool = False, seed: int = 0) -> torch.nn.Module:
    """The mixer ``name`` with its default settings, float64, eval mode, non-trivial weights."""
    torch.manual_seed(seed)
    m = build_attention(name, d_model=D, n_heads=H, causal=causal).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def inputs(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(b, t, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_every_mixer_is_tested() -> None:
    """The registry holds the mixers the paper compares, so the list below is not empty."""
    assert {"mha", "hkt", "conv", "s4d"} <= set(MIXERS)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", MIXERS)
def test_output_has_the_input_shape(name: str, causal: bool) -> None:
    if causal and not getattr(ATTENTION[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    x = inputs(3, 19)
    mask = torch.arange(19)[None, :] < torch.tensor([19, 11, 4])[:, None]
    y = mixer(name, causal=causal)(x, mask)
    assert y.shape == x.shape and y.dtype == x.dtype and torch.isfinite(y).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", MIXERS)
def test_padding_changes_no_real_position(name: str, causal: bool) -> None:
    """Each sequence of a right-padded batch (junk in the padding) gives its real positions what
    it gives alone, unpadded and without a mask."""
    if causal and not getattr(ATTENTION[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    m = mixer(name, causal=causal)
    lengths, t = [13, 20, 1], 24
    batch = 5.0 * inputs(len(lengths), t, seed=2)
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    y = m(batch, mask)
    for i, n in enumerate(lengths):
        alone = m(batch[i : i + 1, :n])
        torch.testing.assert_close(y[i : i + 1, :n], alone, atol=1e-9, rtol=0,
                                   msg=lambda s: f"{name}, sequence {i} (length {n}): {s}")


@pytest.mark.parametrize("name", MIXERS)
def test_causal_mode_sees_no_future(name: str) -> None:
    if not getattr(ATTENTION[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    m, t = mixer(name, causal=True), 17
    x = inputs(1, t)
    jac = torch.autograd.functional.jacobian(lambda inp: m(inp).sum(-1), x)  # (1, T, 1, T, D)
    dep = jac[0, :, 0].abs().sum(-1)  # (query i, input j)
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    assert dep[~future].max() > 0  # the test sees dependence where there is some
    leak = float(dep[future].max() / dep.max())
    assert leak <= CAUSAL_LEAK, f"{name}: y_i depends on x_j, j > i (relative {leak:.1e})"


@pytest.mark.parametrize("name", MIXERS)
def test_internals_where_declared(name: str) -> None:
    """``supports_internals`` is a declared capability (what ``hkt analyze`` checks)."""
    cls = ATTENTION[name]
    assert isinstance(getattr(cls, "supports_internals", None), bool), \
        f"{cls.__name__} must state supports_internals: bool"
    if not cls.supports_internals:
        return
    x = inputs(2, 12)
    y, internals = mixer(name)(x, torch.ones(2, 12, dtype=torch.bool), return_internals=True)
    assert y.shape == x.shape and isinstance(internals, AttentionInternals)


@pytest.mark.parametrize("name", MIXERS)
def test_one_training_step(name: str) -> None:
    """``config/model/NAME.yaml`` composes, and one step of ``hkt train``'s optimizer and step on
    a tiny model of it is finite and changes the mixer's weights."""
    from hkt.models import build_model
    from hkt.train.config import compose_train
    from hkt.train.optim import build_optimizer
    from hkt.train.step import forward_backward

    cfg = compose_train([f"model={name}", "profile=smoke"], check_types=False)
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model_cfg.update(d_model=D, n_heads=H, d_ffn=2 * D, n_layers=1, match_params_of=None)
    torch.manual_seed(0)
    model = build_model(model_cfg, vocab_size=12, num_classes=3, max_length=32)
    opt, _ = build_optimizer(model, cfg.optim, 10, torch.device("cpu"))
    tokens = torch.randint(1, 12, (4, 32))
    mask = torch.arange(32)[None, :] < torch.tensor([32, 20, 9, 3])[:, None]
    labels = torch.tensor([0, 1, 2, 1])
    mixers = [mod for mod in model.modules() if isinstance(mod, ATTENTION[name])]
    assert mixers, f"the model of config/model/{name}.yaml has no {name} mixer"
    before = [p.detach().clone() for mod in mixers for p in mod.parameters()]
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    loss, _, _ = forward_backward(model, opt, params, tokens, mask, labels, amp=None, grad_clip=1.0)
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in params if p.grad is not None)
    opt.step()
    after = [p.detach() for mod in mixers for p in mod.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(after, before)), f"{name}'s weights did not move"
