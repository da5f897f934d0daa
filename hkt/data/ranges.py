"""Are a prepared split's token ids, lengths and labels inside its task's ranges? Checked where a
split is opened, by training (hkt.data.load.TokenDataset) and by the baselines
(hkt.baselines.run.read_split), so that bad data fail before anything is fitted, naming the
file, column, row and range: not as an index error deep in training, nor as a label outside
``0..num_classes-1`` that a baseline counts, or ``cross_entropy``'s ``ignore_index`` skips
(-100), silently. Torch-free: the baselines do not import it.

Vectorised over the Arrow buffers (tens of milliseconds for IMDB's 22,500 reviews, see
docs/faults.md); rows are located only on failure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hkt.errors import DataError


def check_ranges(path: Path, values: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                 labels: np.ndarray, *, vocab_size: int | None, num_classes: int | None,
                 max_length: int | None = None) -> None:
    """Refuse (:class:`DataError`) token ids (``values``, every row's tokens end to end, each
    row from its ``starts``) outside ``0..vocab_size-1``, rows (``lengths``) longer than
    ``max_length`` and ``labels`` outside ``0..num_classes-1``, naming the first bad row of
    ``path`` and how many there are. A bound that is None is not checked (a reader that takes
    the split's metadata as it comes: the metadata's own checks are `hkt prepare`'s)."""
    if values.dtype.kind not in "iu":
        raise DataError(f"{path}: column 'tokens' holds {values.dtype} values, not token ids "
                        "(the contract's list<uint16>); these are not data `hkt prepare` wrote: "
                        "prepare them again")
    signed = values.dtype.kind == "i"  # a negative id needs a tokens column wider than uint16
    if vocab_size is not None and values.size and (int(values.max()) >= vocab_size
                                                   or (signed and int(values.min()) < 0)):
        first = int(np.flatnonzero((values >= vocab_size) | (values < 0))[0])
        row = int(np.searchsorted(starts, first, side="right") - 1)
        _range_error(path, "tokens", row, int(values[first]),
                     f"0..{vocab_size - 1} (vocab_size {vocab_size})")
    if max_length is not None and lengths.size and int(lengths.max()) > max_length:
        long_rows = np.flatnonzero(lengths > max_length)
        row = int(long_rows[0])
        _range_error(path, "length", row, int(lengths[row]),
                     f"0..{max_length} (max_length {max_length}, the model's context)", long_rows.size)
    if num_classes is None:
        return
    bad_labels = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if bad_labels.size:
        row = int(bad_labels[0])
        _range_error(path, "label", row, int(labels[row]),
                     f"0..{num_classes - 1} (num_classes {num_classes})", bad_labels.size)


def _range_error(path: Path, column: str, row: int, value: int, allowed: str,
                 count: int | None = None) -> None:
    try:
        ids = pq.read_table(path, columns=["id"]).column("id")
        which = f"row {row} (id {ids[row].as_py()!r})"
    except (pa.ArrowInvalid, KeyError, OSError):
        which = f"row {row}"
    more = f"; {count} rows are out of range" if count and count > 1 else ""
    raise DataError(f"{path}: column '{column}' of {which} holds {value}, outside the allowed "
                    f"range {allowed}{more}; these are not data `hkt prepare` wrote for this task: "
                    "prepare them again")
