"""SIGINT and SIGTERM as a user wants them: one line, an exit status that says which, and
nothing half-written.

SLURM sends SIGTERM at preemption and at a job's time limit (and ``--signal`` earlier); so do
``docker stop`` and ``kill``. Without a handler Python dies of SIGTERM at once (no ``finally``
runs, an MLflow run stays RUNNING) and turns SIGINT into a ``KeyboardInterrupt`` traceback.

:func:`handled` (installed by ``hkt``'s entry point around every command) turns either signal
into :class:`Stopped`, raised where the program is, so that ``finally`` blocks and atomic writers
(:mod:`hkt.fileio`) clean up; the CLI prints its message and exits ``128 + signal``.

Code that can stop at a better place asks for the signal to wait: inside :func:`deferred` a
signal is only recorded (:func:`pending`), and the code polls it at its safe points (the training
loop: after a step, where it writes a checkpoint of that step). If it has not stopped within
``grace_s`` seconds, or a second SIGINT comes (a person who will not wait; a repeated SIGTERM
is a sender's habit and waits for the timer), :class:`Stopped` is raised where it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Stopped", "handled", "deferred", "pending", "take", "disarm"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """The process was asked to stop by ``signum``. A ``BaseException``, as ``KeyboardInterrupt``:
    ``except Exception`` blocks must not swallow it. ``message`` is the one line the user sees."""

    def __init__(self, signum: int, message: str | None = None) -> None:
        self.signum = int(signum)
        self.message = message
        super().__init__(message or f"stopped by {self.name}")

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def with_message(self, message: str) -> "Stopped":
        return Stopped(self.signum, message)


class _State:
    deferring = 0  # nesting depth of deferred()
    grace_s = 0.0
    signum: int | None = None  # the signal received while deferring


_state = _State()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.deferring:
        if _state.signum is None:  # the first: stop at the next safe point, within the grace
            _state.signum = signum
            if _state.grace_s > 0:
                signal.setitimer(signal.ITIMER_REAL, _state.grace_s)
                return
        elif signum == signal.SIGTERM:
            # senders repeat SIGTERM (Snakemake passes SLURM's on to its job's processes): the
            # grace timer bounds the wait. A second Ctrl-C is a person who will not wait.
            return
    disarm()
    raise Stopped(_state.signum or signum)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    if _state.signum is not None:  # the grace period ran out before a safe point was reached
        raise Stopped(_state.signum)


@contextmanager
def handled(ending: bool = False) -> Iterator[None]:
    """Turn SIGINT/SIGTERM into :class:`Stopped` for the duration (main thread only; elsewhere,
    e.g. a command run from a thread, nothing changes). ``ending``: the process ends after the
    block (``hkt``'s own entry point), so they are ignored from then on rather than restored: a
    stop that comes once the command's work is done lets it exit with its own status, instead
    of killing it on its way out (the workflow would then delete the outputs it wrote whole)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in (*SIGNALS, signal.SIGALRM)}
    for s in SIGNALS:
        signal.signal(s, _on_signal)
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        yield
    finally:
        disarm()
        for s, h in saved.items():
            signal.signal(s, signal.SIG_IGN if ending and s in SIGNALS else h)


@contextmanager
def deferred(grace_s: float) -> Iterator[None]:
    """Within this block a first signal is recorded, not raised: poll :func:`pending` at safe
    points. After ``grace_s`` seconds without a stop (or at a second signal) it is raised."""
    _state.deferring += 1
    _state.grace_s = float(grace_s)
    try:
        yield
    finally:
        _state.deferring -= 1
        received = None
        if not _state.deferring:
            received, _state.signum = _state.signum, None
            disarm()
    if received is not None:  # the block ended without acting on the signal: stop now
        raise Stopped(received)


def take() -> int | None:
    """Act on the signal received inside :func:`deferred`: return it (or None), clear it and
    cancel the grace timer. The caller then stops at this safe point."""
    received, _state.signum = _state.signum, None
    if received is not None:
        disarm()
    return received


def pending() -> int | None:
    """The signal received inside :func:`deferred` and not yet acted on, or None."""
    return _state.signum


def disarm() -> None:
    """Cancel the grace timer (the caller is stopping now, at a safe point)."""
    if threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)
