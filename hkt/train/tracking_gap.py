"""A tracking server that stops answering never stalls training.

Its HTTP requests time out after ``tracking.server_timeout_s`` (MLflow's own retries off), a
call is retried for at most ``tracking.server_wait_s``, and the first call that still fails puts
the tracker out of use for the rest of the session (:attr:`GapKeeping.gap`): one warning line,
nothing more sent, and the record names the gap (``mlflow_gap``). :mod:`hkt.train.backfill`
completes the MLflow run later from ``history.csv`` and the record; a resumed session sends the
history rows the store lacks (:meth:`hkt.train.tracking.Tracker.backfill`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, TypeVar

from hkt.store import TrackingError, with_retry

T = TypeVar("T")

__all__ = ["GapKeeping"]

# MLflow's settings of its HTTP requests (mlflow.environment_variables), read at each request
_HTTP_TIMEOUT, _HTTP_RETRIES = "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"


class GapKeeping:
    """The bounded calls of :class:`hkt.train.tracking.Tracker` and the gap they may leave;
    the tracker sets the attributes declared here."""

    uri: str
    keep_going: bool  # a call that still fails leaves a gap (training), or raises (the rest)
    timeout_s: float | None  # None: no bound (a SQLite store: MLflow's and with_retry's policy)
    wait_s: float | None
    gap: dict[str, Any] | None  # what the MLflow run lacks, once a call has failed for good
    _logged_to: int  # the last step whose per-step metrics the store holds
    _buffer: list[Any]
    _say: Callable[[str], None]

    @contextmanager
    def _bounded(self) -> Iterator[None]:
        """MLflow's HTTP requests within this block: ``server_timeout_s`` each, no retries of
        its own (:meth:`_retry`'s are bounded in time); nothing changes without a bound."""
        if self.timeout_s is None:
            yield
            return
        bound = {_HTTP_TIMEOUT: str(max(1, math.ceil(self.timeout_s))), _HTTP_RETRIES: "0"}
        saved = {k: os.environ.get(k) for k in bound}
        os.environ.update(bound)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _retry(self, fn: Callable[..., T], *args: Any, what: str, within_s: float | None = None,
               **kwargs: Any) -> T:
        """:func:`with_retry` of ``fn``, each request bounded (:meth:`_bounded`); ``within_s``:
        no retry starts later than this after the first call (None: the full policy, as at a
        run's start, before there is training to stall)."""
        with self._bounded():
            return with_retry(fn, *args, what=what, within_s=within_s, **kwargs)

    def _send(self, fn: Callable[..., T], *args: Any, what: str, retried: bool = False,
              **kwargs: Any) -> T | None:
        """A call made while training (:meth:`_retry`; ``retried``: ``fn`` retries itself,
        within :attr:`wait_s`): with :attr:`keep_going`, if the store still fails, note the gap
        (:meth:`_lose`) and return None, and after a gap send nothing this session; without,
        raise as :func:`with_retry` does."""
        from mlflow.exceptions import MlflowException  # mlflow: see __init__

        if self.gap is not None:
            return None
        if not self.keep_going:  # a check or a baseline: the caller wants the error
            if retried:
                with self._bounded():
                    return fn(*args, **kwargs)
            return self._retry(fn, *args, what=what, **kwargs)
        since = time.monotonic()
        try:
            if retried:
                with self._bounded():
                    return fn(*args, **kwargs)
            return self._retry(fn, *args, what=what, within_s=self.wait_s, **kwargs)
        except (TrackingError, MlflowException, OSError) as exc:  # requests' errors are OSErrors
            self._lose(what, exc, time.monotonic() - since)
            return None

    def _lose(self, what: str, exc: BaseException, waited_s: float) -> None:
        """Stop tracking for this session: keep what is lost in :attr:`gap`, say it once."""
        self._buffer = []  # in history.csv, which the backfill reads
        if isinstance(exc, TrackingError) and exc.__cause__ is not None:
            exc = exc.__cause__  # the store's own words, not the retry's
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self.gap = {"logged_to_step": self._logged_to, "reason": f"{what}: {reason}"[:500],
                    "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "waited_s": round(waited_s, 1)}
        self._say(f"hkt: warning: MLflow tracking at {self.uri} lost while {what} ({reason[:200]}; "
                  f"gave up after {waited_s:.1f} s): training goes on without it. MLflow holds "
                  f"this run's steps up to {max(self._logged_to, 0)}; the rest is in history.csv "
                  "and the record (mlflow_gap). Once the server answers, the same command "
                  "completes the MLflow run")

