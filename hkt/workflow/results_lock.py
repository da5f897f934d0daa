"""One running workflow per results directory.

Snakemake's own lock lives in the working directory (``.snakemake/``), so two checkouts pointed
at one ``results_dir`` (a shared project directory on a cluster) do not see each other: their
jobs would train into the same run directories and race on one MLflow store. The workflow takes
this lock when it starts executing (not for dry runs): an OS lock (``flock``) on
``RESULTS_DIR/.workflow.lock``, held for the life of the Snakemake process and released by the
OS even when that process is killed, so a crashed run never blocks the next one. The file also
says who holds it (host, pid, checkout, start time), for the message that refuses a second run
(:mod:`hkt.dir_lock`, the mechanism every such lock shares).
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO, Any

from hkt.dir_lock import Busy, holder, take
from hkt.errors import HKTError

__all__ = ["LOCK_NAME", "ResultsInUse", "claim_results_dir", "holder", "is_held"]

LOCK_NAME = ".workflow.lock"


class ResultsInUse(HKTError):
    """Another running workflow holds the results directory."""


_held: dict[str, IO[str]] = {}  # results directory -> its open, locked file (this process)


def claim_results_dir(results_dir: str | Path, checkout: str | Path) -> Path:
    """Lock ``results_dir`` for this process (a workflow run from ``checkout``); return the lock
    file. Raises :class:`ResultsInUse` naming the holder when another process has it. Claiming
    a directory this process holds already is a no-op."""
    results = Path(results_dir).resolve()
    path = results / LOCK_NAME
    if str(results) in _held:
        return path
    results.mkdir(parents=True, exist_ok=True)
    try:
        fh = take(path, {"checkout": str(Path(checkout).resolve())})
    except Busy as exc:
        raise ResultsInUse(_in_use(results, exc.holder)) from None
    _held[str(results)] = fh  # kept open: closing the file would release the lock
    return path


def is_held(results_dir: str | Path) -> bool:
    """Whether a live process holds ``results_dir``'s lock now (its holder is a running
    workflow). Asks the OS, not the pid the file names: a process that has exited, a zombie not
    yet reaped too, holds no lock. A free lock is taken and let go at once."""
    try:
        fh = open(Path(results_dir) / LOCK_NAME, encoding="utf-8")
    except FileNotFoundError:
        return False
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def _in_use(results: Path, other: dict[str, Any]) -> str:
    who = (f"pid {other.get('pid', '?')} on host {other.get('host', '?')}, from the checkout "
           f"{other.get('checkout', '?')}, running since {other.get('started', '?')}"
           if other else "a process that has not yet said who it is")
    return (f"the results directory {results} is in use by another running workflow: {who}. "
            "Wait for it to finish (or stop it), or give this run its own results directory "
            "(--config results_dir=DIR)")
