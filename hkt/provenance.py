"""Where a result came from: the code's git state, and the suite run it belongs to, for run
records of every kind and their MLflow runs."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import hkt

__all__ = ["SUITE_TAG", "RESULTS_DIR_TAG", "NO_SUITE", "SuiteRun", "git_state"]

#: The names of a run's suite run, each both an MLflow tag and a run-record field (stated once
#: here): the workflow suite's name (``hkt.workflow.suites``), and the results directory the
#: suite writes, absolute.
SUITE_TAG = "suite"
RESULTS_DIR_TAG = "results_dir"
#: The suite of a run no suite asked for, as a tag (MLflow tags are strings; records hold null).
NO_SUITE = "none"


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite: its name and its results directory.

    Together they tell apart the runs a shared tracking server holds: two checkouts may run
    the same suite, and one results directory may hold several suites (smoke, then cpu).
    None stands for no suite, or for a results directory not known (an MLflow run logged before
    runs were tagged with it)."""

    suite: str | None
    results_dir: str | None

    @classmethod
    def of(cls, suite: str | None, results_dir: str | Path) -> SuiteRun:
        """The suite run of a command started here: ``results_dir`` made absolute against the
        working directory, as the tracking store under it is (``hkt.train.tracking``)."""
        return cls(None if suite in (None, "", NO_SUITE) else str(suite),
                   str(Path(results_dir).expanduser().resolve()))

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> SuiteRun:
        """The suite run an MLflow run's ``tags`` name (None for a tag the run lacks)."""
        suite = tags.get(SUITE_TAG)
        return cls(None if suite in (None, "", NO_SUITE) else suite,
                   tags.get(RESULTS_DIR_TAG) or None)

    def tags(self) -> dict[str, str]:
        """The MLflow tags of a run of this suite run."""
        tags = {SUITE_TAG: self.suite or NO_SUITE}
        if self.results_dir:
            tags[RESULTS_DIR_TAG] = self.results_dir
        return tags

    def fields(self) -> dict[str, str | None]:
        """The run-record fields of a run of this suite run."""
        return {SUITE_TAG: self.suite, RESULTS_DIR_TAG: self.results_dir}


def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding the hkt package; (None, None) outside git.

    Dirty means tracked files differ from the commit; untracked files do not count."""
    root = Path(hkt.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=root, capture_output=True, text=True, timeout=30)
        return commit.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
