"""What every token mixer shares: its constructor (:class:`TokenMixer`), argument checks, masks,
and the record of an attention's internals (what ``return_internals=True`` gives, for
analysis)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn


@dataclass
class AttentionInternals:
    """Per-level quantities of one forward pass, for analysis (never built on the normal path).

    Lists have one entry per level l = 0..L-1 (one entry for MHA). Coarse tensors are cropped to
    the level's length for the unpadded input, T_l = ceil(T / s^l).
    """

    features: list[Tensor]  # X^(l): (B, T_l, D), the level's input to its Q/K projections
    queries: list[Tensor]  # Q^(l): (B, H, T_l, d)
    keys: list[Tensor]  # K^(l): (B, H, T_l, d)
    scores: list[Tensor]  # S^(l) = Q^(l) K^(l)^T / sqrt(d): (B, H, T_l, T_l), before upsampling
    lambdas: Tensor  # fusion weights λ: (B, H, T, L), non-negative, summing to 1 over L
    level_masks: list[Tensor | None] = field(default_factory=list)  # (B, T_l) real positions


def cpu_float(x: Tensor) -> bool:
    """A CPU tensor of float32/64 outside autocast: where our CPU-only kernels (HKT's blockwise
    attention, the conv mixer's filter gradient) replace PyTorch's generic path."""
    return (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            and not torch.is_autocast_enabled("cpu"))


def check_heads(d_model: int, n_heads: int) -> int:
    """Return the head width d = d_model / n_heads, or raise a ValueError saying why not."""
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    if d_model < 1 or d_model % n_heads != 0:
        raise ValueError(
            f"d_model ({d_model}) must be a positive multiple of n_heads ({n_heads}): "
            "each head gets d_model / n_heads channels"
        )
    return d_model // n_heads


def check_dropout(dropout: float, name: str = "dropout") -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {dropout}")


def check_key_mask(key_mask: Tensor | None, x: Tensor) -> None:
    """The key mask is boolean (B, T), True at real tokens."""
    if key_mask is None:
        return
    if key_mask.dtype != torch.bool:
        raise ValueError(f"key_mask must be a bool tensor (True = real token), got {key_mask.dtype}")
    if key_mask.shape != x.shape[:2]:
        raise ValueError(
            f"key_mask must have shape (batch, seq_len) = {tuple(x.shape[:2])}, "
            f"got {tuple(key_mask.shape)}"
        )


def sdpa_mask(key_mask: Tensor | None, causal: bool, seq_len: int) -> tuple[Tensor | None, bool]:
    """The (attn_mask, is_causal) pair for scaled_dot_product_attention.

    Without a key mask, causal attention uses the kernels' own ``is_causal`` path (no T×T mask).
    With one, the key mask broadcasts over queries as (B, 1, 1, T); in causal mode it is combined
    with the lower triangle.
    """
    if key_mask is None:
        return None, causal
    mask = key_mask[:, None, None, :]
    if causal:
        tri = torch.ones(seq_len, seq_len, dtype=torch.bool, device=key_mask.device).tril()
        mask = mask & tri
    return mask, False


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, D/H)."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, d) -> (B, T, H*d)."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def mixer_config(cls: type, config: Any, settings: dict[str, Any]) -> Any:
    """A mixer's settings: ``config`` (an instance of ``cls.config_class``) as given, or made from
    its fields given as keywords (``settings``); not both."""
    if config is None:
        return cls.config_class(**settings)  # type: ignore[attr-defined]
    if settings:
        raise TypeError(f"give {cls.__name__} a config or its fields as keywords, not both "
                        f"(got config and {', '.join(sorted(settings))})")
    return config


class TokenMixer(nn.Module):
    """The constructor every token mixer shares: ``Mixer(d_model, n_heads, causal=False,
    dropout=0.0, config=None, **keywords)``.

    ``config`` is an instance of the class's ``config_class`` (the mixer's own settings), or its
    fields are given as keywords; the other keywords are the mixer's construction options, the
    keyword-only parameters of its :meth:`build` (``bias``, …: not settings, so not in
    ``config``). The constructor checks the shared arguments, sets ``config``, ``d_model``,
    ``n_heads``, ``head_dim`` (d_model / n_heads), ``causal`` and ``dropout`` (registering no
    module), then calls :meth:`build`, which makes the mixer's own layers.
    """

    config_class: ClassVar[type]
    #: whether ``return_internals=True`` gives queries, keys and scores (``hkt analyze``)
    supports_internals: ClassVar[bool] = False

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, dropout: float = 0.0,
                 config: Any = None, **keywords: Any) -> None:
        super().__init__()
        fields = {f.name for f in dataclasses.fields(self.config_class)}
        options = [name for name, p in inspect.signature(self.build).parameters.items()
                   if p.kind is p.KEYWORD_ONLY]
        if unknown := sorted(set(keywords) - fields - set(options)):
            raise TypeError(f"{type(self).__name__} takes no argument {', '.join(unknown)} "
                            f"(settings of {self.config_class.__name__}: "
                            f"{', '.join(sorted(fields)) or 'none'}; options: "
                            f"{', '.join(options) or 'none'})")
        settings = {k: v for k, v in keywords.items() if k in fields}
        self.config = mixer_config(type(self), config, settings)
        self.head_dim = check_heads(d_model, n_heads)
        check_dropout(dropout)
        self.d_model, self.n_heads, self.causal, self.dropout = d_model, n_heads, causal, dropout
        self.build(self.config, **{k: v for k, v in keywords.items() if k not in fields})

    def build(self, config: Any) -> None:
        """Make the mixer's own layers from its settings ``config``; keyword-only parameters
        after it are the mixer's construction options."""
        raise NotImplementedError
