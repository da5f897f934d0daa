"""Attention modules: the MHA baseline, HKT, and the registry that builds them by name.

Every module of this package is imported on the first lookup in :data:`ATTENTION`
(:class:`hkt.registry.Registry`), which registers its ``@register``-decorated classes; the imports
below only re-export names.
"""

from hkt.attention.base import AttentionInternals
from hkt.attention.cost import score_cost_limit, score_cost_ratio
from hkt.attention.registry import ATTENTION, build_attention, register

from hkt.attention.mha import MHAConfig, MultiHeadAttention  # noqa: E402  (registration order)
from hkt.attention.hkt import HKTAttention, HKTConfig, truncate_levels  # noqa: E402
from hkt.attention.conv import CausalConvMixer, ConvConfig  # noqa: E402

__all__ = [
    "ATTENTION",
    "AttentionInternals",
    "CausalConvMixer",
    "ConvConfig",
    "HKTAttention",
    "HKTConfig",
    "MHAConfig",
    "MultiHeadAttention",
    "build_attention",
    "register",
    "score_cost_limit",
    "score_cost_ratio",
    "truncate_levels",
]
