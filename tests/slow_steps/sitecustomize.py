"""Slow training steps in every Python process that has this directory on its path and
$HKT_TEST_STEP_SLEEP set (seconds): each training step first sleeps that long. What a drill of a
time limit needs (tests/test_slurm_e2e.py): a run that lasts a minute of wall time without a
minute of CPU; the numbers it computes are unchanged. Python imports this module at start-up."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time

SLEEP = float(os.environ.get("HKT_TEST_STEP_SLEEP") or 0)
TARGET = "hkt.train.step"


class _SlowSteps(importlib.abc.MetaPathFinder):
    """Wraps ``forward_backward`` of :data:`TARGET` as the module is loaded, before the training
    loop imports the name."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def slow(module):
            exec_module(module)
            step = module.forward_backward

            def forward_backward(*args, **kwargs):
                time.sleep(SLEEP)
                return step(*args, **kwargs)

            module.forward_backward = forward_backward

        spec.loader.exec_module = slow
        return spec


if SLEEP > 0:
    sys.meta_path.insert(0, _SlowSteps())
