"""Loading prepared Parquet splits for training: dataset, resumable batch sampler, padded batches.

Typical use (training code)::

    from hkt.data.load import make_loader, read_split_metadata

    meta = read_split_metadata(data_dir, "train")          # vocab_size, num_classes, max_length, pad_id
    train = make_loader(data_dir / "train.parquet", batch_size=32, shuffle=True, seed=seed,
                        bucket=True, drop_last=True)
    val = make_loader(data_dir / "val.parquet", batch_size=64)
    for batch in train:                                     # one epoch; the next `for` is the next epoch
        logits = model(batch["tokens"], batch["mask"])      # LongTensor[B, T], BoolTensor[B, T]
        loss = F.cross_entropy(logits, batch["labels"])
    ckpt["loader"] = train.state_dict()                     # exact mid-epoch resume:
    train.load_state_dict(ckpt["loader"])                   # continues with the next unseen batch

Batches are dicts: ``tokens`` LongTensor[B, T] (right-padded with 0), ``mask`` BoolTensor[B, T]
(True at real tokens), ``lengths`` LongTensor[B], ``labels`` LongTensor[B], ``index``
LongTensor[B] (row numbers in the file). T is the batch's longest sequence rounded up to
``pad_multiple`` (never above the data's ``max_length`` unless a sequence is longer). Padding
uses id 0, which for CIFAR-10 is also the pixel value 0: always use ``mask``/``lengths``.

The data stay in Arrow buffers (the file is memory-mapped and decoded once into one token
array plus offsets); a batch is gathered with numpy, never through per-example Python objects.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from hkt.data_layout import split_file
from hkt.data.parquet import read_metadata
from hkt.data.ranges import check_ranges
from hkt.errors import DataError

__all__ = ["TokenDataset", "BucketBatchSampler", "Loader", "make_loader", "pad_batch", "read_split_metadata"]


def read_split_metadata(data_dir: str | os.PathLike, split: str = "train") -> dict[str, Any]:
    """The ``hkt`` metadata of ``DATA_DIR/SPLIT.parquet`` (task, vocab_size, num_classes, max_length, …)."""
    return read_metadata(Path(data_dir) / split_file(split))


class TokenDataset(Dataset):
    """One prepared split, held as a flat token array + offsets (zero-copy views of Arrow buffers).

    ``ds[i]`` is a dict ``tokens`` (LongTensor[L]), ``label``, ``length`` (ints); ``ds.batch(idx)``
    gathers a padded batch (see :func:`pad_batch`). Attributes: ``path``, ``meta`` (the ``hkt``
    metadata), ``lengths`` and ``labels`` (numpy int64), ``vocab_size``, ``num_classes``,
    ``max_length``, ``pad_id``.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.meta = read_metadata(self.path)
        self._load()

    def _load(self) -> None:
        try:
            table = pq.read_table(self.path, columns=["tokens", "label", "length"], memory_map=True)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"cannot read {self.path}: {exc}") from None
        tokens = table.column("tokens").combine_chunks()
        if isinstance(tokens, pa.ChunkedArray):  # pyarrow < 16 returns a ChunkedArray
            tokens = tokens.chunk(0) if tokens.num_chunks else pa.array([], pa.list_(pa.uint16()))
        offsets = tokens.offsets.to_numpy()
        self.values = tokens.values.to_numpy(zero_copy_only=True)          # uint16, all tokens
        self.starts = offsets[:-1].astype(np.int64)
        self.lengths = np.diff(offsets).astype(np.int64)
        self.labels = table.column("label").to_numpy().astype(np.int64, copy=False)
        if not np.array_equal(self.lengths, table.column("length").to_numpy()):
            raise DataError(f"{self.path}: the length column does not match the tokens")

    def check_ranges(self, vocab_size: int, num_classes: int, max_length: int | None = None) -> None:
        """Refuse token ids outside ``0..vocab_size-1``, rows longer than ``max_length`` and
        labels outside ``0..num_classes-1`` (:func:`hkt.data.ranges.check_ranges`), when the
        split is opened, before step 1."""
        check_ranges(self.path, self.values, self.starts, self.lengths, self.labels,
                     vocab_size=vocab_size, num_classes=num_classes, max_length=max_length)

    # workers started with "spawn" re-open the file instead of pickling the arrays
    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "meta": self.meta}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.meta = state["path"], state["meta"]
        self._load()

    def __len__(self) -> int:
        return int(self.lengths.size)

    def __getitem__(self, i: int) -> dict[str, Any]:
        s, n = int(self.starts[i]), int(self.lengths[i])
        return {"tokens": torch.from_numpy(self.values[s:s + n].astype(np.int64)),
                "label": int(self.labels[i]), "length": n}

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def num_classes(self) -> int:
        return int(self.meta["num_classes"])

    @property
    def max_length(self) -> int:
        return int(self.meta["max_length"])

    @property
    def pad_id(self) -> int | None:
        return self.meta.get("pad_id", 0)

    def batch(self, index: Sequence[int] | np.ndarray, *, pad_multiple: int = 8,
              max_length: int | None = None) -> dict[str, torch.Tensor]:
        """The padded batch of rows ``index``."""
        return pad_batch(self.values, self.starts, self.lengths, self.labels, np.asarray(index, dtype=np.int64),
                         pad_multiple=pad_multiple, cap=self.max_length, truncate=max_length)


def pad_batch(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray, labels: np.ndarray, index: np.ndarray,
              *, pad_multiple: int = 8, cap: int | None = None, truncate: int | None = None
              ) -> dict[str, torch.Tensor]:
    """Gather rows ``index`` into a right-padded batch (vectorised; no per-row Python loop).

    T = longest length in the batch rounded up to ``pad_multiple``, but at most ``cap`` (the
    data's max_length) unless a row is longer. ``truncate`` cuts rows to that many tokens first.
    """
    lens = lengths[index]
    if truncate is not None:
        lens = np.minimum(lens, truncate)
        cap = truncate if cap is None else min(cap, truncate)
    longest = int(lens.max()) if lens.size else 0
    t = max(1, math.ceil(max(longest, 1) / pad_multiple) * pad_multiple)
    if cap is not None:
        t = max(min(t, cap), longest)
    pos = np.arange(t, dtype=np.int64)
    mask = pos[None, :] < lens[:, None]
    gather = starts[index][:, None] + pos[None, :]
    tokens = np.zeros((index.size, t), dtype=np.int64)
    tokens[mask] = values[gather[mask]]
    return {"tokens": torch.from_numpy(tokens), "mask": torch.from_numpy(mask),
            "lengths": torch.from_numpy(lens.astype(np.int64)), "labels": torch.from_numpy(labels[index]),
            "index": torch.from_numpy(index.copy())}


class BucketBatchSampler(Sampler):
    """Batches of row indices, deterministic from ``(seed, epoch)``, resumable mid-epoch.

    ``shuffle``: a fresh permutation per epoch (``numpy.random.default_rng([seed, epoch])``).
    ``bucket``: group similar lengths: the (shuffled) order is cut into pools of
    ``bucket_size`` batches, each pool is sorted by length and cut into batches, and (when
    shuffling) the batch order is shuffled, so padding is small but batches stay random.
    ``drop_last``: drop the final incomplete batch.

    State: ``epoch`` and ``position`` (batches of this epoch already delivered).
    ``state_dict()``/``load_state_dict()`` save and restore it; iterating yields the batches of
    ``epoch`` from ``position`` on (advancing both as it goes, then moving to the next epoch).
    When used through :class:`Loader`, the loader advances the position only for batches it
    has handed to the training loop (workers' prefetching does not count).
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 bucket: bool = False, bucket_size: int = 64, drop_last: bool = False) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if bucket_size < 1:
            raise ValueError("bucket_size must be >= 1")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.batch_size, self.shuffle, self.seed = int(batch_size), bool(shuffle), int(seed)
        self.bucket, self.bucket_size, self.drop_last = bool(bucket), int(bucket_size), bool(drop_last)
        self.epoch = 0
        self.position = 0

    def __len__(self) -> int:
        n = self.lengths.size
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of ``epoch``, in order (a pure function of seed, epoch and the settings)."""
        n = self.lengths.size
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        if self.bucket:
            pool = self.batch_size * self.bucket_size
            order = np.concatenate([order[i:i + pool][np.argsort(self.lengths[order[i:i + pool]], kind="stable")]
                                    for i in range(0, n, pool)]) if n else order
        batches = [order[i:i + self.batch_size] for i in range(0, n, self.batch_size)]
        if self.drop_last and batches and batches[-1].size < self.batch_size:
            batches.pop()
        if self.bucket and self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def remaining(self) -> list[np.ndarray]:
        """The batches still to deliver in the current epoch (rolls over a finished epoch)."""
        if self.position >= len(self):
            self.epoch, self.position = self.epoch + 1, 0
        return self.epoch_batches(self.epoch)[self.position:]

    def __iter__(self) -> Iterator[np.ndarray]:
        for b in self.remaining():
            self.position += 1
            yield b
        self.epoch, self.position = self.epoch + 1, 0

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first batch."""
        self.epoch, self.position = int(epoch), 0

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "batch_size": self.batch_size,
                "num_examples": int(self.lengths.size), "shuffle": self.shuffle, "bucket": self.bucket,
                "bucket_size": self.bucket_size, "drop_last": self.drop_last}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("seed", "batch_size", "num_examples", "shuffle", "bucket", "bucket_size", "drop_last"):
            mine = self.state_dict()[key]
            if key in state and state[key] != mine:
                raise DataError(f"cannot resume the data order: the saved sampler has {key}={state[key]!r}, "
                                f"this one {key}={mine!r}")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


class _Fetch(Dataset):
    """What the DataLoader indexes: one item = one whole padded batch."""

    def __init__(self, dataset: TokenDataset, pad_multiple: int, max_length: int | None) -> None:
        self.dataset, self.pad_multiple, self.max_length = dataset, pad_multiple, max_length

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: np.ndarray) -> dict[str, torch.Tensor]:
        return self.dataset.batch(index, pad_multiple=self.pad_multiple, max_length=self.max_length)


class _Remaining(Sampler):
    def __init__(self, sampler: BucketBatchSampler) -> None:
        self.sampler = sampler

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.sampler.remaining())

    def __len__(self) -> int:
        return len(self.sampler)


class Loader:
    """Iterable of padded batches over one split (see the module docstring).

    Each ``for batch in loader`` runs the rest of the current epoch, then moves to the next
    epoch. ``len(loader)`` is the number of batches per epoch. ``state_dict()`` records the
    epoch and how many of its batches were delivered; after ``load_state_dict`` the next
    iteration continues with the first batch not yet delivered. ``set_epoch(e)`` restarts at
    the first batch of epoch ``e``.
    """

    def __init__(self, dataset: TokenDataset, sampler: BucketBatchSampler, *, pad_multiple: int = 8,
                 max_length: int | None = None, num_workers: int = 0, pin_memory: bool = False,
                 prefetch_factor: int | None = None) -> None:
        self.dataset, self.sampler = dataset, sampler
        kwargs: dict[str, Any] = {}
        if num_workers > 0:
            kwargs["prefetch_factor"] = prefetch_factor or 4
            kwargs["persistent_workers"] = False
        # Its own generator: starting an iterator must not draw from the global torch RNG.
        self._loader = DataLoader(_Fetch(dataset, pad_multiple, max_length), batch_size=None,
                                  generator=torch.Generator(),
                                  sampler=_Remaining(sampler), num_workers=num_workers, pin_memory=pin_memory,
                                  **kwargs)

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        s = self.sampler
        for batch in self._loader:   # its sampler, _Remaining, rolls over a finished epoch
            s.position += 1          # counted before the training loop sees the batch
            yield batch
        s.epoch, s.position = s.epoch + 1, 0

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state)


def make_loader(data: str | os.PathLike | TokenDataset, split: str | None = None, *, batch_size: int,
                shuffle: bool = False, seed: int = 0, pad_multiple: int = 8, bucket: bool = False,
                bucket_size: int = 64, drop_last: bool = False, num_workers: int = 0, pin_memory: bool = False,
                max_length: int | None = None) -> Loader:
    """A :class:`Loader` over a prepared split.

    ``data`` is a ``.parquet`` file, a :class:`TokenDataset`, or a prepared-data directory with
    ``split`` naming the file (``make_loader(data_dir, "train", batch_size=32, shuffle=True)``).

    Args:
        batch_size: examples per batch.
        shuffle: new random order every epoch, from ``(seed, epoch)``; False keeps file order.
        seed: the data-order seed.
        pad_multiple: pad each batch to its longest sequence rounded up to this multiple.
        bucket: group similar lengths into batches (less padding); ``bucket_size`` batches per pool.
        drop_last: drop the last incomplete batch of each epoch.
        num_workers: DataLoader worker processes (0: gather in the main process, usually enough).
        pin_memory: pin batches for faster host→GPU copies.
        max_length: truncate sequences to this many tokens (default: no truncation).
    """
    if isinstance(data, TokenDataset):
        ds = data
    else:
        path = Path(data)
        if path.is_dir() or split is not None:
            if split is None:
                raise DataError(f"{path} is a directory: name the split (make_loader(dir, 'train', ...))")
            path = path / split_file(split)
        ds = TokenDataset(path)
    if pad_multiple < 1:
        raise ValueError("pad_multiple must be >= 1")
    sampler = BucketBatchSampler(ds.lengths, batch_size, shuffle=shuffle, seed=seed, bucket=bucket,
                                 bucket_size=bucket_size, drop_last=drop_last)
    return Loader(ds, sampler, pad_multiple=pad_multiple, max_length=max_length, num_workers=num_workers,
                  pin_memory=pin_memory)
