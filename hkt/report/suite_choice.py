"""Which suite run ``hkt aggregate --mlflow`` reads.

A tracking server may hold the runs of several suite runs (:class:`hkt.provenance.SuiteRun`:
one suite run from two checkouts, or two suites in one results directory). Tables that mixed
them would take another directory's run for a seed of this one, so the reader takes the runs of
one suite run: the one named by ``--suite`` / ``--results-dir`` / ``--untagged``, or the only
one present. Runs logged before runs were tagged with their results directory have none: they
form a suite run of their own per suite (``--untagged``), told apart from no other.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hkt.provenance import SuiteRun, suite_name
from hkt.runs_frame import AggregateError

__all__ = ["SuiteChoice", "choose", "flags", "listing"]

UNTAGGED_NOTE = "logged before runs named their results directory"


@dataclass(frozen=True)
class SuiteChoice:
    """What the user named: a suite (``none``: runs of no suite), a results directory (as
    given, or made absolute here), or the runs without a results_dir tag; None/False: any."""

    suite: str | None = None
    results_dir: str | None = None
    untagged: bool = False

    def __post_init__(self) -> None:
        if self.results_dir and self.untagged:
            raise AggregateError("--results-dir and --untagged contradict each other: "
                                 "--untagged picks the runs that have no results directory")

    def named(self) -> bool:
        return bool(self.suite or self.results_dir or self.untagged)

    def matches(self, run: SuiteRun) -> bool:
        if self.suite is not None and run.suite != suite_name(self.suite):
            return False
        if self.untagged:
            return run.results_dir is None
        if self.results_dir:
            given = {self.results_dir, str(Path(self.results_dir).expanduser().resolve())}
            return run.results_dir in given
        return True

    def describe(self) -> str:
        words = [f"--suite {self.suite}"] if self.suite else []
        if self.results_dir:
            words.append(f"--results-dir {shlex.quote(self.results_dir)}")
        if self.untagged:
            words.append("--untagged")
        return " ".join(words)


def flags(run: SuiteRun) -> str:
    """The ``hkt aggregate --mlflow`` options that pick ``run``."""
    where = f"--results-dir {shlex.quote(run.results_dir)}" if run.results_dir else "--untagged"
    return f"--suite {run.suite} {where}"


def listing(counts: Mapping[SuiteRun, int]) -> str:
    """One line per suite run: the options that pick it and its number of runs."""
    rows = sorted(counts.items(), key=lambda kv: (kv[0].suite, kv[0].results_dir or ""))
    return "\n".join(f"  {flags(r)}  ({n} run{'s' * (n != 1)}"
                     f"{'' if r.results_dir else ', ' + UNTAGGED_NOTE})" for r, n in rows)


def choose(counts: Mapping[SuiteRun, int], choice: SuiteChoice, where: str) -> SuiteRun | None:
    """The one suite run of ``counts`` (finished runs per suite run in ``where``) that
    ``choice`` names or, naming none, the only one; None when there are no runs at all.
    Raises :class:`AggregateError` listing the suite runs present when none or several match."""
    if not counts:
        return None
    matching = [r for r in counts if choice.matches(r)]
    if len(matching) == 1:
        return matching[0]
    if not matching:
        raise AggregateError(f"no finished runs of {choice.describe()} in {where}; its suite "
                             f"runs (pass the options of one):\n{listing(counts)}")
    among = f" match {choice.describe()}" if choice.named() else ""
    raise AggregateError(
        f"the runs of {len(matching)} suite runs{among} are in {where}; a table takes one suite "
        f"run's runs: pass the options of one:\n{listing({r: counts[r] for r in matching})}")
