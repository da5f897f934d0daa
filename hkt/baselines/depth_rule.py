"""ListOps depth-k rules, one baseline per depth (``depth1_rule``, ``depth2_rule``,
``depth3_rule``): the expression evaluated exactly down to depth k, deeper sub-expressions
ignored.

    hkt baseline depthK_rule --data DATA_DIR --out RUN_DIR [...]

Rule lines of the ListOps tables (rule references, docs/listops.md): a model at or above
``depthK_rule`` reads the expression to depth K (the root is depth 1; ``depth1_rule`` is the root
operator on its direct digit arguments). An operator left with no argument is dropped from its
parent's; where the root keeps none, the root-operator prior answers (counted in
``prior_fallbacks``).

One rule, registered once per depth of :data:`DEPTHS` under the name that says its depth. The
name is what records, configs and the workflow hold, so the depth is never an option that
could disagree with it. The arguments every baseline takes, and what it writes:
:mod:`hkt.baselines.run`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from hkt.baselines import register
from hkt.baselines._listops_rules import add_arguments, rule_fit
from hkt.baselines.run import Fit, Splits, run_command

__all__ = ["DEPTHS", "FITS", "rule_name", "add_arguments", "run"]

#: the depths there is a rule for: the rule lines of the ListOps tables
DEPTHS = (1, 2, 3)


def rule_name(depth: int) -> str:
    """The baseline name of the depth-``depth`` rule (``depth2_rule``)."""
    return f"depth{depth}_rule"


def _register(depth: int) -> Callable[..., Fit]:
    name = rule_name(depth)

    def fit(data: Splits, *, seed: int = 0) -> Fit:
        return rule_fit(name, data, depth)

    fit.__doc__ = (f"ListOps depth-{depth} rule: the expression evaluated exactly down to "
                   f"depth {depth}, deeper sub-expressions ignored.\n\nIts accuracy on val and "
                   "test (``seed``: unused, nothing is random).")
    return register(name)(fit)


#: baseline name -> its ``fit`` (as :data:`hkt.baselines.BASELINES` holds it)
FITS = {rule_name(depth): _register(depth) for depth in DEPTHS}


def run(args: argparse.Namespace) -> int:
    """``hkt baseline depthK_rule``: the rule of the depth its name says (``args.name``)."""
    return run_command(args.name, args)
