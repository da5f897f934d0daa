"""Rule lines: the ListOps rule references (:mod:`hkt.baselines._listops_rules`,
docs/listops.md) as the tables, figures and claims show them.

A rule reference is an external baseline whose record's ``model`` is a key of
:data:`RULE_REFERENCES`. Its runs in a runs frame (:mod:`hkt.runs_frame`) give, per task and T, one
:class:`Line`: its name for readers, its validation and test accuracy and the test examples.
:func:`reading` places an accuracy among the lines of its task: which rule it reaches, with the
test set's own sampling error counted (:func:`hkt.report.stats.mean_error`), as a
:class:`Placement` (its verdict and its text apart) at the confidence its caller passes (the
report's, config/report/settings.yaml: this module sits below the report).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import polars as pl

__all__ = ["RULE_REFERENCES", "Line", "lines", "lines_note", "is_reference", "reading",
           "figure_error", "Place", "Placement", "placement", "z_value"]

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


@dataclass(frozen=True)
class Place:
    """An accuracy against one rule: ``relation`` (``at``, ``above`` or ``below``) the rule
    ``label``, their ``difference`` (pp) and its interval: ± ``half_width``, or [``low``,
    ``high``] at ``level`` by ``method`` where the interval is not symmetric by construction."""

    relation: str
    label: str
    difference: float
    half_width: float | None = None
    low: float | None = None
    high: float | None = None
    level: str = ""
    method: str = ""

    @property
    def verdict(self) -> str:
        """The place without its numbers: ``above the depth-1 rule``."""
        return f"{self.relation} the {self.label}"

    @property
    def text(self) -> str:
        """The place with its difference and interval."""
        if self.half_width is not None:
            return f"{self.verdict} ({self.difference:+.2f} ± {self.half_width:.2f} pp)"
        return (f"{self.verdict} ({self.difference:+.2f} pp, {self.level} CI "
                f"[{self.low:+.2f}, {self.high:+.2f}], {self.method})")


@dataclass(frozen=True)
class Placement:
    """Where an accuracy sits among a task's rules: at every rule whose interval of the
    difference holds 0, else above the highest it clears and below the next (:func:`place`)."""

    places: tuple[Place, ...] = ()

    @property
    def relation(self) -> str:
        """The first place's relation (``at``, ``above``, ``below``); '' without rules."""
        return self.places[0].relation if self.places else ""

    @property
    def verdict(self) -> str:
        """What a claim row reads: the first place without its numbers (``at the depth-1
        rule``); '' without rules."""
        return self.places[0].verdict if self.places else ""

    @property
    def position(self) -> str:
        """Every place without its numbers (``above the depth-1 rule, below the depth-2
        rule``)."""
        return self._join([p.verdict for p in self.places])

    @property
    def text(self) -> str:
        """Every place with its numbers, as the tables and claims show it."""
        return self._join([p.text for p in self.places])

    def _join(self, parts: list[str]) -> str:
        return ("; " if self.relation == "at" else ", ").join(parts)

    def __str__(self) -> str:
        return self.text


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def placement(places: list[Place]) -> Placement:
    """The :class:`Placement` of an accuracy from its places against every rule (lowest rule
    first, each ``at``, ``above`` or ``below`` it): the ``at`` ones where any, else the highest
    rule it is above and the lowest it is below."""
    at = [p for p in places if p.relation == "at"]
    if at:
        return Placement(tuple(at))
    above = [p for p in places if p.relation == "above"]
    below = [p for p in places if p.relation == "below"]
    return Placement(tuple([*above[-1:], *below[:1]]))


def reading(value: float, error: float, refs: list[Line], confidence: float) -> Placement:
    """Where an accuracy ``value`` (pp) with standard error ``error`` (pp) sits among ``refs``:
    at a line when the ``confidence`` normal interval of their difference (both errors counted)
    holds 0, else above the highest line it clears and below the next; each with the
    difference and the interval's half-width."""
    z = z_value(confidence)
    places = []
    for ln in refs:
        d, half = value - ln.test, z * math.sqrt(error ** 2 + ln.test_se ** 2)
        relation = "at" if abs(d) <= half else "above" if d > 0 else "below"
        places.append(Place(relation, ln.label, d, half_width=half))
    return placement(places)
