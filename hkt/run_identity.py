"""Is a run made again the run that was published? A rerun from another commit or on another
machine (issue 72: the cpu suite's ListOps runs made again, to keep their predictions) may stand
in for the published run only where it reached the same outcome: the same task, model, variant,
seed and steps, on the same data, with the same settings, to the same best step and the same
validation and test accuracy, and the same predictions where both kept them. Its losses may
differ in their late digits: a CPU of another model rounds the same sums differently
(``record.device`` names the CPU since issue 59; the cpu suite's ListOps runs, published from an
AMD EPYC, made again on an Intel Xeon: every accuracy of their histories equal over the 10,000
steps, the losses apart from the 8th significant digit). :func:`compare_histories` says how far,
and that is not a refusal; a difference that grew into another outcome is (the long suite's
README shows one).

Read by ``scripts/identity_check.py --runs`` (the report) and ``scripts/publish_results.py
--redo`` (which publishes only the runs :func:`rerun_differences` finds none in).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hkt.config_compose import flatten
from hkt.errors import HKTError
from hkt.predictions import read_checked
from hkt.run_record import HISTORY_NAME, STEP_METRICS, load_record, read_history

#: The record fields a rerun must equal: what the run is, and what it reached.
OUTCOME = ("task", "model", "variant", "seed", "profile", "steps", "n_params", "best_step",
           "val_accuracy", "test_accuracy", "test_examples", "train_examples")

#: Settings of the composed config that say where a run was written and tracked, not what it
#: trained (paths, the MLflow run's name, the data mirror a task was read from): left out of
#: the comparison of configs, by prefix.
WHERE = ("tracking.", "task.prepare.mirror")

#: A history's columns that are timings: not compared.
TIMINGS = ("samples_per_s",)


def _data_difference(published: dict[str, Any], rerun: dict[str, Any],
                     known: Sequence[dict[str, dict[str, str]]]) -> str:
    """Whether two records' data differ, in words ("" where they are the same): by content
    where both records have content checksums, or where ``known``
    (:func:`hkt.data.parquet.prepared_checksums` of data prepared again) holds data whose files
    the published record names; else by the files."""
    theirs, mine = published.get("data_content_checksums"), rerun.get("data_content_checksums")
    if not theirs:
        theirs = next((k["content"] for k in known if k["files"] == published.get("data_checksums")),
                      None)
    if theirs and mine:
        return "" if theirs == mine else "data_content_checksums: the data differ"
    if published.get("data_checksums") == rerun.get("data_checksums"):
        return ""
    if mine:  # the files differ; a release may write the same rows in other bytes
        return ("data_checksums: the split files differ, and the published record has no content "
                "checksums to tell whether what they hold does (prepare the data again at the "
                "published run's commit and give that directory as --published-data DIR)")
    return "data_checksums: the data differ"


def outcome_differences(published: dict[str, Any], rerun: dict[str, Any],
                        known: Sequence[dict[str, dict[str, str]]] = ()) -> list[str]:
    """What keeps ``rerun`` (a record) from standing in for ``published``, in words (none: it
    may): an :data:`OUTCOME` field, the data (:func:`_data_difference`; ``known``: data made
    again at the published commit, :func:`hkt.data.parquet.prepared_checksums`), or a setting of the config
    (:data:`WHERE` aside) whose value differs."""
    diff = [f"{k}: {published.get(k)!r} published, {rerun.get(k)!r} now" for k in OUTCOME
            if published.get(k) != rerun.get(k)]
    if data := _data_difference(published, rerun, known):
        diff.append(data)
    a, b = flatten(published.get("config") or {}), flatten(rerun.get("config") or {})
    changed = [k for k in sorted(set(a) & set(b)) if a[k] != b[k] and not k.startswith(WHERE)]
    diff += [f"config {k}: {a[k]!r} published, {b[k]!r} now" for k in changed]
    return diff


def config_notes(published: dict[str, Any], rerun: dict[str, Any]) -> list[str]:
    """Settings only one config has (code that added a setting since, with its default), by
    name (:data:`WHERE` aside): named, not counted."""
    a, b = flatten(published.get("config") or {}), flatten(rerun.get("config") or {})
    only = lambda x, y: sorted(k for k in set(x) - set(y) if not k.startswith(WHERE))  # noqa: E731
    return [f"config only {side}: {', '.join(keys)}"
            for side, keys in (("published", only(a, b)), ("now", only(b, a))) if keys]


@dataclass(frozen=True)
class HistoryAgreement:
    """How two histories of one run agree: values compared, equal as floats, and the largest
    relative difference (0 where all are equal); ``steps_differ`` when their logged steps or
    empty cells differ (then nothing else is compared)."""

    values: int
    equal: int
    largest: float
    steps_differ: str = ""

    @property
    def identical(self) -> bool:
        return not self.steps_differ and self.equal == self.values

    def digits(self) -> int:
        """Significant digits the two agree to everywhere (at least), 17 when identical."""
        return max(0, math.floor(-math.log10(self.largest))) if self.largest > 0 else 17

    def __str__(self) -> str:
        if self.steps_differ:
            return f"histories differ in their steps: {self.steps_differ}"
        if self.identical:
            return f"history identical ({self.values} values)"
        digits = self.digits()  # few where training grew a rounding difference (S4D, issue 72)
        return (f"history equal in {self.equal} of {self.values} values, the others differ "
                f"(largest relative difference {self.largest:.2g}: {digits} significant "
                f"digit{'' if digits == 1 else 's'} agree everywhere)")


def compare_run_histories(published: Path, rerun: Path) -> HistoryAgreement | str:
    """:func:`compare_histories` of two run folders' ``history.csv``, or what is missing, in
    words (an external baseline writes none)."""
    lacking = [f"{side} run has no {HISTORY_NAME}" for side, d in (("the published", published),
               ("the rerun", rerun)) if not (d / HISTORY_NAME).is_file()]
    if lacking:
        return "; ".join(lacking)
    return compare_histories(read_history(published), read_history(rerun))


def compare_histories(published: list[dict[str, Any]], rerun: list[dict[str, Any]]) -> HistoryAgreement:
    """Compare two histories (:func:`hkt.run_record.read_history` rows) value by value, timings
    (:data:`TIMINGS`) aside."""
    a, b = {r["step"]: r for r in published}, {r["step"]: r for r in rerun}
    if list(a) != list(b):
        gone, new = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        return HistoryAgreement(0, 0, 0.0, f"steps only published {gone[:5]}, only now {new[:5]}")
    values = equal = 0
    largest = 0.0
    for step, row in a.items():
        for col in (c for c in STEP_METRICS if c not in TIMINGS):
            x, y = row.get(col), b[step].get(col)
            if (x is None) != (y is None):
                return HistoryAgreement(0, 0, 0.0, f"step {step} {col}: {x} published, {y} now")
            if x is None:
                continue
            values += 1
            equal += x == y
            if x != y:
                largest = max(largest, abs(x - y) / max(abs(x), 1e-30))
    return HistoryAgreement(values, equal, largest)


def rerun_differences(published: Path, rerun: Path, known: Sequence[dict[str, dict[str, str]]] = ()
                      ) -> tuple[list[str], list[str]]:
    """A rerun's folder against its published run's: what keeps it from standing in
    (:func:`outcome_differences`, predictions that differ or are not their record's, none where
    the published run kept some) and what is only said of it (its history's agreement first,
    then the settings only one config has, and whether its predictions are new)."""
    a, b = load_record(published / "record.json"), load_record(rerun / "record.json")
    diffs = outcome_differences(a, b, known)
    notes = [str(compare_run_histories(published, rerun)), *config_notes(a, b)]
    try:
        mine, theirs = read_checked(rerun, b), read_checked(published, a)
    except HKTError as exc:  # a predictions file that is not its record's
        return [*diffs, str(exc)], notes
    if mine is not None and theirs is not None:
        same = mine.equals(theirs)
        notes.append("predictions identical" if same else "predictions DIFFER")
        diffs += [] if same else ["predictions differ"]
    elif mine is not None:
        notes.append("predictions new (the published run kept none)")
    elif theirs is not None:
        diffs.append("the published run has predictions, this one none")
    return diffs, notes
