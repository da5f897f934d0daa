"""ListOps depth-2 rule: the root and its direct sub-expressions evaluated exactly, deeper
sub-expressions ignored.

    hkt baseline depth2_rule --data DATA_DIR --out RUN_DIR [...]

A reference line of the ListOps tables (docs/listops.md): a model at or above it reads
the expression to depth 2. An operator left with no argument is dropped from its parent's;
where the root keeps none, the root-operator prior answers (counted in ``prior_fallbacks``).
The arguments every baseline takes, and what it writes: :mod:`hkt.baselines.run`.
"""

from __future__ import annotations

import argparse

from hkt.baselines import register
from hkt.baselines._listops_rules import add_arguments, rule_fit
from hkt.baselines.run import Fit, Splits, run_command

__all__ = ["fit", "add_arguments", "run"]
NAME, DEPTH = "depth2_rule", 2


@register(NAME)
def fit(data: Splits, *, seed: int = 0) -> Fit:
    """The depth-2 rule's accuracy on val and test (``seed``: unused, nothing is random)."""
    return rule_fit(NAME, data, DEPTH)


def run(args: argparse.Namespace) -> int:
    return run_command(NAME, args)
