"""Token mixers: the MHA baseline, HKT, the convolution and S4D mixers, and the registry that
builds them by name.

Every module of this package is imported on the first lookup in :data:`MIXERS`
(:class:`hkt.plugin_registry.Registry`), which registers its ``@register``-decorated classes; the imports
below only re-export names.
"""

from hkt.mixers.base import AttentionInternals
from hkt.mixers.registry import MIXERS, build_mixer, mixer_class, register

from hkt.mixers.mha import MHAConfig, MultiHeadAttention  # noqa: E402  (registration order)
from hkt.mixers.hkt import (  # noqa: E402
    HKTAttention, HKTConfig, score_cost_limit, score_cost_ratio, truncate_levels)
from hkt.mixers.conv import CausalConvMixer, ConvConfig  # noqa: E402

__all__ = [
    "MIXERS",
    "AttentionInternals",
    "CausalConvMixer",
    "ConvConfig",
    "HKTAttention",
    "HKTConfig",
    "MHAConfig",
    "MultiHeadAttention",
    "build_mixer",
    "mixer_class",
    "register",
    "score_cost_limit",
    "score_cost_ratio",
    "truncate_levels",
]
