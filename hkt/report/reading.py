"""The report's readings and verdicts as values: what a claim row is computed from, so that no
verdict is parsed back out of its prose.

* :class:`Verdict`: every word a claim's reading can end on (the paper's claims' *supports*,
  *direction only*, *refutes*, *cannot tell*; the lead's *holds*; the plateau's *moves*; a
  control's *climbs past*; a rule reading's *at*, *above*, *below*; the budget's *cannot tell at
  this budget*).
* :class:`Reading`: one estimate with its interval, unit, method, p-value, verdict and why.
* :class:`ClaimRow`: one row of the summary's claims table, its verdict kept beside the text
  that says it; :func:`render` turns rows into the table's cells, once, at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = ["Verdict", "Reading", "ClaimRow", "render"]


class Verdict(StrEnum):
    """A reading's verdict; its value is the word the prose starts with."""

    SUPPORTS = "supports"
    DIRECTION_ONLY = "direction only"
    REFUTES = "refutes"
    CANNOT_TELL = "cannot tell"
    #: The one verdict of a claim whose runs lie below the minimum budget.
    AT_THIS_BUDGET = "cannot tell at this budget"
    #: The lead at a longer budget (issue 59).
    HOLDS = "holds"
    HOLDS_AT_ANOTHER_SIZE = "holds, at another size"
    DOES_NOT_HOLD = "does not hold"
    #: A Transformer's plateau against the learning rate.
    MOVES = "moves"
    MOVES_OVER_SEEDS_ONLY = "moves over seeds"
    DOES_NOT_MOVE = "does not move"
    #: A control known to learn the task against the better Transformer.
    CLIMBS_PAST = "climbs past"
    SAME_LEVEL = "stops at the same level"
    STOPS_BELOW = "stops below"
    #: Where an accuracy sits among the ListOps rule references.
    AT = "at"
    ABOVE = "above"
    BELOW = "below"


@dataclass(frozen=True)
class Reading:
    """One estimate (``unit``: ``pp`` for accuracy differences) with its interval [``low``,
    ``high``] by ``method`` (None: none), its p-value, and the verdict drawn from it (None
    until a claim reads it against a claimed value) with why."""

    estimate: float | None
    low: float | None
    high: float | None
    verdict: Verdict | None = None
    unit: str = "pp"
    method: str = ""
    p_value: float | None = None
    why: str = ""

    @property
    def has_interval(self) -> bool:
        """Whether the reading has an interval (a side of one seed has none)."""
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class ClaimRow:
    """A row of the claims table: the claim, the paper's figure, ours and the reading, whose
    ``verdict`` is kept as a value; ``said`` is the reading's text (it starts with the verdict
    or names it), ``beside`` what the row adds after it whatever the budget reads."""

    title: str
    paper: str
    ours: str
    verdict: Verdict
    said: str
    beside: str = ""

    @property
    def reading(self) -> str:
        """The reading cell: the verdict's text and what stands beside it."""
        return self.said + self.beside

    def cells(self) -> list[str]:
        """The row as the table's four cells."""
        return [self.title, self.paper, self.ours, self.reading]

    def judged(self, verdict: Verdict, said: str) -> ClaimRow:
        """The row with another verdict (the budget's)."""
        return replace(self, verdict=verdict, said=said)


def render(rows: Sequence[ClaimRow]) -> list[list[str]]:
    """The claims table's cells: every row's prose, rendered here once."""
    return [row.cells() for row in rows]
