"""What Long Range Arena's ListOps input pipeline shows a model of an expression, and whether
that view still fixes the expression's value (issue 60). Private to the rule baselines.

LRA's pipeline (google-research/long-range-arena, lra_benchmarks/listops/input_pipeline.py) reads
the TSV's parenthesised trees and tokenises them in one of two ways:

* **fixed** (since the commit of 2021-03-04, c209b2a): ``]`` is renamed ``X`` and the parentheses
  are removed before tokenising, so the model sees operators, closing brackets and digits: the
  tokens our generator writes, one per operator, bracket and digit;
* **first** (the code released with the paper, 2020-10-23 to 2021-03-04): the vocabulary and the
  encoder use ``tfds.deprecated.text.Tokenizer``, alphanumeric-only by default (tensorflow/datasets
  ``text_encoder.py``), so the model sees operators (``MIN`` …) and digits, and no closing
  bracket.

Either way the input is cut at ``max_length`` = 2000 tokens, which no tree reaches: the generator
keeps a tree when its length (operators, closing brackets and digits) is below 2000.

Without its closing brackets an expression may parse in several ways (an operator takes 2 to 10
arguments); :func:`another_value` looks for a parse of the same view with another value, by
moving one closing bracket at a time (an operator gives its last argument to an enclosing
operator, or takes the argument that follows it), within the generator's limits (2..``max_args``
arguments, operators above depth ``max_depth``). Finding one proves the view does not fix the
value; finding none does not prove it does (a parse two moves away may differ).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hkt.data.families._listops_vocab import CLOSE, DIGIT0, apply_operator

__all__ = ["Tree", "parse", "first_view_length", "another_value"]

_FIRST_OP, _LAST_OP = 1, 4


@dataclass
class Tree:
    """An expression as nodes in prefix order (node 0 the root): operator code (-1 for a digit),
    children, parent (-1 for the root), value, depth (root 1), and the deepest operator and digit
    below each node, counted from it (-1: none)."""

    op: list[int]
    kids: list[list[int]]
    parent: list[int]
    value: list[int]
    depth: list[int]
    op_below: list[int]
    digit_below: list[int]


def parse(tokens: Any) -> Tree:
    """The tree of a well-formed expression's token ids (ValueError otherwise)."""
    t = Tree([], [], [], [], [], [], [])
    stack: list[int] = []
    for tok in (int(x) for x in tokens):
        if tok == CLOSE:
            if not stack:
                raise ValueError("an unbalanced ']'")
            i = stack.pop()
            t.value[i] = apply_operator(t.op[i], [t.value[c] for c in t.kids[i]])
            t.op_below[i] = max([0] + [t.op_below[c] + 1 for c in t.kids[i] if t.op[c] >= 0])
            t.digit_below[i] = max(t.digit_below[c] + 1 for c in t.kids[i])
            continue
        if not (_FIRST_OP <= tok <= _LAST_OP or DIGIT0 <= tok < DIGIT0 + 10):
            raise ValueError(f"token id {tok} is not a ListOps token")
        if not stack and t.op:
            raise ValueError("tokens after the root")
        is_op = tok <= _LAST_OP
        i = len(t.op)
        t.op.append(tok - _FIRST_OP if is_op else -1)
        t.kids.append([])
        t.parent.append(stack[-1] if stack else -1)
        t.value.append(0 if is_op else tok - DIGIT0)
        t.depth.append(len(stack) + 1)
        t.op_below.append(0 if is_op else -1)
        t.digit_below.append(-1 if is_op else 0)
        if stack:
            t.kids[stack[-1]].append(i)
        elif not is_op:
            raise ValueError("the root is a digit")
        if is_op:
            stack.append(i)
    if stack or not t.op:
        raise ValueError("an operator is never closed")
    return t


def first_view_length(tokens: Any) -> int:
    """How many tokens LRA's first pipeline gives the model: every token but the closing
    brackets."""
    return sum(1 for x in tokens if int(x) != CLOSE)


def _root_value(t: Tree, start: int, kids: dict[int, list[int]]) -> int:
    """The root's value when the nodes of ``kids`` have those children instead (every one of
    them ``start`` or above it)."""
    new: dict[int, int] = {}
    n = start
    while n >= 0:
        new[n] = apply_operator(t.op[n], [new.get(c, t.value[c]) for c in kids.get(n, t.kids[n])])
        n = t.parent[n]
    return new[0]


def _fits(t: Tree, node: int, depth: int, max_depth: int) -> bool:
    """Whether ``node``'s subtree may sit at ``depth``: its operators above ``max_depth``, its
    digits at ``max_depth`` at most."""
    ops = t.op_below[node]
    return (ops < 0 or depth + ops < max_depth) and depth + t.digit_below[node] <= max_depth


def another_value(tokens: Any, *, max_args: int = 10, max_depth: int = 10) -> int | None:
    """A value of another parse of ``tokens`` without its closing brackets, one bracket moved
    (module docstring), that differs from the expression's value; None where none is found."""
    t = parse(tokens)
    exact = t.value[0]
    for o in range(1, len(t.op)):
        if t.op[o] < 0:
            continue
        own = t.kids[o]
        # o gives its last argument to an enclosing operator: its bracket moves left
        if len(own) > 2:
            last, x = own[-1], o
            while t.parent[x] >= 0:
                a = t.parent[x]
                siblings = t.kids[a]
                if len(siblings) < max_args:
                    j = siblings.index(x)
                    kids = {o: own[:-1], a: siblings[:j + 1] + [last] + siblings[j + 1:]}
                    if (value := _root_value(t, o, kids)) != exact:
                        return value
                if siblings[-1] != x:
                    break
                x = a
        # o takes the argument that follows it: its bracket moves right
        if len(own) < max_args:
            x = o
            while t.parent[x] >= 0:
                a = t.parent[x]
                siblings = t.kids[a]
                j = siblings.index(x)
                if j + 1 < len(siblings):
                    nxt = siblings[j + 1]
                    if len(siblings) > 2 and _fits(t, nxt, t.depth[o] + 1, max_depth):
                        kids = {o: own + [nxt], a: siblings[:j + 1] + siblings[j + 2:]}
                        if (value := _root_value(t, o, kids)) != exact:
                            return value
                    break
                x = a
    return None
