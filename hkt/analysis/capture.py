"""Read the attention internals of a model's forward pass without touching the normal path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from hkt.mixers import AttentionInternals


@contextmanager
def capture_internals(model: nn.Module) -> Iterator[list[list[AttentionInternals]]]:
    """While active, every call of ``model``'s mixers (attentions that expose their internals)
    also appends its internals.

    Yields one list per mixer (``model.mixer_modules()``), filled by each forward pass. The
    modules are restored on exit.
    """
    modules = list(model.mixer_modules())
    captured: list[list[AttentionInternals]] = [[] for _ in modules]
    for i, attn in enumerate(modules):
        original = attn.forward

        def forward(x, key_mask=None, *, return_internals=False, _original=original, _i=i):
            y, internals = _original(x, key_mask, return_internals=True)
            captured[_i].append(internals)
            return (y, internals) if return_internals else y

        attn.forward = forward  # an instance attribute shadows the class's method
    try:
        yield captured
    finally:
        for attn in modules:
            attn.__dict__.pop("forward", None)
