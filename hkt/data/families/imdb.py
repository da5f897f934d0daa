"""IMDB reviews as UTF-8 bytes (LRA "Text"): id = byte + 1, 0 = padding, no text cleaning.

Source layout (the official ``aclImdb_v1.tar.gz``, an extracted ``aclImdb/`` directory, or any
archive of the same layout): ``<root>/{train,test}/{neg,pos}/<id>_<rating>.txt``. Everything
else (``unsup/``, ``*.feat``, ``urls_*.txt``) is ignored. Labels: index in ``prepare.classes``
(neg = 0, pos = 1). Each review is checked to be valid UTF-8 and truncated to ``max_length``
bytes. Validation: ``val_size`` reviews carved from train with ``val_seed``, stratified by label;
the official test set is kept whole and is never used for model selection.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from hkt.value_checks import nonneg_int
from hkt.data.common import (DOWNLOAD_LOCATION_KEYS, DOWNLOAD_SCHEMA, allocate, carve, carve_index, check_counts,
                             check_download_config, describe_source, location, new_tree_hash)
from hkt.data.parquet import Prepared, SplitData
from hkt.data.archives import iter_files
from hkt.data.sources import Source, resolve_source
from hkt.data.families import register
from hkt.errors import ConfigError, DataError

VOCAB = ["<pad>"] + [f"<0x{b:02X}>" for b in range(256)]
TOKENIZER = "UTF-8 bytes, id = byte + 1, 0 = padding"
PAD = 0

PREPARE_SCHEMA: dict[str, Any] = {**DOWNLOAD_SCHEMA, "val_seed": nonneg_int}
LOCATION_KEYS = DOWNLOAD_LOCATION_KEYS
_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")


def check_config(cfg: dict[str, Any]) -> None:
    check_download_config(cfg)
    if cfg["max_length"] > 65535:
        raise ConfigError("task.max_length must be <= 65535")


def decode(tokens: Any) -> bytes:
    """Token ids → bytes (padding ids 0 are dropped)."""
    arr = np.asarray(tokens, dtype=np.int64)
    return bytes((arr[arr > 0] - 1).astype(np.uint8).tolist())


def _sort_key(stem: str) -> tuple[int, str]:
    m = _NAME.match(stem + ".txt")
    return (int(m.group(1)), stem) if m else (1 << 62, stem)


def read_reviews(path: Path, classes: list[str], tree_hash: Any = None
                 ) -> dict[str, list[tuple[str, int, bytes]]]:
    """``{"train": [(id, label, raw bytes)], "test": [...]}`` from an aclImdb layout, sorted by id."""
    label_of = {c: i for i, c in enumerate(classes)}
    roots: set[tuple[str, ...]] = set()

    def select(rel: PurePosixPath) -> bool:
        parts = rel.parts
        return (len(parts) >= 3 and parts[-3] in ("train", "test") and parts[-2] in label_of
                and parts[-1].endswith(".txt"))

    out: dict[str, list[tuple[str, int, bytes]]] = {"train": [], "test": []}
    for rel, data in iter_files(path, select, tree_hash=tree_hash):
        parts = rel.parts
        roots.add(parts[:-3])
        split, cls, name = parts[-3], parts[-2], parts[-1]
        if not data:
            raise DataError(f"empty review file {rel} in {path}")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{rel} in {path} is not valid UTF-8 (byte {exc.start}: {exc.reason}); "
                            "IMDB reviews must be UTF-8 text") from None
        out[split].append((f"{split}/{cls}/{name[:-4]}", label_of[cls], data))
    if len(roots) > 1:
        shown = ", ".join("/".join(r) or "." for r in sorted(roots))
        raise DataError(f"{path} holds several aclImdb layouts (roots: {shown}); expected exactly one "
                        "<root>/{train,test}/{neg,pos}/*.txt")
    for split in ("train", "test"):
        for c in classes:
            if not any(lab == label_of[c] for _, lab, _ in out[split]):
                raise DataError(f"no reviews in {split}/{c}/ of {path}: expected the aclImdb layout "
                                f"<root>/{{train,test}}/{{{','.join(classes)}}}/<id>_<rating>.txt "
                                "(e.g. aclImdb/train/pos/0_9.txt)")
        out[split].sort(key=lambda r: (r[1], _sort_key(r[0].rsplit("/", 1)[1])))
    return out


def _to_split(rows: list[tuple[str, int, bytes]], max_length: int) -> tuple[SplitData, np.ndarray]:
    """Reviews → (their tokens truncated to ``max_length``, their raw byte lengths)."""
    raw_lens = np.fromiter((len(r[2]) for r in rows), dtype=np.int64, count=len(rows))
    flat = np.frombuffer(b"".join(r[2][:max_length] for r in rows), dtype=np.uint8).astype(np.uint16) + 1
    labels = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    return SplitData.from_lengths([r[0] for r in rows], flat, np.minimum(raw_lens, max_length), labels), raw_lens


def alternative_source(meta: dict[str, Any]) -> str:
    """What a copy other than the official archive may differ in (hkt.data.source_warning)."""
    counts = (meta.get("params") or {}).get("official_counts") or {}
    official = " and ".join(f"{counts[s]:,} {s}" for s in sorted(counts, key=("train", "test").index))
    return ("an IMDB copy is read as the aclImdb layout of review text files, so it can differ from "
            "the official archive in the reviews' text, labels or number; counts other than the "
            f"official {official or 'ones'} are logged, and the text is not checked against the "
            "official file")


@register("imdb")
def prepare(cfg: dict[str, Any], source: Path | None):

    p = cfg["prepare"]
    src: Source = resolve_source("imdb", p, source)
    tree_hash = new_tree_hash(src)
    reviews = read_reviews(src.path, p["classes"], tree_hash)
    check_counts("IMDB", "reviews", {s: len(reviews[s]) for s in ("train", "test")}, p, src.path)
    T = cfg["max_length"]
    train_all, raw_train = _to_split(reviews["train"], T)
    test, raw_test = _to_split(reviews["test"], T)
    # stratified carve: n_c reviews of each class, chosen with val_seed
    rng = np.random.default_rng(p["val_seed"])
    per_class = allocate(np.bincount(train_all.labels, minlength=cfg["num_classes"]), p["val_size"])
    is_val = np.zeros(len(train_all), dtype=bool)
    for c, n_c in enumerate(per_class):
        idx = np.flatnonzero(train_all.labels == c)
        is_val[rng.permutation(idx)[:n_c]] = True
    seed = p["shuffle_seed"]
    index = carve_index(is_val, len(test), seed)
    splits = carve(train_all, test, index)
    for s, rows in index.items():
        splits[s].stats["truncated"] = int(((raw_test if s == "test" else raw_train)[rows] > T).sum())
    desc = describe_source(src, p, tree_hash)
    notes = [
        f"Tokens: UTF-8 bytes, id = byte + 1, id 0 = padding (vocabulary {len(VOCAB)}); no text cleaning "
        f"(HTML such as <br /> kept, as LRA); each review truncated to its first {T} bytes.",
        f"Validation: {p['val_size']:,} reviews carved from the official 25k train set with seed {p['val_seed']}, "
        f"stratified by label ({', '.join(f'{c}: {int(n):,}' for c, n in zip(p['classes'], per_class))}); "
        "train keeps the rest. The official test set is whole and is not for model selection.",
        f"Raw review length (bytes), official train: mean {raw_train.mean():.0f}, median "
        f"{np.median(raw_train):.0f}; test: mean {raw_test.mean():.0f}.",
        f"Rows of each split are in a seeded random order (shuffle_seed {seed}); ids are "
        "split/label/<id>_<rating> of the source files.",
    ]
    return Prepared(splits=splits, vocab=VOCAB, pad_id=PAD, tokenizer=TOKENIZER, class_names=list(p["classes"]),
                    source=desc, notes=notes, location=location(src))
