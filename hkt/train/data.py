"""What training needs from a prepared-data directory (``hkt prepare``'s output).

A thin adapter over :mod:`hkt.data.load` (docs/contracts.md, "Prepared data"): the split
metadata, the sha256 of each Parquet file, a resumable shuffled training stream and
deterministic evaluation batches. Checks that the data belong to the configured task.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hkt.data_layout import SPLITS, split_file
from hkt.data.load import TokenDataset, make_loader, read_split_metadata
from hkt.data.parquet import check_manifest, check_task, check_vocabulary, content_sha256
from hkt.errors import DataError
from hkt.fileio import sha256_file

__all__ = ["SPLITS", "RunData"]


class RunData:
    """The three splits of a prepared-data directory, checked against the task config."""

    def __init__(self, data_dir: str | Path, task_cfg: Any | None = None):
        self.dir = Path(data_dir)
        if not self.dir.is_dir():
            raise DataError(f"data directory {self.dir} does not exist; create it with "
                            "`hkt prepare TASK --out DIR`")
        self.paths = {s: self.dir / split_file(s) for s in SPLITS}
        missing = [str(p.name) for p in self.paths.values() if not p.is_file()]
        if missing:
            raise DataError(f"{self.dir} lacks {', '.join(missing)}; is it a directory written "
                            "by `hkt prepare`?")
        self.meta = {s: read_split_metadata(self.dir, s) for s in SPLITS}
        m = self.meta["train"]
        for key in ("task", "vocab_size", "num_classes", "max_length"):
            if key not in m:
                raise DataError(f"{self.paths['train']}: metadata lacks '{key}'")
        for s in ("val", "test"):
            for key in ("task", "vocab_size", "num_classes", "max_length"):
                if self.meta[s].get(key) != m[key]:
                    raise DataError(f"{self.paths[s]}: metadata key '{key}' is "
                                    f"{self.meta[s].get(key)!r} but {self.paths['train'].name}'s is "
                                    f"{m[key]!r}: the splits were not prepared together; prepare "
                                    f"the data again (`hkt prepare TASK --out {self.dir}`)")
        for s in SPLITS:  # the model's embedding is built from vocab_size
            check_vocabulary(self.paths[s], self.meta[s])
        self.family = str(m["task"])  # the data family (metadata key `task`: docs/contracts.md)
        self.vocab_size = int(m["vocab_size"])
        self.num_classes = int(m["num_classes"])
        self.max_length = int(m["max_length"])
        if task_cfg is not None:
            self.check_task(task_cfg)
        self._checksums: dict[str, str] | None = None
        self._content: dict[str, str] | None = None
        self._datasets: dict[str, Any] = {}
        check_manifest(self.dir, self.checksums)  # the three files were written together
        for s in SPLITS:  # every split now, not when first evaluated (test: only after training)
            self.dataset(s).check_ranges(self.vocab_size, self.num_classes, self.max_length)

    def check_task(self, task_cfg: Any) -> None:
        """The data were prepared for this task: family, task file, T and classes
        (:func:`hkt.data.parquet.check_task`), before step 1."""
        check_task(self.dir, self.meta["train"], task_cfg)

    @property
    def checksums(self) -> dict[str, str]:
        """split -> sha256 of its Parquet file (computed once)."""
        if self._checksums is None:
            self._checksums = {s: sha256_file(p) for s, p in self.paths.items()}
        return self._checksums

    @property
    def content_checksums(self) -> dict[str, str]:
        """split -> sha256 of its content (:func:`hkt.data.parquet.content_sha256`: the rows and
        metadata, not the release that wrote the file; computed once)."""
        if self._content is None:
            self._content = {s: content_sha256(p) for s, p in self.paths.items()}
        return self._content

    def dataset(self, split: str):
        """The split as a :class:`hkt.data.load.TokenDataset` (read once, memory-mapped)."""
        if split not in self._datasets:
            self._datasets[split] = TokenDataset(self.paths[split])
        return self._datasets[split]

    def size(self, split: str) -> int:
        return len(self.dataset(split))

    def train_stream(self, batch_size: int, seed: int, *, bucket: bool = True,
                     num_workers: int = 0, pin_memory: bool = False) -> "TrainStream":
        return TrainStream(self, batch_size, seed, bucket=bucket, num_workers=num_workers,
                           pin_memory=pin_memory)

    def _eval_loader(self, split: str, batch_size: int, max_batches: int | None) -> Any:
        # the whole split in length-bucketed order (less padding; order does not change a sum);
        # a prefix in file order, a random sample since `hkt prepare` shuffles rows
        return make_loader(self.dataset(split), batch_size=batch_size, shuffle=False,
                           bucket=max_batches is None)

    def eval_batch_count(self, split: str, batch_size: int, max_batches: int | None = None) -> int:
        """The number of batches :meth:`eval_batches` yields with these arguments."""
        n = len(self._eval_loader(split, batch_size, max_batches))
        return n if max_batches is None else min(n, int(max_batches))

    def eval_batches(self, split: str, batch_size: int,
                     max_batches: int | None = None) -> Iterator[dict[str, Any]]:
        """File-order batches of ``split`` (the first ``max_batches`` only, if given)."""
        for i, batch in enumerate(self._eval_loader(split, batch_size, max_batches)):
            if max_batches is not None and i >= max_batches:
                break
            yield batch


class TrainStream:
    """Endless shuffled training batches (epoch after epoch), resumable mid-epoch."""

    def __init__(self, data: RunData, batch_size: int, seed: int, *, bucket: bool = True,
                 num_workers: int = 0, pin_memory: bool = False):
        """``pin_memory``: pinned batches, so that the step's host-to-GPU copy is asynchronous
        (a copy from pageable memory waits for the GPU to finish the previous step)."""
        if data.size("train") < batch_size:
            raise DataError(f"{data.paths['train']} has {data.size('train')} examples, fewer than "
                            f"one batch (train.batch_size={batch_size}); lower train.batch_size")
        self.loader = make_loader(data.dataset("train"), batch_size=batch_size, shuffle=True,
                                  seed=seed, bucket=bucket, drop_last=True,
                                  num_workers=num_workers, pin_memory=pin_memory)
        self._it: Iterator[dict[str, Any]] | None = None

    def next(self) -> dict[str, Any]:
        # The loader has its own generator, so starting an epoch leaves the global torch RNG
        # (dropout) untouched and a resumed run draws exactly what an uninterrupted one does.
        for _ in range(2):
            if self._it is None:
                self._it = iter(self.loader)
            try:
                return next(self._it)
            except StopIteration:
                self._it = None  # epoch done: the loader moves on to the next epoch
        raise DataError("the training split yields no batch; lower train.batch_size")

    def state_dict(self) -> dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._it = None
        self.loader.load_state_dict(state)

