"""The token mixers by name, so that models are built from config: ``model.name: s4d`` is the
class registered as ``"s4d"``.

:data:`MIXERS` is a :class:`hkt.plugin_registry.Registry` of the package ``hkt.mixers``, whose
``__init__`` imports each of the project's mixers by name (a reader, or a static tool, follows a
name to its class; the mixers import :func:`register` from here, so the list cannot be here). A
module added to ``hkt/mixers/`` without a line there is still found, since every module of the
package is imported before the first lookup, and one that fails to import is skipped with one
warning while every other mixer keeps working.

Adding a mixer: write ``hkt/mixers/name.py`` with a module whose constructor takes ``d_model``,
``n_heads``, ``causal``, ``dropout`` and ``config``, an instance of its own settings dataclass
named by the class attribute ``config_class`` (defaults and checks in the dataclass:
``hkt.mixers.hkt``'s ``HKTConfig`` is the example): a subclass of
:class:`hkt.mixers.base.TokenMixer` has that constructor and writes only ``build``, and reads
its settings from ``self.config``; its forward is
``forward(x, key_mask=None, *, return_internals=False)``; decorate it with ``@register("name")``
and import it in ``hkt/mixers/__init__.py``; add ``config/model/name.yaml``, which selects the
structured config ``/schema/model/name`` (registered with Hydra for every registered mixer) and
overrides what it needs. Parameters with their own learning rate or weight decay are declared by
the module's ``optimizer_settings`` (:mod:`hkt.train.optim`); a model's own ``optim.lr`` lives in
``config/model_optim/name.yaml``. The whole recipe: docs/extending.md, recipe (a), "A new token
mixer".
"""

from __future__ import annotations

from typing import Any

from torch import nn

from hkt.mixers.base import mixer_config
from hkt.plugin_registry import Registry


def _check_mixer(name: str, cls: Any) -> None:
    if not isinstance(getattr(cls, "config_class", None), type):
        raise TypeError(f"mixer {name!r}: {cls.__name__} needs a `config_class` "
                        "(the dataclass of its own settings)")


# name -> mixer class (nn.Module), in registration order
MIXERS = Registry("mixer", "hkt.mixers", check=_check_mixer)

# Class decorator: make a mixer available as ``name``.
register = MIXERS.register


def mixer_class(name: str) -> type[nn.Module]:
    """The mixer registered as ``name``, or a ValueError listing the registered ones."""
    return MIXERS.lookup(name)


def build_mixer(
    name: str, *, d_model: int, n_heads: int, causal: bool = False, dropout: float = 0.0,
    config: Any = None, **settings: Any,
) -> nn.Module:
    """Instantiate the mixer registered as ``name`` with its ``config`` (its ``config_class``),
    or with that config's fields given as keywords."""
    cls = mixer_class(name)
    return cls(d_model=d_model, n_heads=n_heads, causal=causal, dropout=dropout,
               config=mixer_config(cls, config, settings))

