"""ListOps exact evaluator on the view LRA's first input pipeline gave the model, without closing
brackets: the value where no other parse of that view with another value is found, else the
root-operator prior.

    hkt baseline bracketless_rule --data DATA_DIR --out RUN_DIR [...]

Long Range Arena's ListOps code as released with the paper tokenised with
``tfds.deprecated.text.Tokenizer``, which drops every token that is not alphanumeric, the
closing brackets among them; the fix of 2021-03-04 kept them (:mod:`hkt.baselines._listops_views`).
Our tokens keep them, so the five rules read what LRA's fixed pipeline shows a model; this rule
reads what its first one showed. It is optimistic where it answers the value (a parse two
bracket moves away may differ) and plain where it cannot (a reader might guess better than the
prior). The record counts the expressions with another value found (``other_value_found``) and
the tokens the view keeps (``view_tokens``). The arguments every baseline takes, and what it
writes: :mod:`hkt.baselines.run`.
"""

from __future__ import annotations

import argparse

import numpy as np

from hkt.baselines import register
from hkt.baselines._listops_rules import ROOT_NAMES, add_arguments, root_operators, root_prior
from hkt.baselines._listops_views import another_value, first_view_length, parse
from hkt.baselines.run import Fit, Splits, answers, run_command
from hkt.errors import ConfigError

__all__ = ["fit", "add_arguments", "run"]
NAME = "bracketless_rule"


def _not_listops(why: str) -> ConfigError:
    return ConfigError(f"{NAME} is a ListOps rule and this data is not ListOps ({why}); run it on "
                       "ListOps only: set its entry's `tasks: [listops_lra]` under `external:`")


@register(NAME)
def fit(data: Splits, *, seed: int = 0) -> Fit:
    """The rule's accuracy on val and test (``seed``: unused, nothing is random)."""
    if data.num_classes != 10:
        raise _not_listops(f"{data.num_classes} classes, not the digits 0..9")
    prior = root_prior(data.train, data.num_classes, NAME)
    predictions, found, tokens = {}, {}, {}
    for name, split in (("val", data.val), ("test", data.test)):
        ops = root_operators(split, NAME)
        guesses, other, seen = [], 0, []
        for i in range(len(split)):
            toks = split.flat[split.offsets[i]: split.offsets[i + 1]]
            try:
                exact = parse(toks).value[0]
                fixed = another_value(toks) is None
            except ValueError as exc:
                raise _not_listops(f"example {split.ids[i]!r}: {exc}") from None
            other += not fixed
            guesses.append(exact if fixed else int(prior[ops[i]]))
            seen.append(first_view_length(toks))
        predictions[name] = answers(split, np.asarray(guesses, dtype=np.int64), data.num_classes)
        found[name] = other
        tokens[name] = {"min": int(min(seen, default=0)), "max": int(max(seen, default=0)),
                        "mean": float(np.mean(seen)) if seen else 0.0}
    return Fit(predictions=predictions,
               model={"rule": "exact evaluator on the view without closing brackets, else the "
                              "root-operator prior"},
               extra={"root_labels": dict(zip(ROOT_NAMES, map(int, prior))),
                      "other_value_found": found, "view_tokens": tokens})


def run(args: argparse.Namespace) -> int:
    return run_command(NAME, args)
