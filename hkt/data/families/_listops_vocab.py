"""The ListOps token language: vocabulary, token ids and the value of an expression.

Its own module so that the generator (:mod:`hkt.data.families.listops`) and the TSV reader
(:mod:`hkt.data.families._listops_tsv`) both import it without importing each other. Private
to the family (the registry skips ``_`` modules); ``listops`` re-exports its names.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPERATORS", "VOCAB", "PAD", "CLOSE", "DIGIT0", "TOKENIZER", "evaluate",
           "apply_operator", "ROOT_NAMES"]

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
#: The operators' names as records and tables state them (``[MIN`` -> ``MIN``).
ROOT_NAMES = tuple(op.lstrip("[") for op in OPERATORS)
VOCAB = ["<pad>", *OPERATORS, "]", *[str(d) for d in range(10)]]
PAD, CLOSE, DIGIT0 = 0, 5, 6          # token ids; operator code k (0..3) has id 1 + k
TOKENIZER = "ListOps tokens, parentheses dropped; id 0 = padding"


# the generator computes values vectorised; this is the scalar check used on TSV rows and in tests
def evaluate(tokens: Any) -> int:
    """Value of one tokenised expression (ids as in ``VOCAB``). Raises ValueError if malformed."""
    stack: list[list[int]] = []
    result = None
    for t in (int(x) for x in tokens):
        if 1 <= t <= 4:
            stack.append([t - 1])
        elif t >= DIGIT0 and t < DIGIT0 + 10:
            if not stack:
                if result is not None:
                    raise ValueError("value outside any operator")
                result = t - DIGIT0
                continue
            stack[-1].append(t - DIGIT0)
        elif t == CLOSE:
            if not stack or len(stack[-1]) < 2:
                raise ValueError("unbalanced ']' or operator without arguments")
            op, *args = stack.pop()
            v = apply_operator(op, args)
            if stack:
                stack[-1].append(v)
            elif result is None:
                result = v
            else:
                raise ValueError("more than one expression")
        else:
            raise ValueError(f"bad token id {t}")
    if stack or result is None:
        raise ValueError("unclosed operator or empty expression")
    return result


def apply_operator(op: int, args: list[int]) -> int:
    """Operator code ``op`` (0..3: MIN, MAX, MED, SM) applied to its argument values."""
    if op == 0:
        return min(args)
    if op == 1:
        return max(args)
    if op == 2:
        a = sorted(args)
        m = len(a) // 2
        return a[m] if len(a) % 2 else (a[m - 1] + a[m]) // 2
    return sum(args) % 10
