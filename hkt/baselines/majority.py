"""Majority class: the most frequent training label (0 parameters), the floor any model must clear.

Its accuracy is the class prior.

    hkt baseline majority --data DATA_DIR --out RUN_DIR [--max-train N] [...]

The arguments every baseline takes, and what it writes: :mod:`hkt.baselines.run`. The record
adds ``majority_label``. Of two labels equally frequent, the smaller wins. Its predictions
are that label, with probability 1 (a rule's).
"""

from __future__ import annotations

import argparse

import numpy as np

from hkt.baselines import register
from hkt.baselines.run import Fit, Splits, add_run_arguments, answers, run_command

__all__ = ["fit", "add_arguments", "run"]


@register("majority")
def fit(data: Splits, *, seed: int = 0) -> Fit:
    """The most frequent training label, and its accuracy on val and test (``seed``: unused,
    nothing here is random)."""
    label = int(np.bincount(data.train.labels).argmax())
    return Fit(predictions={s: answers(split, np.full(len(split), label), data.num_classes)
                            for s, split in (("val", data.val), ("test", data.test))},
               extra={"majority_label": label})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)  # it has no options of its own


def run(args: argparse.Namespace) -> int:
    return run_command("majority", args)
