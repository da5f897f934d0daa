"""Encoder classifier for sequence classification: embed, residual blocks, pool, classify.

The token mixer is chosen by registry name (:data:`hkt.mixers.MIXERS`), so MHA, HKT and every
other registered mixer share every other part of the model and differ only where the paper says
they differ. The whole model is described by one :class:`EncoderConfig` (``config/model/*.yaml``),
which holds the mixer's own config (``HKTConfig``, ``MHAConfig``, ``ConvConfig``, …) under
``mixer`` (a convolution or a state space model is not attention, hence not ``attention``).

The block is a Transformer's by default (pre-norm LayerNorm, an FFN after the mixer, learned
positions, a final LayerNorm). Its parts are settings, so that a model family's own block can be
composed from config: S4's LRA block is ``norm: batch``, ``norm_place: post``, ``d_ffn: 0``,
``positional: none`` (``x = BN(x + S4(x))``, no position embedding, no final norm).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from hkt.mixers import MIXERS, build_mixer, mixer_class
from hkt.value_checks import boolean, choice, integer, label, number
from hkt.dropout import Dropout
from hkt.errors import ConfigError, ConfigValueError, did_you_mean
from hkt.models.norms import NORMS, make_norm

POSITIONALS = ("learned", "sinusoidal", "none")
NORM_PLACES = ("pre", "post")
POOLINGS = ("mean", "cls")


@dataclass
class EncoderConfig:
    """The encoder classifier's settings: ``model`` in the training config.

    Attributes:
        name: registry name of the token mixer (``hkt``, ``mha``, ``conv``, …).
        d_model: model width D.
        n_layers: encoder blocks.
        n_heads: heads H; head width d = D / H (D must be a multiple of H).
        d_ffn: feed-forward hidden width; 0: no FFN (the block is the mixer alone, as S4's).
        dropout: residual and FFN dropout.
        mixer_dropout: the mixer's own dropout (an attention's on its probabilities, the conv
            mixer's on its output).
        emb_dropout: dropout after embedding + positions.
        positional: ``learned`` or ``sinusoidal`` positions, or ``none`` (the token embedding
            alone: an SSM or a convolution knows order without them).
        pooling: ``mean`` over real tokens, or ``cls`` (a learned token prepended).
        causal: a causal mixer in every block (no position sees a later one).
        norm: ``layer`` (LayerNorm) or ``batch`` (BatchNorm, statistics over real positions
            only: :class:`hkt.models.norms.MaskedBatchNorm`).
        norm_place: ``pre`` (``x + f(norm(x))``, and a final norm after the last block) or
            ``post`` (``norm(x + f(x))``, no final norm), for the mixer and the FFN alike.
        norm_eps: the norm's epsilon.
        mixer: the token mixer's own config, an instance of its registered class's
            ``config_class`` (a mapping of its fields is converted; null/absent means its
            defaults).
        match_params_of: another mixer's name, or null. Not a model setting: ``hkt train``
            widens ``d_ffn`` until this model has as many parameters as that mixer's model
            of the same sizes (the size-matched baseline, ``variant=mha_matched``).
    """

    name: str = "hkt"
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 2
    d_ffn: int = 128
    dropout: float = 0.1
    mixer_dropout: float = 0.0
    emb_dropout: float = 0.1
    positional: str = "learned"
    pooling: str = "mean"
    causal: bool = False
    norm: str = "layer"
    norm_place: str = "pre"
    norm_eps: float = 1e-5
    mixer: Any = None
    match_params_of: str | None = None

    def __post_init__(self) -> None:
        label(self.name, "name")
        if self.name not in MIXERS:
            raise ConfigValueError("name", self.name, "no mixer registered under this name "
                                                  f"(known: {', '.join(sorted(MIXERS))})"
                                                  + did_you_mean(self.name, MIXERS))
        for key in ("d_model", "n_layers", "n_heads"):
            integer(getattr(self, key), key, 1)
        integer(self.d_ffn, "d_ffn", 0)
        if self.d_model % self.n_heads:
            raise ConfigValueError("d_model", self.d_model,
                                   f"must be a multiple of n_heads ({self.n_heads}): each head "
                                   "gets d_model / n_heads")
        for key in ("dropout", "mixer_dropout", "emb_dropout"):
            number(getattr(self, key), key, 0, 1, hi_open=True)
        choice(self.positional, "positional", POSITIONALS)
        choice(self.pooling, "pooling", POOLINGS)
        boolean(self.causal, "causal")
        choice(self.norm, "norm", NORMS)
        choice(self.norm_place, "norm_place", NORM_PLACES)
        number(self.norm_eps, "norm_eps", 0, lo_open=True)
        if self.match_params_of is not None and self.match_params_of not in MIXERS:
            raise ConfigValueError("match_params_of", self.match_params_of,
                                   f"must be null or a mixer name ({', '.join(sorted(MIXERS))})")
        if self.match_params_of is not None and self.d_ffn == 0:
            raise ConfigValueError("match_params_of", self.match_params_of,
                                   "widens the FFN to match a size, and d_ffn: 0 has none; "
                                   "set d_ffn >= 1 or match_params_of: null")
        self.mixer = _mixer_config(self.name, self.mixer)
        try:
            getattr(self.mixer, "check_causal", lambda causal: None)(self.causal)
        except ConfigValueError as exc:
            raise (exc.under("mixer") if exc.key != "causal" else exc) from None
        try:  # a mixer whose settings depend on the width (S4D's n_ssm must divide it)
            getattr(self.mixer, "check_width", lambda d_model: None)(self.d_model)
        except ConfigValueError as exc:
            raise exc.under("mixer") from None

    def check_length(self, max_length: int) -> None:
        """Refuse mixer settings that the task's sequence length cannot hold (HKT's levels:
        :meth:`hkt.mixers.hkt.HKTConfig.check_length`); the key is ``mixer.…``."""
        try:
            getattr(self.mixer, "check_length", lambda max_length: None)(max_length)
        except ConfigValueError as exc:
            raise exc.under("mixer") from None

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | DictConfig) -> EncoderConfig:
        """From a ``model`` config node; unknown keys and bad values raise ConfigValueError."""
        if isinstance(cfg, DictConfig):
            cfg = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
        known = {f.name for f in dataclasses.fields(cls)}
        for key in cfg:
            if key not in known:
                raise ConfigValueError(str(key), cfg[key], "not a setting of the encoder "
                                                           f"(it has: {', '.join(sorted(known))})"
                                                           + did_you_mean(key, known))
        if "mixer" in cfg and cfg["mixer"] is None:
            raise ConfigValueError("mixer", None, f"must hold the '{cfg.get('name')}' "
                                   "mixer's settings (a mapping), not null; leave the "
                                   "overrides of model.mixer out to keep its defaults")
        return cls(**cfg)


def _mixer_config(name: str, settings: Any) -> Any:
    """The token mixer's config from a config instance, a mapping of its fields, or None."""
    config_class = mixer_class(name).config_class  # type: ignore[attr-defined]
    if isinstance(settings, config_class):
        return settings
    if settings is None:
        return config_class()
    if not isinstance(settings, Mapping):
        raise ConfigValueError("mixer", settings, f"must hold the '{name}' mixer's "
                                                      "settings (a mapping; {} for its defaults)")
    known = [f.name for f in dataclasses.fields(config_class)]
    for key in settings:
        if key not in known:
            raise ConfigValueError(f"mixer.{key}", settings[key],
                                   f"not a setting of the '{name}' mixer "
                                   f"(it has: {', '.join(known) or 'none'})"
                                   + did_you_mean(key, known))
    try:
        return config_class(**settings)
    except ConfigValueError as exc:
        raise exc.under("mixer") from None


def store_structured_configs() -> None:
    """Register ``/schema/model/NAME`` with Hydra for every registered mixer.

    ``config/model/NAME.yaml`` selects it, so Hydra knows every key and type of the model node
    at compose time (unknown keys and wrong types fail there) and the defaults are the
    dataclasses'.
    """
    from hydra.core.config_store import ConfigStore

    from hkt.config_compose import MODEL_SCHEMA_GROUP

    store = ConfigStore.instance()
    for name, cls in MIXERS.items():
        if _STORED.get(name) is cls:  # the store is the process's: once per mixer class
            continue
        node = EncoderConfig(name=name, mixer=cls.config_class())  # type: ignore[attr-defined]
        store.store(group=MODEL_SCHEMA_GROUP, name=name, node=node)
        _STORED[name] = cls


#: mixer name -> the class whose structured config the Hydra store holds
_STORED: dict[str, type] = {}


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """The fixed sin/cos position table of Vaswani et al. (2017): (length, d_model)."""
    position = torch.arange(length, dtype=torch.float64)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: d_model // 2])
    return table.float()


class FeedForward(nn.Module):
    """Position-wise MLP: Linear -> GELU -> Dropout -> Linear."""

    def __init__(self, d_model: int, d_ffn: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ffn)
        self.fc2 = nn.Linear(d_ffn, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.gelu(self.fc1(x))))


class EncoderBlock(nn.Module):
    """Residual block. Pre-norm (the default): x + Mixer(N(x)), then x + FFN(N(x)). Post-norm:
    N(x + Mixer(x)), then N(x + FFN(x)). N is LayerNorm or BatchNorm over real positions; with
    ``d_ffn`` 0 there is no FFN (nor its norm). Its mixer's state_dict keys start ``mixer.``."""

    def __init__(self, mixer: nn.Module, d_model: int, d_ffn: int, dropout: float, norm_eps: float,
                 norm: str = "layer", norm_place: str = "pre") -> None:
        super().__init__()
        self.pre = norm_place == "pre"
        self.norm1 = make_norm(norm, d_model, norm_eps)
        self.mixer = mixer
        self.norm2 = make_norm(norm, d_model, norm_eps) if d_ffn else None
        self.ffn = FeedForward(d_model, d_ffn, dropout) if d_ffn else None
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, key_mask: Tensor | None) -> Tensor:
        if self.pre:
            x = x + self.dropout(self.mixer(self.norm1(x, key_mask), key_mask))
            if self.ffn is None:
                return x
            return x + self.dropout(self.ffn(self.norm2(x, key_mask)))
        x = self.norm1(x + self.dropout(self.mixer(x, key_mask)), key_mask)
        if self.ffn is None:
            return x
        return self.norm2(x + self.dropout(self.ffn(x)), key_mask)


class EncoderClassifier(nn.Module):
    """Token embedding (+ positions) -> N blocks -> final norm (pre-norm only) -> pooling -> head.

    Args:
        config: the model's settings (:class:`EncoderConfig`, or a mapping of its fields).
        vocab_size: number of token ids, including padding id 0 (from the data).
        num_classes: output classes (from the task).
        max_length: longest sequence the positional encoding supports (from the task).
    """

    def __init__(self, config: EncoderConfig | Mapping[str, Any], vocab_size: int,
                 num_classes: int, max_length: int) -> None:
        super().__init__()
        if not isinstance(config, EncoderConfig):
            config = EncoderConfig.from_mapping(config)
        for name, value in (("vocab_size", vocab_size), ("num_classes", num_classes),
                            ("max_length", max_length)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        config.check_length(max_length)
        self.config = c = config
        d_model, pooling = c.d_model, c.pooling
        self.pooling, self.max_length = pooling, max_length
        # No padding_idx: padded positions are masked out of the mixer and pooling, so they get
        # no gradient anyway, and for CIFAR-10 id 0 is a real pixel value that must learn.
        self.embed = nn.Embedding(vocab_size, d_model)
        n_positions = max_length + (1 if pooling == "cls" else 0)
        self.pos: Tensor | None
        if c.positional == "learned":
            self.pos = nn.Parameter(torch.zeros(n_positions, d_model))
            nn.init.normal_(self.pos, std=0.02)
        elif c.positional == "sinusoidal":
            self.register_buffer("pos", sinusoidal_table(n_positions, d_model), persistent=False)
        else:
            self.pos = None
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model)) if pooling == "cls" else None
        self.emb_dropout = Dropout(c.emb_dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(
                build_mixer(c.name, d_model=d_model, n_heads=c.n_heads, causal=c.causal,
                            dropout=c.mixer_dropout, config=c.mixer),
                d_model, c.d_ffn, c.dropout, c.norm_eps, c.norm, c.norm_place,
            )
            for _ in range(c.n_layers)
        )
        # pre-norm leaves the residual stream unnormalised: one norm after the last block
        self.norm = make_norm(c.norm, d_model, c.norm_eps) if c.norm_place == "pre" else None
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        """tokens: (B, T) int ids; mask: (B, T) bool, True at real tokens. Returns (B, C) logits."""
        b, t = tokens.shape
        if t > self.max_length:
            raise ValueError(f"sequence length {t} exceeds max_length {self.max_length}")
        x = self.embed(tokens)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(b, 1, -1).to(x.dtype), x], dim=1)
            if mask is not None:
                mask = F.pad(mask, (1, 0), value=True)
        if self.pos is not None:
            x = x + self.pos[: x.shape[1]].to(x.dtype)
        x = self.emb_dropout(x)
        for block in self.blocks:
            x = block(x, mask)
        if self.norm is not None:
            x = self.norm(x, mask)
        if self.cls is not None:
            pooled = x[:, 0]
        elif mask is None:
            pooled = x.mean(dim=1)
        else:
            weights = mask.to(x.dtype).unsqueeze(-1)
            pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
        return self.head(pooled)

    def mixer_modules(self) -> list[nn.Module]:
        """The token mixer of each block, in order (for analysis)."""
        return [block.mixer for block in self.blocks]


def build_model(
    model_cfg: EncoderConfig | Mapping[str, Any], *, vocab_size: int, num_classes: int,
    max_length: int,
) -> EncoderClassifier:
    """Build the classifier described by a ``model`` config (an :class:`EncoderConfig` or a
    mapping of its fields, e.g. a run record's ``config.model``)."""
    return EncoderClassifier(model_cfg, vocab_size=vocab_size, num_classes=num_classes,
                             max_length=max_length)


def model_for(model_cfg: EncoderConfig | Mapping[str, Any], data: Any,
              max_length: int) -> EncoderClassifier:
    """The model of ``model_cfg`` (typed, or a ``model`` config node) for prepared data ``data``
    (anything with ``vocab_size``, ``num_classes`` and ``dir``, as :class:`hkt.train.data.RunData`),
    freshly initialised, for sequences of the task's ``max_length``. The config is valid (it was
    loaded): data it does not fit are one :class:`hkt.errors.ConfigError` naming them."""
    try:
        return build_model(model_cfg, vocab_size=data.vocab_size, num_classes=data.num_classes,
                           max_length=max_length)
    except ValueError as exc:
        raise ConfigError(f"the model cannot be built for the data in {data.dir}: {exc}") from None
