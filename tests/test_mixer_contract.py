"""The contract every registered token mixer keeps (``hkt.mixers.MIXERS``), checked for each
one without naming any: a mixer added as a file in ``hkt/mixers/`` is tested by this file.

* registry: ``build_mixer(name, …)`` gives an instance of the registered class, from its
  ``config_class``'s defaults or a given config; an unknown name is refused, listing the
  registered ones;
* constructor (a :class:`~hkt.mixers.base.TokenMixer`): the config's fields as keywords make
  the config given whole, both at once or an unknown keyword is refused by name;
* shape: ``forward(x[B, T, D], key_mask[B, T])`` returns ``[B, T, D]``;
* key mask: a padded batch's real positions equal each sequence's unpadded run, also at
  200-600 tokens (past every internal chunk and tile);
* causality: built with ``causal=True`` (unless the class says ``supports_causal = False``),
  ∂y_i/∂x_j is zero for j > i, up to rounding (S4D's FFT convolution leaks ~1e-16 relative),
  and at T = 600 a change from position k on leaves the outputs before k unchanged;
* reach: at T = 600 an output depends on the farthest input the mixer claims to see (the
  whole sequence, or its ``receptive_field``);
* internals: a class with ``supports_internals`` returns ``(y, AttentionInternals)``;
* bf16 autocast (the GPU's path) runs on CPU with finite outputs and gradients;
* training: its ``config/model/NAME.yaml`` composes, and one optimizer step of a tiny model
  built from it (``hkt train``'s step) gives a finite loss and moves the mixer's weights.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from hkt.mixers import MIXERS, build_mixer
from hkt.mixers.base import AttentionInternals, TokenMixer

D, H = 16, 2
NAMES = sorted(MIXERS)
CAUSAL_LEAK = 1e-12  # the largest future dependence allowed, relative to the largest one


def mixer(name: str, *, causal: bool = False, seed: int = 0) -> torch.nn.Module:
    """The mixer ``name`` with its default settings, float64, eval mode, non-trivial weights."""
    torch.manual_seed(seed)
    m = build_mixer(name, d_model=D, n_heads=H, causal=causal).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def inputs(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(b, t, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_every_mixer_is_tested() -> None:
    """The registry holds the mixers the paper compares, so the list below is not empty."""
    assert {"mha", "hkt", "conv", "s4d"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_the_registry_builds_each_mixer_by_name(name: str) -> None:
    cls = MIXERS[name]
    assert type(build_mixer(name, d_model=D, n_heads=H)) is cls
    assert type(build_mixer(name, d_model=D, n_heads=H, config=cls.config_class())) is cls


@pytest.mark.parametrize("name", [n for n in NAMES if issubclass(MIXERS[n], TokenMixer)])
def test_a_mixer_takes_its_config_or_its_fields_and_names_a_wrong_argument(name: str) -> None:
    cls = MIXERS[name]
    config = cls.config_class()
    fields = dict(vars(config))
    assert cls(D, H, **fields).config == config == cls(D, H, config=config).config
    if fields:
        with pytest.raises(TypeError, match=f"give {cls.__name__} a config or its fields as "
                                            "keywords, not both"):
            cls(D, H, config=config, **fields)
    with pytest.raises(TypeError, match=f"{cls.__name__} takes no argument nope "
                                        rf"\(settings of {cls.config_class.__name__}: "):
        cls(D, H, nope=1)


def test_an_unknown_mixer_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(ValueError, match=f"unknown mixer 'nope'; registered: {', '.join(NAMES)}"):
        build_mixer("nope", d_model=D, n_heads=H)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_output_has_the_input_shape(name: str, causal: bool) -> None:
    if causal and not getattr(MIXERS[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    x = inputs(3, 19)
    mask = torch.arange(19)[None, :] < torch.tensor([19, 11, 4])[:, None]
    y = mixer(name, causal=causal)(x, mask)
    assert y.shape == x.shape and y.dtype == x.dtype and torch.isfinite(y).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_padding_changes_no_real_position(name: str, causal: bool) -> None:
    """Each sequence of a right-padded batch (junk in the padding) gives its real positions what
    it gives alone, unpadded and without a mask."""
    if causal and not getattr(MIXERS[name], "supports_causal", True):
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


LONG = [600, 257, 200]  # longer than any internal chunk, block or tile (64, 128, 256), none a multiple


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_long_padded_sequences_give_what_each_gives_alone(name: str, causal: bool) -> None:
    """The padding contract at 200-600 tokens: state carried across a chunk or tile boundary
    (or lost there) shows here, not at the short lengths above."""
    if causal and not getattr(MIXERS[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    m, t = mixer(name, causal=causal), 608
    batch = 5.0 * inputs(len(LONG), t, seed=4)
    mask = torch.arange(t)[None, :] < torch.tensor(LONG)[:, None]
    with torch.no_grad():
        y = m(batch, mask)
        for i, n in enumerate(LONG):
            alone = m(batch[i : i + 1, :n])
            torch.testing.assert_close(y[i : i + 1, :n], alone, atol=1e-9, rtol=0,
                                       msg=lambda s: f"{name}, sequence {i} (length {n}): {s}")


@pytest.mark.parametrize("name", NAMES)
def test_causal_mode_sees_no_future_across_long_sequences(name: str) -> None:
    """Changing every input from position k on leaves the outputs before k as they were, for
    cuts inside and at the edges of internal chunks, at T = 600."""
    if not getattr(MIXERS[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    m, t = mixer(name, causal=True), 600
    x = inputs(1, t, seed=5)
    with torch.no_grad():
        y = m(x)
        for k in (63, 64, 65, 255, 256, 300, 599):
            changed = x.clone()
            changed[:, k:] += inputs(1, t - k, seed=k)
            z = m(changed)
            torch.testing.assert_close(z[:, :k], y[:, :k], atol=1e-9, rtol=0,
                                       msg=lambda s: f"{name}, cut at {k}: {s}")
            assert not torch.allclose(z[:, k:], y[:, k:])  # the change reaches the outputs after


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_an_output_sees_as_far_as_the_mixer_claims_at_long_lengths(name: str, causal: bool) -> None:
    """A whole-sequence mixer's last output depends on its first input 599 positions back (and,
    not causal, its first output on the last input); a local one (``receptive_field``, the
    convolution's kernel) on the farthest input it claims. A chunked mixer that carries no state
    past a chunk fails here."""
    if causal and not getattr(MIXERS[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    m, t = mixer(name, causal=causal), 600
    reach = getattr(m, "receptive_field", None) or t
    x = inputs(1, t, seed=6).requires_grad_(True)
    y = m(x)
    pairs = [(t - 1, t - reach)] + ([] if causal or reach < t else [(0, t - 1)])
    for out, far in pairs:
        (grad,) = torch.autograd.grad(y[0, out].sum(), x, retain_graph=True)
        assert grad[0, far].abs().max() > 1e-12, f"{name}: output {out} does not see input {far}"


@pytest.mark.parametrize("name", NAMES)
def test_causal_mode_sees_no_future(name: str) -> None:
    if not getattr(MIXERS[name], "supports_causal", True):
        pytest.skip(f"{name} has no causal mode")
    m, t = mixer(name, causal=True), 17
    x = inputs(1, t)
    jac = torch.autograd.functional.jacobian(lambda inp: m(inp).sum(-1), x)  # (1, T, 1, T, D)
    dep = jac[0, :, 0].abs().sum(-1)  # (query i, input j)
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    assert dep[~future].max() > 0  # the test sees dependence where there is some
    leak = float(dep[future].max() / dep.max())
    assert leak <= CAUSAL_LEAK, f"{name}: y_i depends on x_j, j > i (relative {leak:.1e})"


@pytest.mark.parametrize("name", NAMES)
def test_internals_where_declared(name: str) -> None:
    """``supports_internals`` is a declared capability (what ``hkt analyze`` checks)."""
    cls = MIXERS[name]
    assert isinstance(getattr(cls, "supports_internals", None), bool), \
        f"{cls.__name__} must state supports_internals: bool"
    if not cls.supports_internals:
        return
    x = inputs(2, 12)
    y, internals = mixer(name)(x, torch.ones(2, 12, dtype=torch.bool), return_internals=True)
    assert y.shape == x.shape and isinstance(internals, AttentionInternals)


@pytest.mark.parametrize("name", NAMES)
def test_one_training_step(name: str) -> None:
    """``config/model/NAME.yaml`` composes, and one step of ``hkt train``'s optimizer and step on
    a tiny model of it is finite and changes the mixer's weights."""
    from hkt.models import build_model
    from hkt.train.run_config import compose_train
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
    mixers = [mod for mod in model.modules() if isinstance(mod, MIXERS[name])]
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


@pytest.mark.parametrize("name", NAMES)
def test_bf16_autocast_runs(name: str) -> None:
    """The path the GPU uses (bf16 autocast) also runs on CPU, with finite outputs and grads."""
    torch.manual_seed(0)
    m = build_mixer(name, d_model=D, n_heads=H)
    x = torch.randn(2, 33, D, requires_grad=True)
    mask = torch.arange(33)[None, :] < torch.tensor([33, 20])[:, None]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(x, mask)
    y.float().sum().backward()
    assert torch.isfinite(y.float()).all() and torch.isfinite(x.grad).all()
