"""Attention modules by name, so that models are built from config.

Adding an attention: write a module whose constructor takes ``d_model``, ``n_heads``,
``causal`` and ``dropout`` (plus its own keyword arguments) and whose forward is
``forward(x, key_mask=None, *, return_internals=False)``; decorate it with
``@register("name")``; import its module in ``hkt/attention/__init__.py``; add
``config/model/name.yaml`` whose ``attention:`` node holds its own arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

ATTENTION: dict[str, type[nn.Module]] = {}


def register(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: make an attention module available as ``name``."""

    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if name in ATTENTION and ATTENTION[name] is not cls:
            raise ValueError(f"attention {name!r} is already registered to {ATTENTION[name]!r}")
        ATTENTION[name] = cls
        return cls

    return deco


def build_attention(
    name: str, *, d_model: int, n_heads: int, causal: bool = False, dropout: float = 0.0, **kwargs: Any
) -> nn.Module:
    """Instantiate the attention registered as ``name``."""
    if name not in ATTENTION:
        known = ", ".join(sorted(ATTENTION))
        raise ValueError(f"unknown attention {name!r}; registered: {known}")
    return ATTENTION[name](d_model=d_model, n_heads=n_heads, causal=causal, dropout=dropout, **kwargs)
