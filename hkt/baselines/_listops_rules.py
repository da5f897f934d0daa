"""ListOps rule references: what simple rules on an expression's tree predict, so that a model's
accuracy reads as "it reaches the rule that ...". Shared by the rule modules beside it
(``root_op_prior``, ``depth_rule``: ``depth1_rule`` to ``depth3_rule``, ``exact_rule``); private
(the registry skips ``_`` modules). Definitions: docs/listops.md.

* **root-operator prior**: the most frequent training label of each root operator (MIN, MAX,
  MED, SM): what the first token alone tells.
* **depth-k rule**: the expression evaluated exactly down to depth ``k`` (the root is depth 1);
  a sub-expression deeper than ``k`` is ignored, i.e. dropped from its parent's arguments, and
  an operator left with no argument is dropped too. Where the root is left with none (every
  argument a deeper sub-expression), the rule answers the root-operator prior.
* **exact evaluator**: no depth limit. It must equal every label: a check of the data.

A rule's predictions (``predictions.parquet``) are its answer, with probability 1.

Token ids are those of :mod:`hkt.data.families._listops_vocab` (the evaluator's operators).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from hkt.baselines.run import Fit, Splits, add_run_arguments, answers
from hkt.data.families._listops_vocab import CLOSE, DIGIT0, OPERATORS, ROOT_NAMES, apply_operator
from hkt.data.parquet import SplitData
from hkt.errors import ConfigError, DataError

__all__ = ["ROOT_NAMES", "root_operators", "root_prior", "truncated_value", "rule_fit",
           "rule_answers", "add_arguments"]

_FIRST_OP, _LAST_OP = 1, len(OPERATORS)  # operator code k has token id 1 + k


def _not_listops(name: str, why: str) -> ConfigError:
    return ConfigError(f"{name} is a ListOps rule and this data is not ListOps ({why}); run it on "
                       "ListOps only: set its entry's `tasks: [listops]` under `external:`")


def root_operators(split: SplitData, name: str = "the rule") -> np.ndarray:
    """Each example's root operator code (0..3 in :data:`ROOT_NAMES`' order): its first token."""
    if len(split) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = split.offsets[:-1]
    if np.any(np.diff(split.offsets) == 0):
        raise _not_listops(name, "an example has no tokens")
    first = split.flat[starts].astype(np.int64)
    bad = (first < _FIRST_OP) | (first > _LAST_OP)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _not_listops(name, f"example {split.ids[i]!r} starts with token id {first[i]}, "
                                 f"not an operator {_FIRST_OP}..{_LAST_OP}")
    return first - _FIRST_OP


def root_prior(train: SplitData, num_classes: int, name: str = "the rule") -> np.ndarray:
    """Per root operator, the most frequent training label (of two equally frequent, the
    smaller; an operator no training example has: the most frequent label overall)."""
    ops = root_operators(train, name)
    overall = int(np.bincount(train.labels, minlength=num_classes).argmax()) if len(train) else 0
    counts = np.zeros((len(ROOT_NAMES), num_classes), dtype=np.int64)
    np.add.at(counts, (ops, train.labels), 1)
    return np.where(counts.sum(axis=1) > 0, counts.argmax(axis=1), overall)


def truncated_value(tokens: Any, depth: int | None) -> int | None:
    """The value of one expression evaluated down to ``depth`` (None: no limit); None where the
    root keeps no argument. Deeper sub-expressions, and operators left with no argument, are
    dropped from their parent's arguments. ValueError if the expression is malformed."""
    stack: list[tuple[int, bool, list[int]]] = []  # (operator code, kept?, its arguments)
    result: int | None = None
    closed = False
    for t in (int(x) for x in tokens):
        if closed:
            raise ValueError("tokens after the root's closing bracket")
        if _FIRST_OP <= t <= _LAST_OP:
            kept = (depth is None or len(stack) < depth) and (not stack or stack[-1][1])
            stack.append((t - _FIRST_OP, kept, []))
        elif DIGIT0 <= t < DIGIT0 + 10:
            if not stack:
                raise ValueError("a value outside any operator")
            if stack[-1][1]:
                stack[-1][2].append(t - DIGIT0)
        elif t == CLOSE:
            if not stack:
                raise ValueError("an unbalanced ']'")
            op, kept, args = stack.pop()
            value = apply_operator(op, args) if kept and args else None
            if stack:
                if value is not None:
                    stack[-1][2].append(value)
            else:
                result, closed = value, True
        else:
            raise ValueError(f"token id {t} is not a ListOps token")
    if stack or not closed:
        raise ValueError("an operator is never closed")
    return result


def _predict(split: SplitData, depth: int | None, prior: np.ndarray, name: str
             ) -> tuple[np.ndarray, int]:
    """The rule's label for every example of ``split``, and how many fell back to the prior."""
    ops = root_operators(split, name)
    pred = np.empty(len(split), dtype=np.int64)
    fallback = 0
    for i in range(len(split)):
        tokens = split.flat[split.offsets[i]: split.offsets[i + 1]]
        try:
            value = truncated_value(tokens, depth)
        except ValueError as exc:
            raise _not_listops(name, f"example {split.ids[i]!r}: {exc}") from None
        if value is None:
            fallback += 1
            value = int(prior[ops[i]])
        pred[i] = value
    return pred, fallback


def rule_fit(name: str, data: Splits, depth: int | None, *, root_only: bool = False) -> Fit:
    """The :class:`Fit` of one rule: ``root_only`` the root-operator prior, else the depth-``depth``
    rule (None: the exact evaluator, which raises a :class:`DataError` on any label it does not
    equal, in every split)."""
    if data.num_classes != 10:
        raise _not_listops(name, f"{data.num_classes} classes, not the digits 0..9")
    prior = root_prior(data.train, data.num_classes, name)
    extra: dict[str, Any] = {"root_labels": dict(zip(ROOT_NAMES, map(int, prior)))}
    acc, fallbacks, predictions = {}, {}, {}
    splits = {"val": data.val, "test": data.test}
    if depth is None and not root_only:
        splits = {"train": data.train, **splits}  # a check of the data: every split
    for split_name, split in splits.items():
        if root_only:
            pred, fallbacks[split_name] = prior[root_operators(split, name)], 0
        else:
            pred, fallbacks[split_name] = _predict(split, depth, prior, name)
        acc[split_name] = float(np.mean(pred == split.labels)) if len(split) else 0.0
        if split_name in ("val", "test"):
            predictions[split_name] = answers(split, pred, data.num_classes)  # one-hot
        if depth is None and not root_only and acc[split_name] != 1.0:
            wrong = np.flatnonzero(pred != split.labels)
            i = int(wrong[0])
            raise DataError(
                f"{name}: {len(wrong)} of {len(split)} {split_name} labels differ from the "
                f"expression's value (first: {split.ids[i]!r}, label {split.labels[i]}, value "
                f"{pred[i]}); the data is not what ListOps' generator writes: prepare it again "
                "(`hkt prepare listops`)")
    if not root_only:
        extra["depth"] = depth
        extra["prior_fallbacks"] = {k: fallbacks[k] for k in ("val", "test")}
    if depth is None and not root_only:
        extra["checked_examples"] = sum(len(s) for s in splits.values())
    rule = "root-operator prior, from the training labels" if root_only else (
        "exact evaluator, every depth" if depth is None else f"evaluated exactly to depth {depth}")
    return Fit(predictions=predictions,
               model={"rule": rule, **({} if root_only else {"depth": depth})}, extra=extra)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of every rule: those every baseline takes (a rule has no options)."""
    add_run_arguments(parser)


def rule_answers(data: Splits, depth: int | None, *, root_only: bool = False,
                 name: str = "the rule") -> dict[str, np.ndarray]:
    """Each val and test example's answer under one rule (as :func:`rule_fit` reads it):
    ``root_only`` the root-operator prior, else the depth-``depth`` rule (None: the exact
    evaluator). The per-example facts of a prepared ListOps task (:mod:`hkt.facts.examples`)."""
    prior = root_prior(data.train, data.num_classes, name)
    return {s: prior[root_operators(split, name)] if root_only
            else _predict(split, depth, prior, name)[0]
            for s, split in (("val", data.val), ("test", data.test))}
