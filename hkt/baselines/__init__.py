"""Baselines beside MHA and HKT that are not attention modules.

* :mod:`hkt.baselines.ngram`: non-neural references (majority class, hashed n-gram logistic
  regression), an *external* baseline: it reads prepared data and writes a run record, nothing
  more (``python -m hkt.baselines.ngram``).

The convolution baseline is an attention-slot module instead: ``hkt/mixers/conv.py``. The
size-matched MHA is a variant (``variant=mha_matched``, ``model.match_params_of``).
"""
