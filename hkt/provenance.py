"""Where a result came from: the code's git state, and the suite run it belongs to, for run
records of every kind and their MLflow runs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import hkt

__all__ = ["SUITE_TAG", "RESULTS_DIR_TAG", "NO_SUITE", "SUITE_ENV", "suite_name", "job_suite",
           "SuiteRun", "code_digest", "git_state"]

#: The names of a run's suite run, each both an MLflow tag and a run-record field (stated once
#: here): the workflow suite's name (``hkt.workflow.suites``), and the results directory the
#: suite writes, absolute.
SUITE_TAG = "suite"
RESULTS_DIR_TAG = "results_dir"
#: The one stand-in for "no suite": runs made by hand, or by config files that name no suite.
#: It is the suite's name (``hkt.workflow.suites.Suite``), the MLflow tag and the ``--suite``
#: word; a record (JSON) and the runs table hold null for it. (Results of before 0.2.0, which
#: spelled it ``custom`` or ``mixed``, are migrated by ``scripts/migrate_results.py``.)
NO_SUITE = "none"
#: The one channel by which a job learns its suite: the workflow sets it for every job it starts
#: (a cluster node's too, and an external baseline's command), and ``hkt train`` and the
#: baselines read it (:func:`job_suite`); unset, a run belongs to no suite. It also pins the
#: choice of ``suite: auto`` (``hkt.workflow.suites``), so that a cluster node re-reading the
#: workflow chooses what the login node chose.
SUITE_ENV = "HKT_SUITE"


def suite_name(value: str | None) -> str:
    """A suite's name as read from a record, a tag or the environment: :data:`NO_SUITE` for
    none (null, or an empty ``$HKT_SUITE``)."""
    return NO_SUITE if value is None or value == "" else str(value)


def job_suite(env: Mapping[str, str] | None = None) -> str:
    """The suite this process runs for: ``$HKT_SUITE`` (:data:`SUITE_ENV`), else no suite."""
    return suite_name((os.environ if env is None else env).get(SUITE_ENV))


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite: its name (:data:`NO_SUITE` for none) and its results directory.

    Together they tell apart the runs a shared tracking server holds: two checkouts may run
    the same suite, and one results directory may hold several suites (smoke, then cpu).
    The results directory is None where it is not known (an MLflow run logged before runs were
    tagged with it)."""

    suite: str
    results_dir: str | None

    @classmethod
    def of(cls, suite: str | None, results_dir: str | Path) -> SuiteRun:
        """The suite run of a command started here: ``results_dir`` made absolute against the
        working directory, as the tracking store under it is (``hkt.train.tracking``)."""
        return cls(suite_name(suite), str(Path(results_dir).expanduser().resolve()))

    @classmethod
    def of_job(cls, results_dir: str | Path) -> SuiteRun:
        """The suite run of a job started here: its suite from ``$HKT_SUITE`` (:func:`job_suite`)."""
        return cls.of(job_suite(), results_dir)

    @classmethod
    def from_tags(cls, tags: Mapping[str, str | None]) -> SuiteRun:
        """The suite run an MLflow run's ``tags`` (or a record's fields) name (None for a
        results directory they lack)."""
        return cls(suite_name(tags.get(SUITE_TAG)), tags.get(RESULTS_DIR_TAG) or None)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SuiteRun:
        """The suite run a run record names (its ``suite`` and ``results_dir`` fields)."""
        return cls(suite_name(record.get(SUITE_TAG)), record.get(RESULTS_DIR_TAG) or None)

    def tags(self) -> dict[str, str]:
        """The MLflow tags of a run of this suite run."""
        tags = {SUITE_TAG: self.suite}
        if self.results_dir:
            tags[RESULTS_DIR_TAG] = self.results_dir
        return tags

    def fields(self) -> dict[str, str | None]:
        """The run-record fields of a run of this suite run (null: no suite, or not known)."""
        return {SUITE_TAG: None if self.suite == NO_SUITE else self.suite,
                RESULTS_DIR_TAG: self.results_dir}


#: The files of the package that make its code (what :func:`code_digest` hashes): sources and
#: the data files shipped with them, not caches.
CODE_SUFFIXES = (".py", ".json", ".yaml", ".yml")
#: The distribution name in this project's pyproject.toml: a work tree that names another is not
#: this project's checkout, whatever it holds.
PROJECT = "hkt-bench"


def package_dir() -> Path:
    """The directory of the ``hkt`` package that runs."""
    return Path(hkt.__file__).resolve().parent


def code_files(root: Path | None = None) -> list[Path]:
    """The package's own files under ``root`` (default: the running package), sorted."""
    root = package_dir() if root is None else root
    return sorted(f for f in root.rglob("*") if f.is_file() and f.suffix in CODE_SUFFIXES
                  and "__pycache__" not in f.parts)


@cache
def code_digest() -> str:
    """The :func:`digest_of` the running package, read once per process (as a run's commit is
    read at its start: the files may change meanwhile)."""
    return digest_of(package_dir())


def digest_of(root: Path) -> str:
    """A short SHA-256 of a package's own files (each one's path inside ``root`` and bytes): it
    names the code wherever it runs, in a checkout, a copy, a wheel install or a vendored tree,
    where a git commit may name none or another project's."""
    h = hashlib.sha256()
    for f in code_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


def _git(root: Path, *args: str) -> str | None:
    """The output of ``git -C root ARGS``; None where it fails."""
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _is_this_project(top: Path) -> bool:
    """Whether the work tree at ``top`` is this project's: its pyproject.toml names it."""
    try:
        return tomllib.loads((top / "pyproject.toml").read_text())["project"]["name"] == PROJECT
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return False


def git_state(pkg: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout the ``hkt`` package ``pkg`` (default: the running one)
    belongs to.

    The commit names the code only where the package is this project's checkout: the package
    directory sits at the top of a git work tree, every one of its files is tracked, and none
    differs from the commit. Otherwise (a copy inside another repository, untracked files in
    the package, edits to it, no git) the commit is None and :func:`code_digest` alone names the
    code. Dirty means tracked files of the work tree differ from the commit (edits outside the
    package, e.g. to ``config/``, keep the commit and set dirty); untracked files do not count.
    (None, None) outside git."""
    pkg = package_dir() if pkg is None else pkg.resolve()
    top = _git(pkg, "rev-parse", "--show-toplevel")
    commit = _git(pkg, "rev-parse", "HEAD")
    status = _git(pkg, "status", "--porcelain", "--untracked-files=no")
    if top is None or commit is None or status is None:
        return None, None
    dirty = bool(status.strip())
    if Path(top.strip()).resolve() != pkg.parent or not _is_this_project(pkg.parent):
        return None, None  # a copy of the package inside another project's repository
    tracked = _git(pkg.parent, "ls-files", "--", pkg.name)
    changed = _git(pkg.parent, "status", "--porcelain", "--untracked-files=no", "--", pkg.name)
    if tracked is None or changed is None:
        return None, None
    names = {pkg.name + "/" + f.relative_to(pkg).as_posix() for f in code_files(pkg)}
    if not names <= set(tracked.splitlines()) or changed.strip():
        return None, dirty  # the package's code is not the commit's: untracked or edited files
    return commit.strip(), dirty
