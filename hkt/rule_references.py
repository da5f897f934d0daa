"""Reference lines: the ListOps rule references (:mod:`hkt.baselines._listops_rules`,
docs/listops.md) as the tables, figures and claims show them.

A rule reference is an external baseline whose record's ``model`` is a key of
:data:`RULE_REFERENCES`. Its runs in a runs frame (:mod:`hkt.runs_frame`) give, per task and T, one
:class:`Line`: its name for readers, its validation and test accuracy and the test examples.
:func:`reading` places an accuracy among the lines of its task: which rule it reaches, with the
test set's own sampling error counted (:func:`hkt.report.stats.mean_error`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

__all__ = ["RULE_REFERENCES", "Line", "lines", "lines_note", "is_reference", "reading",
           "figure_error"]

#: The rule references, lowest first: model name -> what it means (its name in tables and figures).
RULE_REFERENCES = {"root_op_prior": "root-operator prior", "depth1_rule": "depth-1 rule",
                   "depth2_rule": "depth-2 rule", "depth3_rule": "depth-3 rule",
                   "exact_rule": "exact evaluator"}


@dataclass(frozen=True)
class Line:
    """One rule reference on one task and T: accuracies in percent."""

    model: str
    label: str
    val: float
    test: float
    test_examples: int | None

    @property
    def test_se(self) -> float:
        """The binomial standard error (pp) of its test accuracy (0 without a count)."""
        p, n = self.test / 100, self.test_examples
        return 100 * math.sqrt(p * (1 - p) / n) if n else 0.0


def is_reference(runs: pl.DataFrame) -> pl.Expr:
    """True on the rows of ``runs`` that are rule references."""
    return pl.col("model").is_in(list(RULE_REFERENCES))


def lines(runs: pl.DataFrame, task: str, length: int | None) -> list[Line]:
    """The rule references among ``runs`` on (task, T), lowest first (mean over their seeds)."""
    if runs.is_empty():
        return []
    sel = runs.filter(is_reference(runs) & (pl.col("task") == task)
                      & (pl.col("length") == length))
    out = []
    for model, label in RULE_REFERENCES.items():
        part = sel.filter(pl.col("model") == model)
        if part.is_empty():
            continue
        n = part["test_examples"].drop_nulls()
        out.append(Line(model, label, float(part["val_accuracy"].mean() * 100),
                        float(part["test_accuracy"].mean() * 100),
                        int(n.min()) if len(n) else None))
    return out


def lines_note(runs: pl.DataFrame) -> str:
    """The sentence a ListOps table's caption carries: each task's rule references (test
    accuracy), so that a model's value reads against them; '' where ``runs`` has none."""
    if runs.is_empty() or runs.filter(is_reference(runs)).is_empty():
        return ""
    keys = runs.filter(is_reference(runs)).select("task", "length").unique(maintain_order=True)
    parts = [f"{task} T={length}: " + ", ".join(f"{ln.label} {ln.test:.2f}"
                                                for ln in lines(runs, task, length))
             for task, length in keys.iter_rows()]
    return ("Rule references (test accuracy %, docs/listops.md: what a rule reading the "
            f"expression to a known depth gets): {'; '.join(parts)}.")


def figure_error(mean: float, std: float | None, seeds: int | None,
                 test_examples: int | None, *, sem: float | None = None) -> float:
    """The standard error (pp) of a published figure ``mean`` (%): its spread over seeds where its
    source gives one, std² / seeds (``seeds`` None: std², as for one seed, the most the spread can
    add) or, where the source gives the standard error of its mean over seeds instead, ``sem``²;
    plus the binomial error p(1 − p)/N of a test set of ``test_examples`` (None: none known)."""
    if std is not None and sem is not None:
        raise ValueError("a figure's spread is a std or a standard error (sem), not both")
    spread = std ** 2 / (seeds or 1) if std is not None else (sem ** 2 if sem is not None else 0.0)
    p = mean / 100
    binomial = 1e4 * p * (1 - p) / test_examples if test_examples else 0.0
    return math.sqrt(spread + binomial)


def reading(value: float, error: float, refs: list[Line]) -> str:
    """Where an accuracy ``value`` (pp) with standard error ``error`` (pp) sits among ``refs``:
    at a line when the 95% interval of their difference (both errors counted) holds 0, else
    above the highest line it clears and below the next; each with the difference."""
    if not refs:
        return ""

    def diff(ln: Line) -> tuple[float, float]:
        return value - ln.test, 1.96 * math.sqrt(error ** 2 + ln.test_se ** 2)

    at = [ln for ln in refs if abs(diff(ln)[0]) <= diff(ln)[1]]
    if at:
        return "; ".join(f"at the {ln.label} ({diff(ln)[0]:+.2f} ± {diff(ln)[1]:.2f} pp)"
                         for ln in at)
    below = [ln for ln in refs if diff(ln)[0] > 0]
    above = [ln for ln in refs if diff(ln)[0] < 0]
    parts = []
    if below:
        ln = below[-1]
        parts.append(f"above the {ln.label} ({diff(ln)[0]:+.2f} ± {diff(ln)[1]:.2f} pp)")
    if above:
        ln = above[0]
        parts.append(f"below the {ln.label} ({diff(ln)[0]:+.2f} ± {diff(ln)[1]:.2f} pp)")
    return ", ".join(parts)
