"""MLflow tracking for training runs, safe with many processes on one SQLite store: what a
run's MLflow run holds, and how it gets there.

Default store: ``sqlite:///<results_dir>/mlflow.db`` with artifacts beside it in
``<results_dir>/mlartifacts``; ``tracking.uri`` (default ``$MLFLOW_TRACKING_URI``) points runs
at a tracking server instead. The store itself (opening it, creating it under a file lock, the
retry policy :func:`~hkt.mlflow_store.with_retry` of every call, one error line per fault) is
:mod:`hkt.mlflow_store`'s; this module is a training run's use of it. The workflow runs jobs in
parallel, so each experiment is also created under the store's lock.

**What a run says of itself** beside its metrics (its tags, params, suite run, its model's
name, its data's digest and its experiment's comparison view) is :mod:`hkt.train.run_metadata`'s:
pure functions of the config and the run's facts, which this module logs.

**Batched, resumable logging.** Metrics are buffered and written in batches (one transaction
each): fewer writers contending for the SQLite lock. A resumed run reuses its MLflow run (the id
is kept in ``RUN_DIR/mlflow_run.json`` and in the checkpoint) and does not log again the
per-step values that run already holds: the replayed steps are skipped by a per-metric step
watermark read from the store at resume (the replay is deterministic, so the values would be
the same).

**A tracking server that stops answering never stalls training.** Its HTTP requests time out
after ``tracking.server_timeout_s`` (MLflow's own retries off), a call is retried for at most
``tracking.server_wait_s``, and the first call that still fails puts the tracker out of use for
the rest of the session (:attr:`Tracker.gap`): one warning line, nothing more sent, and the
record names the gap (``mlflow_gap``). :func:`hkt.train.finish.complete_tracking` completes the
MLflow run later from ``history.csv`` and the record; a resumed session sends the history rows
the store lacks (:meth:`Tracker.backfill`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from hkt import mlflow_store
from hkt.errors import clip
from hkt.run_record import STEP_METRICS
from hkt.mlflow_store import (DATASET_RACE, EXPERIMENT_TAGS, SERIES_METRICS, TrackingError,
                              open_client, with_retry)
from hkt.train.run_metadata import comparison_view_tags, dataset_digest, model_name, results_dir_of

T = TypeVar("T")

# The store (opening, locking, retrying, its names) is hkt.mlflow_store's: import it from there;
# what a run says of itself (tags, params, suite run, model name) is hkt.train.run_metadata's.
__all__ = ["tracking_uri", "Tracker", "NullTracker", "make_tracker", "log_dataset", "metric_name"]


def metric_name(series: str) -> str:
    """The MLflow metric of a ``history.csv`` series (:data:`hkt.mlflow_store.SERIES_METRICS`)."""
    return SERIES_METRICS.get(series, series)


#: The per-step metrics (history.csv's series), as MLflow names them: on a resume, the steps a
#: run logged already are skipped on replay (:meth:`Tracker._read_watermark`); anything else is
#: logged as given
_SERIES = frozenset(map(metric_name, STEP_METRICS))


def tracking_uri(tracking_cfg: Any) -> str:
    """``tracking.uri`` if set, else the SQLite store under ``tracking.results_dir``."""
    uri = tracking_cfg.get("uri") if hasattr(tracking_cfg, "get") else None
    return mlflow_store.tracking_uri(uri, results_dir_of(tracking_cfg))


def _chunks(items: list[T], n: int) -> Iterable[list[T]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class NullTracker:
    """Tracking disabled (``tracking.enabled=false``): same interface, does nothing."""

    enabled = False
    run_id: str | None = None
    uri: str | None = None
    experiment: str | None = None

    def start(self, run_id: str | None = None, *, params: dict[str, Any] | None = None,
              tags: dict[str, str] | None = None, start_time: float | None = None) -> str | None:
        return None

    gap: dict[str, Any] | None = None  # what MLflow lacks of this run (Tracker.gap)
    model_logged = False  # whether log_model reached the store

    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...

    def backfill(self, rows: Sequence[dict[str, Any]]) -> None: ...

    def log_final(self, metrics: dict[str, float], step: int) -> None: ...

    def set_tags(self, tags: dict[str, str]) -> None: ...

    def flush(self) -> None: ...

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...

    def log_dataset(self, family: str, data_dir: Path, checksums: dict[str, str],
                    sizes: dict[str, int], context: str = "training") -> None: ...

    def log_model(self, model: Any, example: Any) -> str:
        return ""

    def finish(self, status: str = "FINISHED") -> None: ...


class Tracker(NullTracker):
    """One MLflow run, created or resumed, written through batched, retried calls."""

    enabled = True

    def __init__(self, uri: str, experiment: str, run_name: str, *, flush_every: int = 200,
                 server_timeout_s: float | None = None, server_wait_s: float | None = None,
                 server_start_wait_s: float | None = None,
                 keep_going: bool = False, say: Callable[[str], None] | None = None):
        """``server_timeout_s`` and ``server_wait_s`` bound a tracking server's calls
        (a server that stops answering: the module's docstring; None: MLflow's and :func:`with_retry`'s own policy, as
        for a SQLite store, whose only transient fault is a lock held by a live process);
        ``server_start_wait_s``: a call at the run's start (opening the store, its experiment,
        the run and its params) gives up this long after its first request at most, its last
        request's ``server_timeout_s`` included (None: :func:`with_retry`'s own minute of retries);
        ``keep_going``: a logging call that still fails leaves a gap, and the caller goes on
        (training), instead of raising; ``say`` prints the warning line of a gap (default:
        stderr)."""
        self.uri, self.experiment, self.run_name = uri, experiment, run_name
        self.keep_going = keep_going
        self.flush_every = flush_every
        self.timeout_s, self.wait_s = server_timeout_s, server_wait_s
        # no retry of a start's call begins later than this, so that its last request ends in time
        self.start_within_s = None if server_start_wait_s is None else \
            max(0.0, server_start_wait_s - (server_timeout_s or 0.0))
        self._say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.gap = None
        self._logged_to = -1  # the last step whose per-step metrics the store holds
        with self._bounded():
            # one `hkt: error:` line for any fault of the store
            self.client = open_client(uri, within_s=self.start_within_s)
        self._buffer: list[Any] = []
        self._watermark: dict[str, int] = {}
        self._resumed = False  # a run of an earlier session: it may already hold final metrics
        self.run_id = None
        self.experiment_id = None

    # -- bounded calls and the gap they may leave ------------------------------------------
    def _bounded(self) -> Any:
        """MLflow's HTTP requests within this block bounded by ``server_timeout_s``
        (:func:`hkt.mlflow_store.bounded_requests`)."""
        return mlflow_store.bounded_requests(self.timeout_s)

    def _retry(self, fn: Callable[..., T], *args: Any, what: str, within_s: float | None = None,
               **kwargs: Any) -> T:
        """:func:`with_retry` of ``fn``, each request bounded (:meth:`_bounded`); ``within_s``:
        no retry starts later than this after the first call (None: the start's bound,
        :attr:`start_within_s`, before there is training to stall)."""
        within_s = self.start_within_s if within_s is None else within_s
        with self._bounded():
            return with_retry(fn, *args, what=what, within_s=within_s, store=self.uri, **kwargs)

    def _send(self, fn: Callable[..., T], *args: Any, what: str, retried: bool = False,
              **kwargs: Any) -> T | None:
        """A call made while training (:meth:`_retry`; ``retried``: ``fn`` retries itself,
        within :attr:`wait_s`): with :attr:`keep_going`, if the store still fails, note the gap
        (:meth:`_lose`) and return None, and after a gap send nothing this session; without,
        raise as :func:`with_retry` does."""
        from mlflow.exceptions import MlflowException  # mlflow: see __init__

        if self.gap is not None:
            return None
        since = time.monotonic()
        try:
            if retried:
                with self._bounded():
                    return fn(*args, **kwargs)
            return self._retry(fn, *args, what=what,
                               within_s=self.wait_s if self.keep_going else None, **kwargs)
        except (TrackingError, MlflowException, OSError) as exc:  # requests' errors are OSErrors
            if not self.keep_going:  # a check or a baseline: the caller wants the error
                raise
            self._lose(what, exc, time.monotonic() - since)
            return None

    def _lose(self, what: str, exc: BaseException, waited_s: float) -> None:
        """Stop tracking for this session: keep what is lost in :attr:`gap`, say it once."""
        self._buffer = []  # in history.csv, which the backfill reads
        if isinstance(exc, TrackingError) and exc.__cause__ is not None:
            exc = exc.__cause__  # the store's own words, not the retry's
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self.gap = {"logged_to_step": self._logged_to, "reason": clip(f"{what}: {reason}"),
                    "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "waited_s": round(waited_s, 1)}
        self._say(f"hkt: warning: MLflow tracking at {self.uri} lost while {what} ({clip(reason)}; "
                  f"gave up after {waited_s:.1f} s): training goes on without it. MLflow holds "
                  f"this run's steps up to {max(self._logged_to, 0)}; the rest is in history.csv "
                  "and the record (mlflow_gap). Once the server answers, the same command "
                  "completes the MLflow run")

    # -- setup -----------------------------------------------------------------------------
    def _experiment_id(self) -> str:
        return mlflow_store.ensure_experiment(self.client, self.uri, self.experiment,
                                              {**EXPERIMENT_TAGS, **comparison_view_tags()},
                                              timeout_s=self.timeout_s,
                                              within_s=self.start_within_s)

    def start(self, run_id: str | None = None, *, params: dict[str, Any] | None = None,
              tags: dict[str, str] | None = None, start_time: float | None = None) -> str:
        """Create a run, or resume ``run_id`` (if the store still has it); log params and tags.

        ``start_time`` (seconds since the epoch, default now) is when a new run began: the
        session start, so that MLflow's "Duration" spans the data loading and model building
        that precede this call. A resumed run keeps the start of its first session."""
        from mlflow.entities import Param  # mlflow: see __init__
        from mlflow.exceptions import MlflowException  # mlflow: see __init__

        self.experiment_id = self._experiment_id()
        run = None
        if run_id:
            try:
                run = self._retry(self.client.get_run, run_id, what="reading the MLflow run")
            except MlflowException:
                run = None  # not in this store (e.g. a different tracking URI): start afresh
        if run is not None and run.info.lifecycle_stage != "deleted":
            self.run_id, self.run_name = run.info.run_id, run.info.run_name or self.run_name
            self._retry(self.client.update_run, self.run_id, status="RUNNING",
                       what="resuming the MLflow run")
            self._watermark = self._read_watermark()
            self._logged_to = max(self._watermark.values(), default=-1)
            self._resumed = True
        else:
            run = self._retry(self.client.create_run, self.experiment_id, run_name=self.run_name,
                             tags=dict(tags or {}),
                             start_time=None if start_time is None else int(start_time * 1000),
                             what="creating the MLflow run")
            self.run_id = run.info.run_id
        items = [Param(k, _param_value(v)) for k, v in (params or {}).items()]
        existing = {} if run is None else dict(getattr(run.data, "params", {}) or {})
        # a resumed run holds its params already (the resume checked config and data are the
        # same); MLflow refuses to change one, so a key it has is not logged again
        items = [p for p in items if p.key not in existing]
        for chunk in _chunks(items, 100):
            self._retry(self.client.log_batch, self.run_id, params=chunk, what="logging params")
        if tags:
            self.set_tags(tags)
        self._log_environment()
        return self.run_id

    def _log_environment(self) -> None:
        """The installed distributions as artifact ``environment.json``, their digest as a tag."""
        from hkt import environment

        with tempfile.TemporaryDirectory() as tmp:
            self.set_tags({environment.DIGEST_TAG: environment.save(tmp)})
            self.log_artifact(Path(tmp) / environment.ENV_FILE)

    def _read_watermark(self) -> dict[str, int]:
        marks = {}
        for key in sorted(_SERIES):
            hist = self._retry(self.client.get_metric_history, self.run_id, key,
                              what="reading metric history")
            if hist:
                marks[key] = max(m.step for m in hist)
        return marks

    # -- logging ---------------------------------------------------------------------------
    def set_tags(self, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag  # mlflow: see __init__

        items = [RunTag(k, str(v)[:8000]) for k, v in tags.items()]
        for chunk in _chunks(items, 100):
            self._send(self.client.log_batch, self.run_id, tags=chunk, what="logging tags")

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Buffer per-step metrics (keyed as in ``history.csv``, logged as :func:`metric_name`
        names them); steps already in the store (replay after resume) are skipped."""
        from mlflow.entities import Metric  # mlflow: see __init__

        if self.gap is not None:
            return
        now = int(time.time() * 1000)
        for k, v in metrics.items():
            k = metric_name(k)
            if v is None or step <= self._watermark.get(k, -1):
                continue
            self._buffer.append(Metric(k, float(v), now, int(step)))
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def backfill(self, rows: Sequence[dict[str, Any]]) -> None:
        """Send the per-step metrics of ``rows`` (``history.csv``'s) that the store lacks: those
        past each metric's watermark, as a gap in an earlier session left them."""
        for row in rows:
            self.log_metrics({k: row.get(k) for k in STEP_METRICS}, int(row["step"]))
        self.flush()

    def log_final(self, metrics: dict[str, float], step: int) -> None:
        """Summary metrics (final accuracies, parameter count, timings), once per run: a final
        phase that was killed before the record and is run again does not log them twice."""
        from mlflow.entities import Metric  # mlflow: see __init__

        logged: set[str] = set()
        if self._resumed:
            for k in metrics:
                history = self._send(self.client.get_metric_history, self.run_id, k,
                                     what="reading metric history")
                if history is None:
                    return  # the store is gone: the gap says so
                if any(m.step == int(step) for m in history):
                    logged.add(k)
        now = int(time.time() * 1000)
        self._buffer.extend(Metric(k, float(v), now, int(step))
                            for k, v in metrics.items() if v is not None and k not in logged)
        self.flush()

    def flush(self) -> None:
        buf, self._buffer = self._buffer, []
        for chunk in _chunks(buf, 1000):
            if self._send(self.client.log_batch, self.run_id, metrics=chunk,
                          what="logging metrics") is None and self.gap is not None:
                return
            self._logged_to = max([self._logged_to, *(m.step for m in chunk
                                                      if m.key in _SERIES)])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._send(self.client.log_artifact, self.run_id, str(path), artifact_path,
                   what=f"logging artifact {Path(path).name}")

    def log_dataset(self, family: str, data_dir: Path, checksums: dict[str, str],
                    sizes: dict[str, int], context: str = "training") -> None:
        """The prepared data as this run's MLflow dataset input (:func:`log_dataset`)."""
        self._send(log_dataset, self.client, self.run_id, family, data_dir, checksums, sizes,
                   context, within_s=self.wait_s, what="logging the dataset", retried=True)

    def log_model(self, model: Any, example: Any) -> str:
        """The trained model as an MLflow model of this run, named after it (:func:`model_name`:
        the runs table's Models column, ``runs:/<run id>/<name>``):
        :class:`~hkt.models.serving.TokenClassifier` around ``model``, with the signature and
        input ``example`` (token ids padded with -1). Returns its URI."""
        import copy

        import mlflow
        import mlflow.pytorch
        import numpy as np
        import torch
        from mlflow.models import ModelSignature
        from mlflow.types import Schema, TensorSpec

        from hkt.models.serving import TokenClassifier

        served = TokenClassifier(copy.deepcopy(model).cpu()).eval()
        example = example.cpu()
        with torch.no_grad():
            classes = served(example).shape[-1]
        # any batch and length (up to the model's), not the example's
        signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype(np.int64), (-1, -1))]),
                                   outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, classes))]))
        # the fluent API logs to the active run of the global tracking URI: this run, resumed
        # (its end is finish()'s); mlflow.set_tracking_uri also sets $MLFLOW_TRACKING_URI, so
        # both are put back afterwards (an in-process caller keeps its own)
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        mlflow.set_tracking_uri(self.uri)
        name = model_name(self.run_name)

        def log() -> Any:
            with mlflow.start_run(run_id=self.run_id):
                return mlflow.pytorch.log_model(
                    served, name=name, signature=signature, input_example=example.numpy(),
                    serialization_format="pickle",  # torch.export would fix T
                    pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"])

        try:
            info = None if self.gap is not None else self._send(log, what="logging the model")
        finally:
            mlflow.set_tracking_uri(previous)
        self.model_logged = self.model_logged or info is not None
        return f"runs:/{self.run_id}/{name}" if info is not None else ""

    def finish(self, status: str = "FINISHED") -> None:
        self.flush()
        self._send(self.client.set_terminated, self.run_id, status, what="closing the MLflow run")


def log_dataset(client: Any, run_id: str, family: str, data_dir: str | Path,
                checksums: dict[str, str], sizes: dict[str, int] | None,
                context: str = "training", within_s: float | None = None) -> None:
    """A run's prepared data as its MLflow dataset input (the runs table's Dataset column): name =
    the data family, digest = :func:`dataset_digest`, source = the data directory, and each split's
    size and SHA-256 in MLflow's ``profile`` field (its summary, not a budget); ``context`` a tag;
    ``within_s`` bounds the retries (:func:`with_retry`)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag  # seconds to import: when used

    summary = {"sha256": checksums, **({"num_rows": sizes} if sizes else {})}
    dataset = Dataset(name=family, digest=dataset_digest(checksums), source_type="local",
                      source=json.dumps({"uri": str(Path(data_dir).resolve())}),
                      profile=json.dumps(summary))
    tag = InputTag(key="mlflow.data.context", value=context)
    with_retry(client.log_inputs, run_id, datasets=[DatasetInput(dataset, [tag])],
               what="logging the dataset", also=(DATASET_RACE,), within_s=within_s)


def _param_value(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, (list, dict)) else str(v)
    return text[:6000]


def make_tracker(cfg: Any, say: Callable[[str], None] | None = None) -> NullTracker:
    """A training run's :class:`Tracker` for ``cfg.tracking`` (or a :class:`NullTracker` when
    disabled): it keeps going past a store that stops answering, whose calls are bounded by
    ``tracking.server_timeout_s``, ``server_wait_s`` and ``server_start_wait_s`` where it is a
    server."""
    t = cfg.tracking
    if not t.enabled:
        return NullTracker()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uri = tracking_uri(t)
    server = uri.startswith(("http://", "https://"))
    return Tracker(uri, str(t.experiment), str(t.run_name), say=say, keep_going=True,
                   server_timeout_s=float(t.server_timeout_s) if server else None,
                   server_wait_s=float(t.server_wait_s) if server else None,
                   server_start_wait_s=float(t.server_start_wait_s) if server else None)
