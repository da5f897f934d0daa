"""Baselines beside MHA and HKT that are not attention modules.

* :mod:`hkt.baselines.ngram`: non-neural references (majority class, hashed n-gram logistic
  regression), an *external* baseline: it reads prepared data and writes a run record, nothing
  more (``python -m hkt.baselines.ngram``).
* :mod:`hkt.baselines.matched`: the width that gives MHA as many parameters as HKT, for the
  size-matched ablation (``python -m hkt.baselines.matched``).

The convolution baseline is an attention-slot module instead: ``hkt/attention/conv.py``.
"""
