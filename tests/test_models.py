"""The encoder classifier: padding invariance of logits, config building, argument errors."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hkt.mixers import MIXERS
from hkt.models import EncoderClassifier, EncoderConfig, build_model


def model_cfg(name: str, **overrides) -> dict:
    """The model config of config/model/NAME.yaml (its dataclass defaults), small."""
    cfg = dataclasses.asdict(EncoderConfig(name=name))
    cfg.update(d_model=16, n_heads=2, d_ffn=32, n_layers=2)
    cfg.update(overrides)
    return cfg


@pytest.mark.parametrize("name", sorted(MIXERS))
@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "none"])
def test_logits_ignore_padding(name, pooling, positional):
    torch.manual_seed(0)
    model = build_model(model_cfg(name, pooling=pooling, positional=positional),
                        vocab_size=12, num_classes=5, max_length=64).double().eval()
    tokens = torch.randint(1, 12, (1, 21))
    base = model(tokens, torch.ones(1, 21, dtype=torch.bool))
    for extra in (1, 7, 30):
        padded = torch.cat([tokens, torch.zeros(1, extra, dtype=torch.long)], dim=1)
        mask = padded != 0
        torch.testing.assert_close(model(padded, mask), base, atol=1e-10, rtol=0)


def test_batch_equals_single_sequences():
    """A padded batch gives each sequence the logits it gets alone."""
    torch.manual_seed(0)
    model = build_model(model_cfg("hkt"), vocab_size=12, num_classes=5, max_length=64).double().eval()
    seqs = [torch.randint(1, 12, (n,)) for n in (5, 17, 30)]
    batch = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    logits = model(batch, batch != 0)
    for i, s in enumerate(seqs):
        alone = model(s[None], torch.ones(1, len(s), dtype=torch.bool))
        torch.testing.assert_close(logits[i : i + 1], alone, atol=1e-10, rtol=0)


def test_hkt_and_mha_differ_only_in_the_mixer():
    mha = build_model(model_cfg("mha"), vocab_size=12, num_classes=5, max_length=64)
    hkt = build_model(model_cfg("hkt"), vocab_size=12, num_classes=5, max_length=64)
    non_mixer = lambda m: {k: v.shape for k, v in m.state_dict().items() if ".mixer." not in k}  # noqa: E731
    assert non_mixer(mha) == non_mixer(hkt) and len(non_mixer(mha)) > 0
    assert sum(p.numel() for p in hkt.parameters()) > sum(p.numel() for p in mha.parameters())


def test_errors_name_the_argument():
    cfg = model_cfg("hkt")
    with pytest.raises(ValueError, match="pooling"):
        build_model({**cfg, "pooling": "max"}, vocab_size=12, num_classes=5, max_length=64)
    with pytest.raises(ValueError, match="positional"):
        build_model({**cfg, "positional": "rope"}, vocab_size=12, num_classes=5, max_length=64)
    with pytest.raises(ValueError, match="levels"):
        build_model({**cfg, "mixer": {**cfg["mixer"], "levels": 0}},
                    vocab_size=12, num_classes=5, max_length=64)
    with pytest.raises(ValueError, match="num_classes"):
        build_model(cfg, vocab_size=12, num_classes=1, max_length=64)
    model = build_model(cfg, vocab_size=12, num_classes=5, max_length=8)
    with pytest.raises(ValueError, match="max_length"):
        model(torch.ones(1, 9, dtype=torch.long))


def test_mixer_modules_listed():
    model = EncoderClassifier(EncoderConfig(name="hkt", d_model=16, n_layers=3, n_heads=2, d_ffn=32),
                              vocab_size=12, num_classes=3, max_length=16)
    assert len(model.mixer_modules()) == 3


def test_a_new_attention_brings_only_its_module_and_config(monkeypatch):
    """An attention with its own config class is built, validated and known to Hydra's store
    with nothing else changed (no branch on its name anywhere)."""
    from hydra.core.config_store import ConfigStore
    from torch import nn

    from hkt.mixers import MIXERS
    from hkt.value_checks import number
    from hkt.errors import ConfigValueError
    from hkt.models.encoder import store_structured_configs

    @dataclasses.dataclass
    class ScaleConfig:
        scale: float = 1.0

        def __post_init__(self) -> None:
            number(self.scale, "scale", 0, lo_open=True)

    class Scale(nn.Module):
        config_class = ScaleConfig

        def __init__(self, d_model, n_heads, causal=False, dropout=0.0, config=None):
            super().__init__()
            self.config = config
            self.proj = nn.Linear(d_model, d_model)

        def forward(self, x, key_mask=None, *, return_internals=False):
            return self.proj(x) * self.config.scale

    monkeypatch.setitem(MIXERS, "scale", Scale)
    model = build_model(model_cfg("scale", mixer={"scale": 2.0}), vocab_size=12, num_classes=3,
                        max_length=16)
    assert [m.config.scale for m in model.mixer_modules()] == [2.0, 2.0]
    assert model(torch.ones(1, 5, dtype=torch.long)).shape == (1, 3)
    with pytest.raises(ConfigValueError, match=r"'mixer.scale' = 0.0: must be > 0"):
        build_model(model_cfg("scale", mixer={"scale": 0.0}), vocab_size=12, num_classes=3,
                    max_length=16)
    with pytest.raises(ConfigValueError, match="'mixer.levels'.*not a setting of the 'scale'"):
        build_model(model_cfg("scale", mixer={"levels": 2}), vocab_size=12, num_classes=3,
                    max_length=16)
    store_structured_configs()
    assert "scale.yaml" in ConfigStore.instance().list("schema/model")
