"""The MLflow store: where it is by default, the lock under which it and its experiments are
created, opening it with one clear error per fault, the retry policy and the bounds of every
call to it, and the names a run's MLflow run shares with its readers.

Default store: ``sqlite:///<results_dir>/mlflow.db``, artifacts beside it in ``mlartifacts/``.
A fresh SQLite store is created under a file lock beside it (two processes must not both run
MLflow's schema migrations on one file), in a temporary file that is renamed into place once
its schema is complete: a creation stopped half-way (Ctrl-C, SIGTERM, a full disk) leaves no
half-migrated store behind. MLflow's empty ``Default`` experiment (id 0, which its schema
creates) is deleted there (soft-deleted: MLflow does not make it again), so that the UI lists
only the experiments runs were logged to.

:func:`open_client` is the one way this package opens a store. Anything that goes wrong opening
or migrating it (a file that is not a database, a schema from another MLflow version, a store
locked by another process, a server that does not answer) becomes one :class:`StoreError`,
naming the store, what is wrong and what to do; nothing is written anywhere in that case.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from hkt.errors import ConfigError, HKTError, clip, exception_chain
from hkt.fileio import atomic_path, ensure_writable_dir

T = TypeVar("T")

__all__ = ["TrackingError", "StoreError", "RETRIES", "with_retry", "tracking_uri",
           "experiment_name", "default_tracking_uri", "sqlite_path", "artifact_root", "store_lock",
           "open_client", "bounded_requests", "ensure_experiment", "EXPERIMENT_TAGS",
           "DEFAULT_EXPERIMENT_ID", "SERIES_METRICS", "BEST_VAL_TAG"]

# MLflow 3's UI opens an experiment without this tag in GenAI mode ("Traces: No data available");
# this value makes it open on its runs, as a model-training experiment.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}

#: A run's MLflow metric for each ``history.csv`` series (:data:`hkt.run_record.STEP_METRICS`) whose
#: name there differs: validation accuracy has one metric, under the records' and tables' name,
#: logged at every evaluation.
SERIES_METRICS = {"val_acc": "val_accuracy"}
#: A run's best validation accuracy (the record's ``val_accuracy``, at metric ``best_step``), as
#: a tag: the ``val_accuracy`` metric's value in the runs list is its latest, the last evaluation.
BEST_VAL_TAG = "best_val_accuracy"

#: The experiment MLflow's schema creates in every new store (``Default``): no run of ours goes
#: there, so a store this module creates has it deleted.
DEFAULT_EXPERIMENT_ID = "0"

SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database
#: YAML's null and its spellings, which a tracking URI given as text must not be
NULL_WORDS = ("null", "none", "~")
ELSEWHERE = ("point MLFLOW_TRACKING_URI or tracking.uri at another store, or set "
             "tracking.enabled=false")


class TrackingError(HKTError):
    """The tracking store cannot be reached or refuses the run (after retries)."""


class StoreError(TrackingError):
    """The MLflow store cannot be opened or used; the message names it and says what to do."""


# substrings of errors worth retrying: a busy SQLite store, a server restarting
_TRANSIENT = ("database is locked", "database table is locked", "database is busy",
              "sqlite_busy", "unable to open database file", "disk i/o error",
              "deadlock", "connection reset", "connection refused", "temporarily unavailable",
              "timed out", "status code 503", "status code 502", "status code 504",
              "status code 429")



RETRIES = {"count": 0}  # transient failures retried in this process (diagnostics, tests)


#: What an MLflow store answers the second of two runs that create one dataset at once (jobs
#: side by side on one server): transient for logging a dataset, whose retry finds the row.
DATASET_RACE = "unique constraint failed: datasets"


def _is_transient(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        text += f" {type(cause).__name__}: {cause}".lower()
    return any(t in text for t in _TRANSIENT)


_UNWRITABLE = ("readonly database", "read-only database", "read-only file system",
               "database or disk is full", "no space left", "permission denied")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


_FULL = ("database or disk is full", "no space left")


def _is_full(exc: BaseException) -> bool:
    """A store whose disk is full (SQLite's ``database or disk is full``, ENOSPC)."""
    cause = exc.__cause__ or exc.__context__
    return any(t in f"{exc} {cause or ''}".lower() for t in _FULL) or \
        getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)


def full_disk(store: str) -> OSError:
    """The error of an SQLite store whose disk is full, as a full disk is everywhere else: an
    ``OSError`` (ENOSPC) naming the store's file, which the CLI prints as the one line of every
    full disk (:func:`hkt.cli.main.describe_os_error`: the space free there, what to do)."""
    db = sqlite_path(store)
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(db) if db is not None else store)


class _QuietStoreErrors(logging.Filter):
    """Drops MLflow's own log of an SQLAlchemy error (its whole traceback, some 40 lines, at
    ERROR): :func:`with_retry` retries the error or reports it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


_QUIET = _QuietStoreErrors()


def _is_unwritable(exc: BaseException) -> bool:
    """A store that cannot take writes (full disk, read-only): retrying does not help."""
    cause = exc.__cause__ or exc.__context__
    text = f"{exc} {cause or ''}".lower()
    return any(t in text for t in _UNWRITABLE)


def with_retry(fn: Callable[..., T], *args: Any, what: str = "MLflow call",
               attempts: int = 12, base_delay: float = 0.05, max_delay: float = 5.0,
               also: tuple[str, ...] = (), within_s: float | None = None,
               store: str | None = None, **kwargs: Any) -> T:
    """Call ``fn`` and retry transient store errors (``database is locked`` …) with backoff;
    ``also``: more error texts (lower case) that are transient for this call. ``store``: the
    tracking URI ``fn`` writes to; an SQLite store on a full disk raises :func:`full_disk`.

    Delays grow as ``base_delay * 2**i`` (capped at ``max_delay``) with full jitter, so
    contending processes spread out; about a minute in total before giving up, or, with
    ``within_s``, no retry that would start more than ``within_s`` seconds after the first call
    (a tracking server that does not answer must not hold a training run for a minute).
    """
    logger = logging.getLogger("mlflow.store.db.utils")
    if _QUIET not in logger.filters:
        logger.addFilter(_QUIET)
    start = time.monotonic()
    for i in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - filtered by _is_transient
            transient = _is_transient(exc) or any(t in str(exc).lower() for t in also)
            delay = min(max_delay, base_delay * 2 ** i)
            late = within_s is not None and time.monotonic() - start + delay > within_s
            if not transient or i == attempts - 1 or late:
                if store is not None and sqlite_path(store) is not None and _is_full(exc):
                    raise full_disk(store) from exc
                if _is_unwritable(exc):
                    raise TrackingError(f"{what} failed: the MLflow store is not writable "
                                        f"({_first_line(exc)}); free space or fix its permissions, "
                                        "point MLFLOW_TRACKING_URI or tracking.uri elsewhere, or set "
                                        "tracking.enabled=false") from exc
                if transient:
                    cause = exc.__cause__ or exc.__context__
                    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    if cause is not None:
                        why += f" ({str(cause).splitlines()[0]})"
                    raise TrackingError(f"{what} failed after {i + 1} attempts: {why}; "
                                        "is another process holding the store?") from exc
                raise
            RETRIES["count"] += 1
            time.sleep(delay / 2 + random.random() * delay / 2)
    raise AssertionError("unreachable")


def experiment_name(profile: str, task_id: str) -> str:
    """The MLflow experiment of the runs of a task under a budget: ``hkt-<profile>-<task id>``
    (the task config's name, so the LRA-length runs keep their own). The one rule:
    config/train.yaml calls it (resolver ``hkt.experiment``), the workflow's external baselines
    too (:meth:`hkt.workflow.grid.Grid.experiment`)."""
    return f"hkt-{profile}-{task_id}"


def tracking_uri(uri: str | None, results_dir: str | Path) -> str:
    """The store a suite's runs log to, the one rule for the workflow, ``hkt train``, the
    baselines and ``hkt doctor``: ``uri`` when given (config ``tracking_uri`` /
    ``tracking.uri``), else ``$MLFLOW_TRACKING_URI``, else the SQLite store of ``results_dir``.
    YAML's null written as text (Snakemake's ``--config tracking_uri=null`` gives ``'null'``) is
    a :class:`ConfigError`: MLflow would take it for a folder and make a store named ``null``."""
    given = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if given is not None and str(given).strip().lower() in NULL_WORDS:
        source = "the config's tracking_uri or tracking.uri" if uri else "$MLFLOW_TRACKING_URI"
        raise ConfigError(
            f"tracking URI {given!r} (from {source}) is the word {str(given).strip()}, not an "
            "empty setting: MLflow would make a store in a folder of that name; for the results "
            "directory's store (sqlite:///RESULTS/mlflow.db) leave it out, or give "
            "`--config tracking_uri=` (empty) or `tracking_uri: null` in a --configfile "
            "(Snakemake's --config reads null as text); else name a store (sqlite:///…, http://…)")
    return str(given or default_tracking_uri(results_dir))


def default_tracking_uri(results_dir: str | Path) -> str:
    """``sqlite:///<results_dir>/mlflow.db`` (absolute): the store of a results directory."""
    path = Path(results_dir).expanduser().resolve() / "mlflow.db"
    return f"sqlite:///{path}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):])
    return None


def artifact_root(uri: str) -> str | None:
    """Artifacts of a SQLite store go beside it (``mlartifacts/``); servers decide for themselves."""
    db = sqlite_path(uri)
    if db is None:
        return None
    return (db.parent / "mlartifacts").resolve().as_uri()


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialise store and experiment creation across processes (SQLite stores only): the lock
    ``hkt train``, the baselines and the workflow's store initialisation all take."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock", timeout=300):
        yield


# MLflow's settings of its HTTP requests (mlflow.environment_variables), read at each request
_HTTP_TIMEOUT, _HTTP_RETRIES = "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"


@contextmanager
def bounded_requests(timeout_s: float | None) -> Iterator[None]:
    """MLflow's HTTP requests within this block: ``timeout_s`` each (rounded up to a second),
    no retries of their own (:func:`with_retry`'s are bounded in time); None: nothing changes."""
    if timeout_s is None:
        yield
        return
    bound = {_HTTP_TIMEOUT: str(max(1, math.ceil(timeout_s))), _HTTP_RETRIES: "0"}
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


def ensure_experiment(client: Any, uri: str, name: str, tags: dict[str, str], *,
                      timeout_s: float | None = None, within_s: float | None = None) -> str:
    """The id of experiment ``name`` in the store ``uri`` (``client``'s), created with ``tags``
    and the store's artifact root under :func:`store_lock` if it does not exist, its ``tags``
    set if it does; each call retried (:func:`with_retry`, for at most ``within_s`` where
    given), requests bounded by ``timeout_s`` (:func:`bounded_requests`). A deleted experiment is a :class:`TrackingError`."""
    from mlflow.exceptions import MlflowException  # mlflow: only when a store is written

    def existing() -> str | None:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            return None
        if exp.lifecycle_stage == "deleted":
            raise TrackingError(f"MLflow experiment '{name}' is deleted in {uri}; restore it or "
                                "set tracking.experiment")
        for key, value in tags.items():
            if exp.tags.get(key) != value:
                client.set_experiment_tag(exp.experiment_id, key, value)
        return exp.experiment_id

    def get_or_create() -> str:
        found = existing()
        if found is not None:
            return found
        try:
            return client.create_experiment(name, tags=tags, artifact_location=artifact_root(uri))
        except MlflowException as exc:
            # another job created it since we looked (jobs start together on a tracking
            # server, which the store lock does not cover): use theirs
            if exc.error_code != "RESOURCE_ALREADY_EXISTS" or (found := existing()) is None:
                raise
            return found

    with store_lock(uri), bounded_requests(timeout_s):
        return with_retry(get_or_create, what=f"creating experiment '{name}'", store=uri,
                          within_s=within_s)


def open_client(uri: str, *, create: bool = True, within_s: float | None = None) -> Any:
    """An ``MlflowClient`` of ``uri`` whose store has been reached and has the schema of the
    installed MLflow. ``create``: make a missing SQLite store (else a missing one is an error:
    readers); ``within_s``: no retry starts later than this after the first try
    (:func:`with_retry`). Raises :class:`StoreError` for every fault of the store."""
    # mlflow takes seconds to import: here, not in the first try, whose time ``within_s`` counts
    import mlflow.tracking  # noqa: F401

    db = sqlite_path(uri)
    if db is not None:
        _check_sqlite_file(db, uri, create)
    try:
        with store_lock(uri):
            if db is not None and not db.exists():
                _create_sqlite(db)
            return with_retry(_reached_client, uri, what=f"opening the MLflow store {uri}",
                              store=uri, within_s=within_s)
    except StoreError:
        raise
    except TrackingError as exc:
        if db is not None and "locked" in str(exc).lower():
            raise StoreError(f"the MLflow store {db} is locked by another process (still after "
                             "a minute of retries): wait for it to finish, or stop it") from None
        raise StoreError(describe_store_error(uri, exc.__cause__ or exc)) from None
    except Exception as exc:  # noqa: BLE001 - every other fault of the store, described
        if db is not None and _is_full(exc):  # a full disk (creating the store too): its line
            if isinstance(exc, OSError) and exc.filename is not None:
                raise
            raise full_disk(uri) from None
        raise StoreError(describe_store_error(uri, exc)) from None


def _reached_client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient  # mlflow takes seconds to import: only when used

    client = MlflowClient(tracking_uri=uri)
    client.search_experiments(max_results=1)  # reaches the store (and checks its schema)
    return client


def _check_sqlite_file(db: Path, uri: str, create: bool) -> None:
    if not db.exists():
        if not create:
            raise StoreError(f"there is no MLflow store at {db}: check the path (or the results "
                             "directory), or run the workflow or `hkt train` to make one")
        try:
            ensure_writable_dir(db.parent)
        except OSError as exc:
            if _is_full(exc):
                raise  # the one line of a full disk, naming the directory
            raise StoreError(f"the MLflow store {db} cannot be created ({exc.filename}: "
                             f"{os.strerror(exc.errno) if exc.errno else exc}); fix the "
                             f"directory's permissions, or {ELSEWHERE}") from None
        return
    if db.is_dir():
        raise StoreError(f"the MLflow store {db} is a directory, not an SQLite file: {ELSEWHERE}")
    with open(db, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise StoreError(f"{db} is not an MLflow store: it is not an SQLite database (it starts "
                         f"with {head[:8]!r}, {db.stat().st_size} bytes); nothing was written to "
                         f"it. Move it aside (mv '{db}' '{db}.bad') to start a new store there, "
                         f"or {ELSEWHERE}")


def _create_sqlite(db: Path) -> None:
    """A complete new store at ``db``: migrated in a temporary file, its empty ``Default``
    experiment deleted (:data:`DEFAULT_EXPERIMENT_ID`), then renamed into place."""
    with atomic_path(db) as tmp:
        tmp.unlink()  # SQLite makes its own file; an empty one is not a database
        client = _reached_client(f"sqlite:///{tmp}")
        # soft-deleted, not removed: MLflow makes experiment 0 again where it finds none at all
        client.delete_experiment(DEFAULT_EXPERIMENT_ID)
        _dispose_engines(tmp)


def _dispose_engines(db: Path) -> None:
    """Close and forget MLflow's cached SQLAlchemy engine of the temporary file ``db``."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        with SqlAlchemyStore._engine_map_lock:
            for key in [k for k in SqlAlchemyStore._engine_map if k.endswith(db.name)]:
                SqlAlchemyStore._engine_map.pop(key).dispose()
    except Exception:  # noqa: BLE001 - best effort: an open connection follows the rename
        pass


def describe_store_error(uri: str, exc: BaseException) -> str:
    """One line for a fault opening the store ``uri``: what is wrong and what to do."""
    text = " ".join(f"{type(e).__name__}: {e}" for e in (exc, exc.__cause__) if e is not None)
    low = text.lower()
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    db = sqlite_path(uri)
    where = str(db) if db is not None else uri
    if "not a database" in low or "malformed" in low:
        return (f"{where} is not a usable MLflow store (SQLite says: {clip(first)}); nothing "
                f"was written to it. Move it aside (mv '{where}' '{where}.bad') to start a new "
                f"store there, or {ELSEWHERE}")
    if "out-of-date database schema" in low:
        found = _found_revision(text)
        if found is not None and not _known_revision(found):
            return (f"the MLflow store {where} was written by a newer MLflow (schema {found}, "
                    f"unknown to the installed mlflow {_mlflow_version()}): upgrade mlflow in "
                    f"this environment to the version that wrote it, or {ELSEWHERE}")
        return (f"the MLflow store {where} has an older schema ({found or 'unknown'}) than the "
                f"installed mlflow {_mlflow_version()} needs: back it up, then run "
                f"`mlflow db upgrade {uri}`; or {ELSEWHERE}")
    if any(t in low for t in ("connection refused", "max retries exceeded", "name or service",
                              "failed to establish", "timed out", "nodename nor servname")):
        return (f"the MLflow tracking server {uri} does not answer ({_why_silent(exc, first)}): "
                f"start it, "
                f"check the address, or {ELSEWHERE}")
    if "error code 401" in low or "not authenticated" in low:
        given = "the user name and password given were refused" if _credentials() else \
            "none was given"
        return (f"the MLflow tracking server {uri} asks for a user name and password ({given}): "
                "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or the [mlflow] "
                "section of ~/.mlflow/credentials) to an account of the server; see "
                "docs/clusters.md, \"Starting the tracking server\"")
    if "unable to open database file" in low or "readonly database" in low:
        return (f"the MLflow store {where} cannot be opened for writing ({clip(first)}): fix the "
                f"permissions of it and its directory, or {ELSEWHERE}")
    return f"cannot open the MLflow store {where}: {clip(first)}; {ELSEWHERE}"


def _why_silent(exc: BaseException, first: str) -> str:
    """Why a server did not answer, in its client's words: the deepest error of the chain that
    is urllib3's or requests' (``Read timed out. (read timeout=10)``, ``[Errno 111] Connection
    refused``, not the socket's bare ``timed out``), without its ``HTTPConnectionPool(…):``
    prefix; else MLflow's first line, cut after a word."""
    chain = [e for e in exception_chain(exc)[1:]
             if type(e).__module__.split(".")[0] in ("urllib3", "requests")]
    if not chain:
        return clip(first)
    text = str(chain[-1])
    for prefix in ("): Failed to establish a new connection: ", "): "):
        if prefix in text and text.startswith(("HTTPConnection", "HTTPSConnection")):
            text = text.split(prefix, 1)[1]
            break
    return clip(text)


def _credentials() -> str | None:
    """The user name MLflow sends to a tracking server (its environment or credentials file)."""
    from mlflow.utils.credentials import read_mlflow_creds

    return read_mlflow_creds().username


def _found_revision(text: str) -> str | None:
    import re

    m = re.search(r"found version (\w+)", text)
    return m.group(1) if m else None


def _known_revision(revision: str) -> bool:
    """Whether the installed MLflow's migrations know ``revision`` (else a newer MLflow wrote it)."""
    import mlflow

    versions = Path(mlflow.__file__).parent / "store" / "db_migrations" / "versions"
    return any(p.name.startswith(revision) for p in versions.glob("*.py"))


def _mlflow_version() -> str:
    import mlflow

    return mlflow.__version__
