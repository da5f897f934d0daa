"""ListOps root-operator prior: the most frequent training label of each root operator (MIN,
MAX, MED, SM), the first token alone; the floor a model that reads only the root stands on.

    hkt baseline root_op_prior --data DATA_DIR --out RUN_DIR [...]

A rule line of the ListOps tables (a rule reference) (docs/listops.md). The arguments every baseline
takes, and what it writes: :mod:`hkt.baselines.run`. The record adds ``root_labels`` (operator
-> label). Of two labels equally frequent, the smaller wins.
"""

from __future__ import annotations

import argparse

from hkt.baselines import register
from hkt.baselines._listops_rules import add_arguments, rule_fit
from hkt.baselines.run import Fit, Splits, run_command

__all__ = ["fit", "add_arguments", "run"]
NAME = "root_op_prior"


@register(NAME)
def fit(data: Splits, *, seed: int = 0) -> Fit:
    """The root-operator prior's accuracy on val and test (``seed``: unused, nothing is random)."""
    return rule_fit(NAME, data, None, root_only=True)


def run(args: argparse.Namespace) -> int:
    return run_command(NAME, args)
