"""Hierarchical Kernel Transformer (HKT) benchmark library.

Importable without Snakemake: token mixers (``hkt.mixers``), models
(``hkt.models``), data (``hkt.data``), training (``hkt.train``), analyses
(``hkt.analysis``) and reporting (``hkt.report``).
"""

__version__ = "0.2.0"
