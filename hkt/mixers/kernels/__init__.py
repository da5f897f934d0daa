"""Compiled kernels of the mixers (Triton), imported only by the module that launches them.

A package, so that the mixer registry (which imports every module of ``hkt.mixers``, not its
subpackages) never imports Triton: a machine without it still builds every mixer.
"""
