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
           "read_predictions", "accuracies", "check_against_record", "check_file"]

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


def check_against_record(table: pa.Table, record: dict[str, Any], where: str | Path) -> None:
    """Refuse predictions whose accuracy (correct / examples, per split) is not the record's
    ``val_accuracy`` and ``test_accuracy`` exactly, or whose test examples are not its
    ``test_examples``."""
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
    """The predictions file the record of ``run_dir`` names, checked against its SHA-256; None
    for a record that names none (a run from before predictions were kept)."""
    named = record.get(RECORD_FIELD)
    if not named:
        return None
    path = Path(run_dir) / named["file"]
    if not path.is_file():
        raise PredictionsError(f"{path} is missing: the record names it; copy it with the record, "
                               "or remake it (`hkt predict RUN_DIR --data DATA_DIR`)")
    if sha256_file(path) != named["sha256"]:
        raise PredictionsError(f"{path} is not the file its record names (SHA-256 differs): it was "
                               "altered or belongs to another run; remake it (`hkt predict`)")
    return path
