"""Token mixers: the MHA baseline, HKT, the convolution and S4D mixers, and the catalog that
builds them by name (:mod:`hkt.mixers.catalog`).

Each of the project's mixers is imported below by name, which registers it: ``model.name: s4d``
is :class:`~hkt.mixers.s4d.S4DMixer`, decorated ``@register("s4d")``. A module added to this
package is found without a line here too (:data:`MIXERS` imports every module before its first
lookup), and one that fails to import is skipped with a warning, every other mixer still
working.
"""

from hkt.mixers.base import AttentionInternals
from hkt.mixers.catalog import MIXERS, build_mixer, mixer_class, register

# name -> class, in registration order: "mha", "hkt", "conv", "s4d"
from hkt.mixers.mha import MHAConfig, MultiHeadAttention
from hkt.mixers.hkt import (HKTAttention, HKTConfig, score_cost_limit, score_cost_ratio,
                            truncate_levels)
from hkt.mixers.conv import CausalConvMixer, ConvConfig
from hkt.mixers.s4d import S4DConfig, S4DMixer

__all__ = [
    "MIXERS",
    "AttentionInternals",
    "CausalConvMixer",
    "ConvConfig",
    "HKTAttention",
    "HKTConfig",
    "MHAConfig",
    "MultiHeadAttention",
    "S4DConfig",
    "S4DMixer",
    "build_mixer",
    "mixer_class",
    "register",
    "score_cost_limit",
    "score_cost_ratio",
    "truncate_levels",
]
