"""What a run predicted, example by example: ``RUN_DIR/predictions.parquet`` beside its record.

Every run of every kind writes it (``hkt train`` at the checkpoint it reports, the best
validation step; every external baseline of ours; ``hkt predict`` remakes it for a finished
training run), so that models and rules are read example by example with one code path. One row
per evaluated example of the validation and test splits, sorted by ``split`` then ``row`` (so
``test`` rows come first, as a sort by the column puts them):

==========  =======  ===================================================================
column      type     what
==========  =======  ===================================================================
``split``   string   ``val`` or ``test``
``row``     int64    the example's 0-based row in the task's ``val.parquet``/``test.parquet``
``label``   int64    its label
``pred``    int64    the predicted class (the argmax of the logits, not of the rounded
                     probabilities: two classes a float16 rounds alike keep their order)
``p0`` …    float16  the probability of each class ``0..C-1`` (``C`` = the task's classes)
==========  =======  ===================================================================

A run that evaluates only the first batches of a split (``train.eval_batches`` /
``train.test_batches``, the smoke profile) holds exactly the examples it evaluated. The
accuracy recomputed from the file, ``sum(pred == label) / rows`` per split, equals the record's
``val_accuracy`` and ``test_accuracy`` exactly (:func:`check_against_record`).

Probabilities are float16: pyarrow writes Arrow's ``halffloat`` as Parquet's FLOAT16 logical
type and reads it back as float16, and polars (the lock's 2.1.0) reads it as its ``Float16``,
with no cast and no warning; three decimal digits say what a probability is for, and the file is
half the size of float32's (a ListOps run of 2,000 + 2,000 examples: tens of KB).

The file holds no timestamp, path or machine name (only the Parquet writer's version, which
pyarrow stores in every file), so the same predictions give the same bytes: the record names
the file and its SHA-256 (field :data:`RECORD_FIELD`), and a publication checks it. Torch-free.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hkt.errors import HKTError
from hkt.fileio import atomic_write_bytes, sha256_file

__all__ = ["PREDICTIONS_NAME", "RECORD_FIELD", "SPLITS", "PROB_DTYPE", "PredictionsError",
           "SplitPredictions", "one_hot", "schema", "predictions_table", "write_predictions",
           "read_predictions", "accuracies", "check_against_record", "check_file", "read_checked"]

PREDICTIONS_NAME = "predictions.parquet"
#: The record's field naming the file: ``{"file": PREDICTIONS_NAME, "sha256": ...}``.
RECORD_FIELD = "predictions"
#: The splits a predictions file holds, in its order, with the record's accuracy of each.
SPLITS = ("val", "test")
_ACCURACY = {"val": "val_accuracy", "test": "test_accuracy"}
PROB_DTYPE = np.float16
_COMPRESSION = "zstd"


class PredictionsError(HKTError):
    """A predictions file that is missing, altered, or says other than its record."""


@dataclass(frozen=True)
class SplitPredictions:
    """One split's predictions: ``rows`` (the examples' rows in the split's Parquet file),
    ``labels``, ``preds`` (int64, each ``[n]``) and ``probs`` (``[n, C]``, any float type)."""

    rows: np.ndarray
    labels: np.ndarray
    preds: np.ndarray
    probs: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.rows)
        if not (len(self.labels) == len(self.preds) == n and np.ndim(self.probs) == 2
                and len(self.probs) == n):
            raise ValueError("SplitPredictions: rows, labels, preds and probs differ in length")

    @property
    def correct(self) -> int:
        return int(np.count_nonzero(np.asarray(self.preds) == np.asarray(self.labels)))

    @property
    def accuracy(self) -> float:
        """``correct / n``: how ``hkt train`` and the baselines compute the record's accuracy."""
        return self.correct / len(self.rows) if len(self.rows) else 0.0


def one_hot(preds: np.ndarray, num_classes: int) -> np.ndarray:
    """A rule's probabilities: 1 for the class it answers, 0 for the others."""
    probs = np.zeros((len(preds), num_classes), dtype=PROB_DTYPE)
    probs[np.arange(len(preds)), np.asarray(preds, dtype=np.int64)] = 1
    return probs


def schema(num_classes: int) -> pa.Schema:
    """The file's columns for a task of ``num_classes`` classes."""
    return pa.schema([("split", pa.string()), ("row", pa.int64()), ("label", pa.int64()),
                      ("pred", pa.int64()),
                      *((f"p{c}", pa.float16()) for c in range(num_classes))])


def predictions_table(predictions: dict[str, SplitPredictions], num_classes: int) -> pa.Table:
    """The file's table: ``predictions``' splits (``val``, ``test``), sorted by split, then row."""
    unknown = set(predictions) - set(SPLITS)
    if unknown:
        raise ValueError(f"predictions of splits {sorted(unknown)}: only {SPLITS} are kept")
    parts: dict[str, list[np.ndarray]] = {"split": [], "row": [], "label": [], "pred": [],
                                          "probs": []}
    for split in sorted(predictions):
        p = predictions[split]
        order = np.argsort(np.asarray(p.rows, dtype=np.int64), kind="stable")
        probs = np.asarray(p.probs)
        if probs.shape[1] != num_classes:
            raise ValueError(f"{split} predictions have {probs.shape[1]} classes, "
                             f"not {num_classes}")
        if len(order) and np.any(np.diff(np.asarray(p.rows)[order]) == 0):
            raise ValueError(f"{split} predictions name a row twice")
        parts["split"].append(np.full(len(order), split, dtype=object))
        for key, values in (("row", p.rows), ("label", p.labels), ("pred", p.preds)):
            parts[key].append(np.asarray(values, dtype=np.int64)[order])
        parts["probs"].append(probs[order].astype(PROB_DTYPE))
    cat = {k: (np.concatenate(v) if v else np.zeros(0, dtype=object if k == "split" else np.int64))
           for k, v in parts.items() if k != "probs"}
    probs = (np.concatenate(parts["probs"]) if parts["probs"]
             else np.zeros((0, num_classes), dtype=PROB_DTYPE))
    columns = [pa.array(cat["split"].tolist(), pa.string()),
               *(pa.array(cat[k], pa.int64()) for k in ("row", "label", "pred")),
               *(pa.array(np.ascontiguousarray(probs[:, c]), pa.float16())
                 for c in range(num_classes))]
    return pa.Table.from_arrays(columns, schema=schema(num_classes))


def write_predictions(predictions: dict[str, SplitPredictions], run_dir: str | Path,
                      num_classes: int) -> dict[str, str]:
    """Write ``RUN_DIR/predictions.parquet`` atomically; return the record's field for it
    (:data:`RECORD_FIELD`: the file's name and SHA-256)."""
    buf = io.BytesIO()
    pq.write_table(predictions_table(predictions, num_classes), buf, compression=_COMPRESSION)
    data = buf.getvalue()
    path = Path(run_dir) / PREDICTIONS_NAME
    atomic_write_bytes(path, data)
    return {"file": PREDICTIONS_NAME, "sha256": sha256_file(path)}


def read_predictions(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """A predictions file (or a run directory holding one) as an Arrow table (``columns``: only
    these; a missing one is an error)."""
    path = Path(path)
    if path.is_dir():
        path = path / PREDICTIONS_NAME
    try:
        return pq.read_table(path, columns=columns)
    except FileNotFoundError:
        raise PredictionsError(f"no predictions at {path}") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise PredictionsError(f"{path} is not a readable predictions file: {exc}") from None


def accuracies(table: pa.Table) -> dict[str, tuple[int, int]]:
    """split -> (correct, examples) of a predictions table."""
    split = table.column("split").to_numpy(zero_copy_only=False)
    hit = table.column("pred").to_numpy() == table.column("label").to_numpy()
    return {s: (int(np.count_nonzero(hit[split == s])), int(np.count_nonzero(split == s)))
            for s in SPLITS if np.any(split == s)}


def _classes(table: pa.Table, record: dict[str, Any], where: str | Path) -> int | None:
    """The task's number of classes: the record's ``config.task.num_classes``, which the file's
    probability columns (where read) must match; None where neither says."""
    task = (record.get("config") or {}).get("task") or {}
    probs = sum(1 for name in table.column_names if name[:1] == "p" and name[1:].isdigit())
    want = task.get("num_classes") if isinstance(task, dict) else None
    if want is not None and probs and probs != want:
        raise PredictionsError(f"{where}: {probs} probability columns, the record's task has "
                               f"{want} classes: they are not this run's")
    return want if want is not None else probs or None


def _check_rows(table: pa.Table, record: dict[str, Any], where: str | Path) -> None:
    """Refuse rows no run writes: a split other than :data:`SPLITS`, a row named twice in its
    split or negative, a label or prediction outside the task's classes."""
    split = table.column("split").to_numpy(zero_copy_only=False)
    other = sorted(set(split.tolist()) - set(SPLITS))
    if other:
        raise PredictionsError(f"{where}: rows of split {other[0]!r}: a predictions file holds "
                               f"{' and '.join(SPLITS)} only; they are not this run's")
    rows = table.column("row").to_numpy()
    for s in SPLITS:
        mine = np.sort(rows[split == s])
        if mine.size and (mine[0] < 0 or np.any(np.diff(mine) == 0)):
            bad = int(mine[0]) if mine[0] < 0 else int(mine[1:][np.diff(mine) == 0][0])
            raise PredictionsError(f"{where}: {s} row {bad} is "
                                   f"{'negative' if bad < 0 else 'there twice'}: a run predicts "
                                   "each example once; they are not this run's")
    classes = _classes(table, record, where)
    for column in ("label", "pred"):
        values = table.column(column).to_numpy()
        if classes is not None and values.size and (values.min() < 0 or values.max() >= classes):
            bad = int(values.min() if values.min() < 0 else values.max())
            raise PredictionsError(f"{where}: a {column} of {bad}, outside the task's "
                                   f"{classes} classes 0..{classes - 1}: they are not this run's")


def check_against_record(table: pa.Table, record: dict[str, Any], where: str | Path) -> None:
    """Refuse (:class:`PredictionsError`, one line naming ``where``) predictions that are not
    the run's of ``record``: rows no run writes (:func:`_check_rows`), an accuracy (correct /
    examples, per split; a split with no example) that is not the record's ``val_accuracy``
    and ``test_accuracy`` exactly, or test examples that are not its ``test_examples``. The one
    check of what a file says against its record: every writer runs it before naming the file,
    every reader (:func:`read_checked`) before reading one."""
    _check_rows(table, record, where)
    counts = accuracies(table)
    for split in SPLITS:
        correct, n = counts.get(split, (0, 0))
        want = record.get(_ACCURACY[split])
        if n == 0 or want is None or correct / n != float(want):
            got = f"{correct}/{n} = {correct / n!r}" if n else "no example"
            raise PredictionsError(f"{where}: the {split} predictions give accuracy {got}, "
                                   f"the record says {want!r}: they are not this run's")
    if record.get("test_examples") is not None and counts["test"][1] != record["test_examples"]:
        raise PredictionsError(f"{where}: {counts['test'][1]} test predictions, the record "
                               f"tested {record['test_examples']} examples: they are not "
                               "this run's")


def check_file(run_dir: str | Path, record: dict[str, Any]) -> Path | None:
    """The predictions file the record of ``run_dir`` names, inside the run's folder
    (:func:`hkt.run_record.run_file`) and checked against its SHA-256; None for a record that
    names none (a run from before predictions were kept)."""
    from hkt.run_record import RecordError, run_file

    named = record.get(RECORD_FIELD)
    if not named:
        return None
    try:
        path = run_file(run_dir, named["file"])
    except RecordError as exc:
        raise PredictionsError(str(exc)) from None
    if not path.is_file():
        raise PredictionsError(f"{path} is missing: the record names it; copy it with the record, "
                               "or remake it (`hkt predict RUN_DIR --data DATA_DIR`)")
    if sha256_file(path) != named["sha256"]:
        raise PredictionsError(f"{path} is not the file its record names (SHA-256 differs): it was "
                               "altered or belongs to another run; remake it (`hkt predict`)")
    return path


def read_checked(run_dir: str | Path, record: dict[str, Any],
                 columns: list[str] | None = None) -> pa.Table | None:
    """The predictions of the run in ``run_dir`` whose record is ``record``, as every reader
    (``hkt aggregate``, ``publish_results.py``, the drift test) takes them: the file the record
    names (:func:`check_file`: in the folder, its SHA-256) and saying what the record says
    (:func:`check_against_record`); ``columns``: only these. None where the record names none;
    a :class:`PredictionsError` (one line naming the file) where they are not this run's."""
    path = check_file(run_dir, record)
    if path is None:
        return None
    table = read_predictions(path)
    lacking = sorted({"split", "row", "label", "pred", *(columns or ())} - set(table.column_names))
    if lacking:
        raise PredictionsError(f"{path} is not a readable predictions file: no column "
                               f"{', '.join(lacking)}")
    check_against_record(table, record, path)
    return table if columns is None else table.select(columns)
