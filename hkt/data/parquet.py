"""Prepared-data files: Parquet writing with the ``hkt`` metadata, reading it back, the data card.

Layout (docs/contracts.md): ``DIR/{train,val,test}.parquet``, zstd, columns ``id`` (string,
stable), ``tokens`` (list<uint16>, no padding), ``label`` (int64), ``length`` (int32); file
metadata key ``hkt`` holding JSON with ``task`` (the family, = the config's ``task.family``),
``task_config`` (the config file, e.g. ``listops_lra``), ``split``, ``vocab`` (index = id),
``vocab_size``, ``pad_id`` (0, or null for CIFAR-10 where 0 is a pixel value), ``num_classes``,
``class_names``, ``max_length``, ``tokenizer``, ``source`` (URL/file + checksums, or generator
parameters), ``params`` (the content-defining config), ``num_examples`` and ``code_version``.
Files are written atomically and byte-reproducibly (no timestamps, no local paths) by one release
of hkt and one Parquet writer; the metadata's ``code_version`` and the writer's version in the
footer make files of equal content differ across releases, so a file has two checksums: the
file's SHA-256 (``sha256_file``: the manifest, ``data_checksums`` of a run record) and its
content's (:func:`content_sha256`: ``data_content_checksums``), which is what a run compares.

A directory is all-or-nothing: ``manifest.json``, written last, ties the three splits together by
their SHA-256 (``write_manifest``); a re-prepare deletes it first, so an interrupted one leaves
no manifest, and :func:`check_manifest` refuses a directory whose files do not belong together.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hkt import environment
from hkt.data.families import FAMILIES
from hkt.data_layout import MANIFEST, SPLITS, split_file
from hkt.errors import DataError
from hkt.fileio import atomic_path, atomic_write_text, sha256_file

METADATA_KEY = b"hkt"
COMPRESSION = "zstd"
SCHEMA = pa.schema([
    ("id", pa.string()),
    ("tokens", pa.list_(pa.uint16())),
    ("label", pa.int64()),
    ("length", pa.int32()),
])


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    """Row start offsets (int64, ``len + 1``, from 0) of rows with these lengths."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


@dataclass
class SplitData:
    """One split in columnar form: example ``i`` has tokens ``flat[offsets[i]:offsets[i+1]]``."""

    ids: list[str]
    flat: np.ndarray            # all tokens concatenated (uint16)
    offsets: np.ndarray         # int64, len(ids) + 1, starting at 0
    labels: np.ndarray          # int64
    stats: dict[str, Any] = field(default_factory=dict)  # extra numbers for the data card (e.g. truncated)

    def __post_init__(self) -> None:
        self.flat = np.ascontiguousarray(self.flat, dtype=np.uint16)
        self.offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        self.labels = np.ascontiguousarray(self.labels, dtype=np.int64)
        n = len(self.ids)
        if self.offsets.shape != (n + 1,) or self.labels.shape != (n,) or self.offsets[0] != 0 \
                or self.offsets[-1] != self.flat.size:
            raise ValueError("inconsistent SplitData arrays")

    @classmethod
    def from_lengths(cls, ids: list[str], flat: np.ndarray, lengths: np.ndarray, labels: np.ndarray,
                     stats: dict[str, Any] | None = None) -> "SplitData":
        """A SplitData from per-row lengths instead of offsets."""
        return cls(ids, flat, offsets_from_lengths(lengths), labels, dict(stats or {}))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def take(self, index: np.ndarray) -> "SplitData":
        """Rows ``index`` (in that order) as a new SplitData, with empty ``stats``: whole-split
        numbers do not describe a subset (the caller sets the subset's own)."""
        index = np.asarray(index, dtype=np.int64)
        lens = self.lengths[index]
        ids = [self.ids[i] for i in index.tolist()]
        width = int(lens[0]) if lens.size else 0
        if lens.size and self.flat.size == width * len(self) and np.all(self.lengths == width):
            # equal lengths (CIFAR-10): a row gather, no per-token index arrays
            flat = self.flat.reshape(len(self), width)[index].reshape(-1)
            return SplitData(ids, flat, np.arange(index.size + 1, dtype=np.int64) * width, self.labels[index])
        offsets = offsets_from_lengths(lens)
        starts = self.offsets[:-1][index]
        gather = np.repeat(starts - offsets[:-1], lens) + np.arange(offsets[-1], dtype=np.int64)
        return SplitData(ids, self.flat[gather], offsets, self.labels[index])


@dataclass
class Prepared:
    """What a data family's ``prepare(cfg, source)`` returns (written out by ``hkt.data.prepare``)."""

    splits: dict[str, SplitData]        # train, val, test
    vocab: list[str]                    # token strings, index = id
    pad_id: int | None                  # id used for padding (None: no id is reserved; mask by length)
    tokenizer: str                      # one line describing the tokenisation
    class_names: list[str]              # index = label
    source: dict[str, Any]              # content-only provenance (goes into the metadata)
    notes: list[str] = field(default_factory=list)  # data-card notes
    location: str | None = None         # where the raw data were read (data card only)


def write_manifest(out: str | os.PathLike, checksums: dict[str, str]) -> None:
    """Write ``out/manifest.json`` (split -> SHA-256 of its file): the last file a preparer writes."""
    files = {split_file(s): checksums[s] for s in SPLITS}
    atomic_write_text(Path(out) / MANIFEST, json.dumps({"format": 1, "files": files}, indent=2) + "\n")


def check_manifest(out: str | os.PathLike, checksums: dict[str, str]) -> None:
    """Refuse a prepared directory whose splits (``checksums``: split -> SHA-256) were not written
    together by one finished `hkt prepare`."""
    out = Path(out)
    redo = f"run `hkt prepare TASK --out {out}` again (the workflow: delete {out} and rerun it)"
    try:
        files = json.loads((out / MANIFEST).read_text())["files"]
    except FileNotFoundError:
        raise DataError(f"{out} has no {MANIFEST}: `hkt prepare` did not finish writing this directory "
                        f"(interrupted?), or an older version wrote it; {redo}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{out / MANIFEST} is not a manifest `hkt prepare` wrote ({exc}); {redo}") from None
    for s in SPLITS:
        want = files.get(split_file(s)) if isinstance(files, dict) else None
        if want != checksums[s]:
            raise DataError(f"{out / (s + '.parquet')} does not belong with the other splits: its SHA-256 "
                            f"{checksums[s][:12]}… differs from the manifest's {str(want)[:12]}… (an "
                            f"interrupted re-prepare, or a file copied in by hand); {redo}")


def check_task(data_dir: str | os.PathLike, meta: dict[str, Any], task: Any) -> None:
    """Refuse (:class:`DataError`, one line) data that were prepared for another task than
    ``task`` (a run's ``task`` config: ``family``, ``id``, ``max_length``, ``num_classes``),
    naming each setting that differs. ``meta`` is the data's metadata (``max_length`` the
    largest of its splits'); a setting either side lacks is not compared (data prepared before
    the metadata named the task file)."""
    pairs = (("family", "task"), ("id", "task_config"), ("max_length", "max_length"),
             ("num_classes", "num_classes"))
    differ = [f"task.{key} is {task.get(key)!r} here but {meta[field]!r} in the data"
              for key, field in pairs
              if task.get(key) is not None and meta.get(field) is not None
              and str(task.get(key)) != str(meta[field])]
    if differ:
        prepared = meta.get("task_config") or meta.get("task")
        raise DataError(
            f"{data_dir} was prepared for task {prepared} (T = {meta.get('max_length')}), not for "
            f"this run's task {task.get('id') or task.get('family')}: {'; '.join(differ)}; pass "
            f"this task's data (`hkt prepare {task.get('id') or task.get('family')} --out DIR`, "
            f"then --data DIR) or the task the data were prepared for (task={prepared})")


def check_vocabulary(path: str | os.PathLike, meta: dict[str, Any]) -> None:
    """Refuse (:class:`DataError`, one line naming the file, the key and both values) a split
    whose metadata ``vocab_size`` is not its vocabulary's size: the length of its ``vocab``, and
    that of its data family's ``VOCAB`` (a family whose token language is fixed defines it). The
    model's embedding is built from ``vocab_size``: a wrong one trains a model of another size
    without a word (``vocab_size: 100000`` for ListOps: 1.6M parameters instead of 12k)."""
    size = meta.get("vocab_size")
    family = meta.get("task")
    redo = (f"these are not the metadata `hkt prepare` wrote: prepare the data again (`hkt prepare "
            f"{meta.get('task_config') or family or 'TASK'} --out {Path(path).parent}`)")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise DataError(f"{path}: metadata key 'vocab_size' is {size!r}, not a number of token ids; "
                        f"{redo}")
    vocab = meta.get("vocab")
    if isinstance(vocab, list) and len(vocab) != size:
        raise DataError(f"{path}: metadata key 'vocab_size' is {size}, but its 'vocab' lists "
                        f"{len(vocab)} tokens; {redo}")
    module = sys.modules[FAMILIES[family].__module__] \
        if isinstance(family, str) and family in FAMILIES else None
    fixed = getattr(module, "VOCAB", None)
    if fixed is not None and len(fixed) != size:
        raise DataError(f"{path}: metadata key 'vocab_size' is {size}, but data family {family} has "
                        f"{len(fixed)} token ids ({module.__name__}.VOCAB); {redo}")


def to_table(data: SplitData) -> pa.Table:
    lengths = data.lengths
    if lengths.size and lengths.max() >= 2**31:
        raise ValueError("sequence too long")
    tokens = pa.ListArray.from_arrays(pa.array(data.offsets.astype(np.int32)), pa.array(data.flat, pa.uint16()))
    return pa.Table.from_arrays(
        [pa.array(data.ids, pa.string()), tokens, pa.array(data.labels, pa.int64()),
         pa.array(lengths.astype(np.int32), pa.int32())],
        schema=SCHEMA,
    )


def write_split(path: str | os.PathLike, data: SplitData, meta: dict[str, Any]) -> str:
    """Write one split atomically with metadata ``hkt`` = JSON(meta); return the file's SHA-256."""
    path = Path(path)
    table = to_table(data)
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression=COMPRESSION, row_group_size=max(1, len(data)))
    return sha256_file(path)


#: Metadata keys that say which release wrote a file, not what it holds: left out of its
#: content checksum (:func:`content_sha256`).
RELEASE_KEYS = ("code_version",)


def content_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of what a prepared Parquet file holds: its rows (ids, tokens, labels, lengths, in
    order) and its ``hkt`` metadata but :data:`RELEASE_KEYS`. Two files of the same data written
    by different releases of hkt (the metadata's ``code_version``) or Parquet writers (the
    footer's ``created_by``) differ in their bytes, so in their file SHA-256, and share this
    one; any changed value changes it."""
    path = Path(path)
    meta = {k: v for k, v in read_metadata(path).items() if k not in RELEASE_KEYS}
    try:
        table = pq.read_table(path, columns=list(SCHEMA.names)).combine_chunks()
    except (pa.ArrowInvalid, OSError, KeyError) as exc:
        raise DataError(f"{path} is not a readable prepared split: {exc}") from None
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    ids = [s.encode() for s in table.column("id").to_pylist()]
    digest.update(np.asarray([len(b) for b in ids], dtype="<i8").tobytes())
    digest.update(b"".join(ids))
    column = table.column("tokens")
    tokens = column.chunk(0) if column.num_chunks else pa.array([], SCHEMA.field("tokens").type)
    digest.update(np.asarray(tokens.value_lengths().fill_null(0), dtype="<i8").tobytes())
    digest.update(np.asarray(tokens.flatten(), dtype="<u2").tobytes())
    for name, dtype in (("label", "<i8"), ("length", "<i4")):
        digest.update(np.asarray(table.column(name), dtype=dtype).tobytes())
    return digest.hexdigest()


def content_checksums(data_dir: str | os.PathLike) -> dict[str, str]:
    """split -> :func:`content_sha256` of a prepared directory's splits."""
    return {s: content_sha256(Path(data_dir) / split_file(s)) for s in SPLITS}


def prepared_checksums(data_dir: str | os.PathLike) -> dict[str, dict[str, str]]:
    """A prepared directory's split files' SHA-256 (``files``) and their content's (``content``,
    :func:`content_checksums`), or a :class:`DataError` naming a missing split. Data prepared
    again at a published run's commit, whose files equal those its record names, give that
    record's content checksums where it has none (hkt.run_identity, ``--published-data``)."""
    d = Path(data_dir)
    missing = [s for s in SPLITS if not (d / split_file(s)).is_file()]
    if missing:
        raise DataError(f"{d} is not a prepared data directory (no {split_file(missing[0])}): "
                        "give the directory `hkt prepare` wrote")
    return {"files": {s: sha256_file(d / split_file(s)) for s in SPLITS},
            "content": content_checksums(d)}


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``hkt`` metadata (a dict) of a prepared Parquet file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"prepared data file {path} does not exist (run `hkt prepare TASK --out {path.parent}`)")
    try:
        md = pq.read_schema(path).metadata or {}
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path} is not a readable Parquet file: {exc}") from None
    if METADATA_KEY not in md:
        raise DataError(f"{path} has no 'hkt' metadata: not written by `hkt prepare`")
    return json.loads(md[METADATA_KEY])


# ---- data card ---------------------------------------------------------------------------

def _length_summary(lengths: np.ndarray) -> str:
    if lengths.size == 0:
        return "-"
    q = np.percentile(lengths, [50, 95])
    return (f"{int(lengths.min())} / {lengths.mean():.1f} / {q[0]:.0f} / {q[1]:.0f} / "
            f"{int(lengths.max())}")


def _histogram(splits: dict[str, SplitData], max_length: int, bins: int = 8) -> list[str]:
    edges = np.unique(np.linspace(0, max_length, bins + 1).astype(np.int64))
    edges[-1] = max_length + 1  # the last bin includes max_length
    lines = ["| length | " + " | ".join(splits) + " |", "| --- |" + " ---: |" * len(splits)]
    counts = {s: np.histogram(d.lengths, bins=edges)[0] for s, d in splits.items()}
    for b in range(len(edges) - 1):
        lines.append(f"| {edges[b]}–{edges[b + 1] - 1} | "
                     + " | ".join(f"{int(counts[s][b]):,}" for s in splits) + " |")
    return lines


def data_card(*, task: str, cfg: dict[str, Any], meta: dict[str, Any], splits: dict[str, SplitData],
              checksums: dict[str, str], notes: list[str], location: str | None = None,
              warning: str | None = None) -> str:
    """The Markdown data card: counts, label balance, lengths, source, checksums, notes, headed by
    the data's provenance ``warning`` (:func:`hkt.data.source_warning.provenance_warning`), if any."""
    names = meta.get("class_names") or [str(i) for i in range(meta["num_classes"])]
    src = meta["source"]
    out = [f"# Data card: `{task}`", "", *([f"> **Warning:** {warning}", ""] if warning else []),
           f"Prepared by `hkt prepare {task}` (hkt {meta['code_version']}, software environment "
           f"`{environment.digest()}`). Data family `{meta['task']}`, "
           f"{meta['num_classes']} classes, context T = {meta['max_length']}, vocabulary of "
           f"{meta['vocab_size']} ids ({meta['tokenizer']}).", "", "## Source", ""]
    for key in sorted(src):
        value = src[key]
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        out.append(f"- {key}: `{value}`")
    if location:
        out.append(f"- read from: `{location}`")
    out += ["", "## Splits", "",
            "| split | examples | tokens | length min / mean / median / p95 / max | truncated | SHA-256 of the file |",
            "| --- | ---: | ---: | --- | ---: | --- |"]
    for s, d in splits.items():
        out.append(f"| {s} | {len(d):,} | {int(d.flat.size):,} | {_length_summary(d.lengths)} | "
                   f"{int(d.stats.get('truncated', 0)):,} | `{checksums[s]}` |")
    out += ["", "## Label balance", "", "| label | class | " + " | ".join(splits) + " |",
            "| ---: | --- |" + " ---: |" * len(splits)]
    for c, name in enumerate(names):
        cells = []
        for d in splits.values():
            k = int((d.labels == c).sum())
            cells.append(f"{k:,} ({100.0 * k / max(len(d), 1):.1f}%)")
        out.append(f"| {c} | {name} | " + " | ".join(cells) + " |")
    out += ["", "## Length distribution", "", *_histogram(splits, meta["max_length"])]
    out += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    out += ["", "## Parameters", "", "```json", json.dumps(cfg, indent=2, sort_keys=True), "```", ""]
    return "\n".join(out)
