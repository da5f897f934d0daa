"""What a run leaves for the tables: its record (``RUN_DIR/record.json``) and ``history.csv``.

The one public writer for runs of every kind: ``hkt train`` and the external baselines
(:mod:`hkt.baselines.ngram`, or a script of another framework) build the record with
:func:`make_record` and write it with :func:`write_record`::

    from hkt.run_record import make_record, write_record
    write_record(make_record(task="listops", model="mine", variant="main", seed=0, profile="cpu",
                             config={...}, n_params=0, steps=0, best_step=None,
                             val_accuracy=0.41, test_accuracy=0.40, data_dir=DATA_DIR), RUN_DIR)

:func:`make_record` fills what every record states the same way (schema version, git commit,
package version, time of writing, the data's SHA-256 when not given) and validates the result
against the schema ``hkt/schemas/run_record.schema.json`` (docs/contracts.md lists the fields);
the MLflow fields may stay null. :func:`write_history` writes the per-step ``history.csv``.
Torch-free: reading and writing records needs neither torch nor MLflow.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

import hkt
from hkt.data_layout import SPLITS, split_file
from hkt.errors import HKTError
from hkt.fileio import atomic_write_text, sha256_file
from hkt.provenance import SuiteRun, code_digest, git_state

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"
HISTORY_NAME = "history.csv"
#: What ``hkt analyze`` writes per run (docs/contracts.md "Analyses").
ANALYSIS_FILE = "analysis.parquet"
#: The per-step series of a run, in ``history.csv`` after its ``step`` column.
STEP_METRICS = ("train_loss", "train_acc", "lr", "samples_per_s", "val_loss", "val_acc")
HISTORY_COLUMNS = ("step", *STEP_METRICS)
#: The ``section`` of ``hkt analyze``'s approximation rows, and their ``quantity``: the trained
#: model, and the same architecture at initialisation (the control).
APPROXIMATION_SECTION = "approximation"
APPROXIMATION_STATES = ("trained", "init")

__all__ = ["SCHEMA_VERSION", "RECORD_NAME", "HISTORY_NAME", "ANALYSIS_FILE", "STEP_METRICS",
           "APPROXIMATION_SECTION", "APPROXIMATION_STATES",
           "HISTORY_COLUMNS", "REBUILD", "DAMAGED_NAME", "RecordError", "set_aside_if_damaged", "schema", "validate_record", "load_record", "run_file",
           "make_record", "write_record", "write_history", "read_history"]


#: What to do about a record that does not load (a damaged record; docs/faults.md).
REBUILD = ("a damaged record: run the workflow again, which redoes a run whose record does not "
           "load, or the run's own `hkt train` command, which rebuilds the record from the run's "
           "final checkpoint (an external baseline's command runs it again)")


#: The name a record that does not load is set aside under (:func:`set_aside_if_damaged`).
DAMAGED_NAME = RECORD_NAME + ".damaged"


class RecordError(HKTError):
    """A run record that does not match the schema; ``problem`` says what is wrong, without what
    to do."""

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem or message


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON schema of run records (package data ``hkt/schemas/run_record.schema.json``)."""
    text = resources.files("hkt").joinpath("schemas/run_record.schema.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    """One validator for the process: building it compiles the schema (a record is validated
    when made, staged for MLflow and written; aggregating reads hundreds)."""
    return jsonschema.Draft202012Validator(
        schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def _non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first number in ``value`` (a record, or a part of it) that is not finite (NaN or
    ±inf, which ``json.dump`` writes and the schema's ``number`` lets through): its dotted
    place and value; None where every number is finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(record)", value
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def validate_record(record: dict[str, Any]) -> dict[str, Any]:
    """Check ``record`` against the schema, and that every number in it is finite; raise
    :class:`RecordError` naming the field."""
    bad = _non_finite(record)
    if bad is not None:
        raise RecordError(f"invalid run record: {bad[0]} is {bad[1]}, not a finite number")
    errors = sorted(_validator().iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for e in errors[:5]:
            where = ".".join(str(p) for p in e.absolute_path) or "(record)"
            lines.append(f"{where}: {e.message}")
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise RecordError("invalid run record: " + "; ".join(lines) + more)
    return record


def load_record(path: str | Path) -> dict[str, Any]:
    """Read and validate a record (a record.json file, or a run directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_NAME
    try:
        record = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise RecordError(f"no run record at {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problem = f"not valid JSON ({exc})"
        raise RecordError(f"{path} is {problem}: {REBUILD}", problem) from None
    try:
        record = validate_record(record)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}; {REBUILD}", str(exc)) from None
    return record


def run_file(run_dir: str | Path, name: str | Path) -> Path:
    """The file ``name`` of run folder ``run_dir`` (one its record names, or one published with
    the run), refused (:class:`RecordError`, one line) where it leads out of the folder: an
    absolute path, a ``..``, or a symlink (of the file or of a folder on the way) to elsewhere;
    reading it would read, and publishing it copy, a file the run never wrote."""
    run_dir, rel = Path(run_dir), Path(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise RecordError(f"{run_dir}: the run names {str(name)!r}, a path outside its folder: "
                          "a run's files lie in it; restore the run's own record")
    path = run_dir / rel
    try:
        inside = path.resolve().is_relative_to(run_dir.resolve())
    except (OSError, RuntimeError):  # a loop of links
        inside = False
    if not inside:
        raise RecordError(f"{path} is a link to {os.path.realpath(path)}, outside its run "
                          "folder: a run's files lie in it; replace the link by the run's own "
                          "file")
    return path


def set_aside_if_damaged(path: str | Path) -> str | None:
    """Rename a record (a ``record.json``, or a run directory holding one) that exists but does
    not load to :data:`DAMAGED_NAME` beside it (replacing an earlier one), so that nothing takes
    its run as finished: ``hkt train`` and the workflow then finish the run again (from its last
    checkpoint). Returns what was wrong with it; None where it loads or there is none."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_NAME
    if not path.exists():
        return None
    try:
        load_record(path)
    except RecordError as exc:
        os.replace(path, path.with_name(DAMAGED_NAME))
        return exc.problem
    return None


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def _given(**fields: Any) -> dict[str, Any]:
    """The optional ``fields`` that have a value (a record leaves out what it cannot say)."""
    return {k: v for k, v in fields.items() if v is not None}


def make_record(*, task: str, model: str, variant: str, seed: int, profile: str,
                config: dict[str, Any], n_params: int, steps: int, best_step: int | None,
                val_accuracy: float, test_accuracy: float, data_dir: str | Path,
                wall_time_s: float = 0.0, ms_per_step: float | None = None,
                samples_per_s: float | None = None, device: str = "cpu",
                val_loss: float | None = None, test_loss: float | None = None,
                test_examples: int | None = None, train_examples: int | None = None,
                data_checksums: dict[str, str] | None = None,
                data_content_checksums: dict[str, str] | None = None,
                git: tuple[str | None, bool | None] | None = None,
                mlflow: tuple[str, str, str] | None = None,
                suite_run: SuiteRun | None = None, precision: str | None = None,
                threads: int | None = None, gpu_sharing: dict[str, int] | None = None,
                predictions: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A validated run record (see the module docstring).

    Accuracies are fractions in [0, 1]. ``data_checksums`` defaults to the SHA-256 of
    ``DATA_DIR/{train,val,test}.parquet``; ``data_content_checksums``, their content's
    (:func:`hkt.data.parquet.content_sha256`, a layer above: what a rerun compares), is the
    caller's to give (training and our baselines do), left out without it; ``git`` (commit,
    dirty) to the checkout holding this package (pass the state read when the run started, if
    the code may change meanwhile);
    ``mlflow`` is (run id, tracking URI, experiment) of the run's MLflow run, if it has one;
    ``suite_run`` the suite run that asked for it (fields ``suite``, ``results_dir``, as its
    MLflow tags: :class:`hkt.provenance.SuiteRun`). ``precision``, ``threads`` and
    ``gpu_sharing`` say how the run executed (:mod:`hkt.train.run_conditions`); each is left out of
    the record when None (an external baseline's, or a GPU that no slot shared).
    ``predictions`` names the run's ``predictions.parquet`` and its SHA-256
    (:func:`hkt.predictions.write_predictions`' answer), left out when None.
    ``extra`` fields (e.g. ``external``: which program wrote it) are kept as given.
    """
    data_dir = Path(data_dir)
    if data_checksums is None:
        data_checksums = {s: sha256_file(data_dir / split_file(s)) for s in SPLITS}
    commit, dirty = git if git is not None else git_state()
    run_id, uri, experiment = mlflow if mlflow is not None else (None, None, None)
    record = {
        "schema_version": SCHEMA_VERSION,
        "task": str(task), "model": str(model), "variant": str(variant), "seed": int(seed),
        "profile": str(profile), "config": config,
        "n_params": int(n_params), "steps": int(steps),
        "best_step": None if best_step is None else int(best_step),
        "val_accuracy": float(val_accuracy), "test_accuracy": float(test_accuracy),
        "val_loss": None if val_loss is None else float(val_loss),
        "test_loss": None if test_loss is None else float(test_loss),
        "test_examples": None if test_examples is None else int(test_examples),
        # the training split's size: the budget in epochs (steps x batch / train_examples)
        "train_examples": None if train_examples is None else int(train_examples),
        "wall_time_s": round(float(wall_time_s), 3),
        "ms_per_step": _rounded(ms_per_step, 3), "samples_per_s": _rounded(samples_per_s, 2),
        "device": str(device), "git_commit": commit, "git_dirty": dirty,
        "code_digest": code_digest(),
        "data_dir": str(data_dir.resolve()), "data_checksums": dict(data_checksums),
        "mlflow_run_id": run_id, "mlflow_tracking_uri": uri, "mlflow_experiment": experiment,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hkt_version": hkt.__version__,
        **(suite_run.fields() if suite_run is not None else {}),
        **_given(data_content_checksums=None if data_content_checksums is None
                 else dict(data_content_checksums),
                 precision=precision, threads=None if threads is None else int(threads),
                 gpu_sharing=None if gpu_sharing is None else dict(gpu_sharing),
                 predictions=None if predictions is None else dict(predictions)),
        **extra,
    }
    return validate_record(record)


def write_record(record: dict[str, Any], path: str | Path) -> Path:
    """Validate and write ``record`` atomically to ``path`` (a file, or a run directory that
    gets ``record.json``; any path not ending in .json is one); returns the file written. Written last by every run: a record that
    loads means the run is finished (one that does not is set aside: :func:`set_aside_if_damaged`)."""
    validate_record(record)
    path = Path(path)
    if path.suffix != ".json":
        path = path / RECORD_NAME
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=False) + "\n")
    return path


def write_history(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write ``history.csv`` (:data:`HISTORY_COLUMNS`; empty cells for values a row lacks)
    atomically to ``path`` (a file, or a run directory); returns the file written."""
    path = Path(path)
    if path.suffix != ".csv":
        path = path / HISTORY_NAME
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=HISTORY_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if row.get(k) is None else row[k]) for k in HISTORY_COLUMNS})
    atomic_write_text(path, buf.getvalue())
    return path


def read_history(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``history.csv`` (a file, or a run directory) as :func:`write_history` took
    them: ``step`` an int, each metric a float, or None where its cell is empty."""
    path = Path(path)
    if path.suffix != ".csv":
        path = path / HISTORY_NAME
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: (int(v) if k == "step" else None if v in ("", None) else float(v))
                 for k, v in row.items() if k in HISTORY_COLUMNS}
                for row in csv.DictReader(fh)]
