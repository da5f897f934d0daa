"""ListOps exact evaluator: every expression evaluated in full; a check of the data, which must
get every label right (it stops with an error naming the first label that differs).

    hkt baseline exact_rule --data DATA_DIR --out RUN_DIR [...]

The ceiling line of the ListOps tables (docs/listops.md). It checks the train split too
(``checked_examples``). The arguments every baseline takes, and what it writes:
:mod:`hkt.baselines.run`.
"""

from __future__ import annotations

import argparse

from hkt.baselines import register
from hkt.baselines._listops_rules import add_arguments, rule_fit
from hkt.baselines.run import Fit, Splits, run_command

__all__ = ["fit", "add_arguments", "run"]
NAME = "exact_rule"


@register(NAME)
def fit(data: Splits, *, seed: int = 0) -> Fit:
    """The exact evaluator's accuracy on val and test: 1.0, or a DataError (``seed``: unused)."""
    return rule_fit(NAME, data, None)


def run(args: argparse.Namespace) -> int:
    return run_command(NAME, args)
