"""Attention modules: the MHA baseline, HKT, and the registry that builds them by name."""

from hkt.attention.base import AttentionInternals
from hkt.attention.cost import score_cost_limit, score_cost_ratio
from hkt.attention.registry import ATTENTION, build_attention, register

# Importing the modules registers them.
from hkt.attention.mha import MultiHeadAttention  # noqa: E402  (registration order)
from hkt.attention.hkt import HKTAttention  # noqa: E402
from hkt.attention.conv import CausalConvMixer  # noqa: E402,F401

__all__ = [
    "ATTENTION",
    "AttentionInternals",
    "HKTAttention",
    "MultiHeadAttention",
    "build_attention",
    "register",
    "score_cost_limit",
    "score_cost_ratio",
]
