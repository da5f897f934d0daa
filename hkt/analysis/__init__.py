"""Analyses of trained HKT models: pure numerical functions (numpy float64, torch accepted).

- :mod:`hkt.analysis.kurtosis`: Mardia's multivariate kurtosis κ and its test (Gaussian κ = 1).
- :mod:`hkt.analysis.kernel`: M = W_Q W_Kᵀ/√d split into symmetric/antisymmetric parts, PSD
  condition, rank of the symmetrised fused Gram.
- :mod:`hkt.analysis.fusion`: statistics of the fusion weights λ.
"""

from hkt.analysis.fusion import LambdaStats, dominant_level, lambda_stats
from hkt.analysis.kernel import (
    BilinearParts,
    GramReport,
    PSDCondition,
    decompose_bilinear,
    decompose_matrix,
    gram_rank_report,
    head_columns,
    psd_condition,
)
from hkt.analysis.kurtosis import (
    KurtosisResult,
    b2_standard_error,
    expected_b2,
    expected_kappa,
    kappa_standard_error,
    mardia_kurtosis,
    mardia_test,
)

__all__ = [
    "BilinearParts",
    "GramReport",
    "KurtosisResult",
    "LambdaStats",
    "PSDCondition",
    "b2_standard_error",
    "decompose_bilinear",
    "decompose_matrix",
    "dominant_level",
    "expected_b2",
    "expected_kappa",
    "gram_rank_report",
    "head_columns",
    "kappa_standard_error",
    "lambda_stats",
    "mardia_kurtosis",
    "mardia_test",
    "psd_condition",
]
