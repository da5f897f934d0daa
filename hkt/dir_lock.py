"""OS locks (``flock``) on a file that say who holds them: the one mechanism behind the workflow's
hold on its results directory (:mod:`hkt.workflow.results_lock`) and the holds of ``hkt
aggregate`` on its ``--out`` and of ``scripts/publish_results.py`` on a publication
(:mod:`hkt.staging`). The OS releases the lock when its holder exits, SIGKILL included, so a
killed holder never blocks the next one; the file names the holder (host, pid, start time, and
what the caller adds) for the message that refuses a second process.

A lock held for a while (:func:`holding`) removes its file when it lets go, so that nothing is
left beside a publication; it checks, once it has the lock, that the file it locked is still the
one at its path (a holder that let go meanwhile removed it), else it takes the new one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from hkt.errors import HKTError

__all__ = ["Busy", "describe", "holder", "holding", "take"]


class Busy(HKTError):
    """Another process holds the lock; ``holder`` says who (as its file names it)."""

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        self.path, self.holder = path, holder
        super().__init__(f"{path} is held by {describe(holder)}")


def take(path: Path, about: dict[str, Any] | None = None) -> IO[str]:
    """Lock ``path`` (created) for this process without waiting and write who holds it (host,
    pid, start time and ``about``): the open file, to be kept open while the lock is held.
    Raises :class:`Busy` where another process holds it."""
    while True:
        fh = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise Busy(path, holder(path)) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        fh.close()  # the file was removed by a holder letting go: lock the one at the path now
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), **(about or {}),
                             "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        fh.flush()
    except OSError as exc:  # a full disk: let go of the lock, and name the file
        try:
            fh.close()  # its flush fails again; the file is closed all the same
        except OSError:
            pass
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    return fh


@contextmanager
def holding(path: Path, about: dict[str, Any] | None = None) -> Iterator[None]:
    """Hold the lock ``path`` for the ``with`` block (:func:`take`; :class:`Busy` where another
    process holds it); its file is removed on the way out."""
    fh = take(path, about)
    try:
        yield
    finally:
        Path(path).unlink(missing_ok=True)  # before letting go: a waiter then sees a new file
        fh.close()


def holder(path: str | Path) -> dict[str, Any]:
    """Who holds (or last held) the lock file ``path``: host, pid, started and what its holder
    added; empty where it says nothing (not yet written, or gone)."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    return info if isinstance(info, dict) else {}


def describe(info: dict[str, Any]) -> str:
    """A holder (:func:`holder`) in words, for a message that refuses a second process."""
    if not info:
        return "a process that has not yet said who it is"
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, running since "
            f"{info.get('started', '?')}")
