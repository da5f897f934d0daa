"""The encoder's block options (issue 53): norm kind and place, FFN off, position embedding off;
BatchNorm over real positions only; the defaults build the Transformer block they always did."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hkt.errors import ConfigValueError
from hkt.models import EncoderConfig, build_model
from hkt.models.norms import MaskedBatchNorm
from hkt.workflow.job_configs import config_digest

S4_BLOCK = {"norm": "batch", "norm_place": "post", "d_ffn": 0, "positional": "none"}


def lengths_mask(lengths: list[int], t: int) -> torch.Tensor:
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


def padded(x: torch.Tensor, extra: int) -> torch.Tensor:
    """x (B, T, D) with ``extra`` more positions of padding (garbage, not zeros)."""
    return torch.cat([x, 100 * torch.randn(x.shape[0], extra, x.shape[2])], dim=1)


# --- BatchNorm under padding ------------------------------------------------------------------


def test_batchnorm_takes_its_statistics_over_real_positions_only():
    """A batch of mixed lengths: each real token's output is nn.BatchNorm1d's over the batch's
    real tokens alone, the running statistics are theirs, and padded positions are zero."""
    torch.manual_seed(0)
    lengths, t, d = [7, 3, 5], 7, 4
    x, mask = torch.randn(3, t, d), lengths_mask(lengths, t)
    x[~mask] = 1e3  # padding that would dominate the statistics if it counted
    ours, ref = MaskedBatchNorm(d), nn.BatchNorm1d(d)
    y = ours(x, mask)
    real = torch.cat([x[i, :n] for i, n in enumerate(lengths)])  # (15, D): the real tokens
    torch.testing.assert_close(y[mask], ref(real), rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.running_mean, ref.running_mean, rtol=0, atol=1e-7)
    torch.testing.assert_close(ours.running_var, ref.running_var, rtol=0, atol=1e-6)
    assert torch.equal(y[~mask], torch.zeros_like(y[~mask]))
    assert int(ours.num_batches_tracked) == 1


def test_batchnorm_outputs_do_not_depend_on_how_much_padding_the_batch_carries():
    torch.manual_seed(1)
    lengths, t, d = [6, 2, 4], 6, 5
    x, mask = torch.randn(3, t, d), lengths_mask(lengths, t)
    a, b = MaskedBatchNorm(d), MaskedBatchNorm(d)
    ya = a(x, mask)
    yb = b(padded(x, 9), lengths_mask(lengths, t + 9))
    torch.testing.assert_close(yb[:, :t][mask], ya[mask], rtol=0, atol=1e-6)
    assert torch.equal(a.running_mean, b.running_mean) and torch.equal(a.running_var, b.running_var)


def test_batchnorm_in_eval_mode_uses_its_running_statistics():
    """Eval mode: the running statistics, so a sequence's output is the same alone and in a
    padded batch of others, and nothing is updated."""
    torch.manual_seed(2)
    norm = MaskedBatchNorm(3)
    for _ in range(5):  # learn some running statistics
        norm(3 + 2 * torch.randn(4, 10, 3), lengths_mask([10, 4, 7, 1], 10))
    norm.eval()
    stats = (norm.running_mean.clone(), norm.running_var.clone())
    x, mask = torch.randn(2, 8, 3), lengths_mask([8, 5], 8)
    y = norm(x, mask)
    expect = (x - stats[0]) / torch.sqrt(stats[1] + norm.eps) * norm.weight + norm.bias
    torch.testing.assert_close(y[mask], expect[mask])
    torch.testing.assert_close(norm(x[1:, :5], None)[0], y[1, :5])
    assert torch.equal(norm.running_mean, stats[0]) and torch.equal(norm.running_var, stats[1])


def test_batchnorm_without_a_mask_is_pytorchs():
    torch.manual_seed(3)
    x = torch.randn(3, 5, 4)
    ours, ref = MaskedBatchNorm(4), nn.BatchNorm1d(4)
    torch.testing.assert_close(ours(x), ref(x.transpose(1, 2)).transpose(1, 2), rtol=0, atol=1e-6)


# --- the block ---------------------------------------------------------------------------------


def s4_model(**overrides) -> nn.Module:
    torch.manual_seed(0)
    cfg = {"name": "s4d", "d_model": 8, "n_layers": 2, "n_heads": 2, "dropout": 0.0,
           "emb_dropout": 0.0, **S4_BLOCK, **overrides}
    return build_model(cfg, vocab_size=11, num_classes=3, max_length=40)


def test_the_s4_block_is_post_norm_batchnorm_without_ffn_positions_or_final_norm():
    model = s4_model()
    assert model.pos is None and model.norm is None
    names = {n for n, _ in model.named_parameters()}
    assert not any(".ffn." in n or ".norm2." in n or n == "pos" for n in names)
    block = model.blocks[0]
    assert isinstance(block.norm1, MaskedBatchNorm) and block.ffn is None
    torch.manual_seed(4)
    x, mask = torch.randn(3, 9, 8), lengths_mask([9, 4, 6], 9)
    # BN(x + S4D(x)), exactly
    expect = MaskedBatchNorm(8)(x + block.mixer(x, mask), mask)
    torch.testing.assert_close(block(x, mask), expect, rtol=0, atol=0)


@pytest.mark.parametrize("train", [True, False])
def test_the_s4_block_model_ignores_padding_in_training_and_in_eval(train):
    """The whole S4-block model: logits do not change with more padding (training mode: the
    batch's BatchNorm statistics over real tokens), and in eval mode a sequence's logits are
    the same alone as in a mixed batch."""
    model = s4_model()
    model.train(train)
    torch.manual_seed(5)
    lengths, t = [12, 5, 9], 12
    tokens, mask = torch.randint(1, 11, (3, t)), lengths_mask(lengths, t)
    tokens[~mask] = 0
    y = model(tokens, mask)
    more = torch.cat([tokens, torch.zeros(3, 20, dtype=tokens.dtype)], dim=1)
    torch.testing.assert_close(model(more, lengths_mask(lengths, t + 20)), y, rtol=0, atol=1e-5)
    if not train:
        torch.testing.assert_close(model(tokens[1:2, :5], None), y[1:2], rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm", ["layer", "batch"])
@pytest.mark.parametrize("place", ["pre", "post"])
def test_every_norm_kind_and_place_trains(norm, place):
    """Each combination builds with its norms where they belong and takes a gradient step."""
    torch.manual_seed(6)
    model = build_model({"name": "mha", "d_model": 8, "n_heads": 2, "d_ffn": 16, "norm": norm,
                         "norm_place": place}, vocab_size=11, num_classes=3, max_length=16)
    kind = nn.LayerNorm if norm == "layer" else MaskedBatchNorm
    assert isinstance(model.blocks[0].norm1, kind) and isinstance(model.blocks[0].norm2, kind)
    assert (model.norm is None) == (place == "post")
    tokens, mask = torch.randint(1, 11, (4, 16)), lengths_mask([16, 3, 9, 12], 16)
    loss = nn.functional.cross_entropy(model(tokens, mask), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_the_defaults_are_the_transformer_block():
    """Pre-norm LayerNorm, an FFN, learned positions and a final LayerNorm: the state_dict keys
    every checkpoint of before issue 53 holds."""
    model = build_model({"name": "mha", "d_model": 8, "n_heads": 2, "d_ffn": 16, "n_layers": 1},
                        vocab_size=5, num_classes=2, max_length=4)
    assert [k for k in model.state_dict() if ".mixer." not in k] == [
        "pos", "embed.weight", "blocks.0.norm1.weight", "blocks.0.norm1.bias",
        "blocks.0.norm2.weight", "blocks.0.norm2.bias",
        "blocks.0.ffn.fc1.weight", "blocks.0.ffn.fc1.bias", "blocks.0.ffn.fc2.weight",
        "blocks.0.ffn.fc2.bias", "norm.weight", "norm.bias", "head.weight", "head.bias"]


# --- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key, value, why", [
    ("norm", "group", "must be one of layer, batch"),
    ("norm_place", "middle", "must be one of pre, post"),
    ("positional", "rotary", "must be one of learned, sinusoidal, none"),
    ("d_ffn", -1, "must be >= 0"),
])
def test_a_bad_block_setting_names_its_key(key, value, why):
    with pytest.raises(ConfigValueError, match=rf"config key '{key}' = .*: {why}"):
        EncoderConfig(name="mha", **{key: value})


def test_matching_a_size_needs_an_ffn():
    with pytest.raises(ConfigValueError, match=r"'match_params_of' = 'hkt': widens the FFN .* "
                                               r"d_ffn: 0 has none"):
        EncoderConfig(name="mha", d_ffn=0, match_params_of="hkt")


def test_a_block_option_is_part_of_the_config_digest():
    """A non-default block option is another run (its digest differs), as any setting is."""
    now = {"seed": 0, "model": {"name": "s4d", "d_model": 8, "norm": "layer", "norm_place": "pre",
                                "mixer": {"state_size": 4}}}
    for key, value in (("norm", "batch"), ("norm_place", "post")):
        other = {**now, "model": {**now["model"], key: value}}
        assert config_digest(other) != config_digest(now), key
    # and so is every other encoder setting: none is left out of the comparison
    import dataclasses

    from hkt.train.run_config import strip_for_compare

    every = {"seed": 0, "model": dataclasses.asdict(EncoderConfig(name="s4d", d_model=8))}
    assert set(strip_for_compare(every)["model"]) == {f.name for f in dataclasses.fields(EncoderConfig)}
