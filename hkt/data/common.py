"""Helpers shared by the downloaded tasks (IMDB, CIFAR-10): config schema parts, split carving."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from hkt.value_checks import hexdigest, nonneg_int, optional, pos_int, spec, str_list, text
from hkt.data.parquet import SplitData
from hkt.data.sources import Source
from hkt.errors import ConfigError, DataError

log = logging.getLogger("hkt.data")

# prepare keys every downloaded task has
DOWNLOAD_SCHEMA: dict[str, Any] = {
    "source": optional(text),
    "url": text,
    "filename": text,
    "sha256": optional(spec(hexdigest, n=64)),
    "md5": optional(spec(hexdigest, n=32)),
    "size": optional(pos_int),
    "classes": str_list,
    "official_counts": {"train": pos_int, "test": pos_int},
    "val_size": pos_int,
    "shuffle_seed": nonneg_int,
    "mirror": optional(text),
    "download_dir": optional(text),
    "timeout_s": pos_int,
    "retries": nonneg_int,
}
# DOWNLOAD_SCHEMA keys that say where data come from, not what they are (kept out of the metadata)
DOWNLOAD_LOCATION_KEYS = frozenset({"source", "mirror", "download_dir", "timeout_s", "retries"})


def check_download_config(cfg: dict[str, Any]) -> None:
    p = cfg["prepare"]
    if not (p["sha256"] or p["md5"]):
        raise ConfigError("task.prepare.sha256 and task.prepare.md5 are both null: a download must be verifiable")
    if len(p["classes"]) != cfg["num_classes"]:
        raise ConfigError(f"task.prepare.classes has {len(p['classes'])} names but task.num_classes is "
                          f"{cfg['num_classes']}")


def allocate(counts: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` over classes proportionally to ``counts`` (largest remainder, ties → lower class)."""
    counts = np.asarray(counts, dtype=np.int64)
    if total > counts.sum():
        raise ValueError("total larger than the population")
    exact = counts * total / max(int(counts.sum()), 1)
    base = np.floor(exact).astype(np.int64)
    rest = total - int(base.sum())
    order = np.lexsort((np.arange(counts.size), -(exact - base)))
    base[order[:rest]] += 1
    return np.minimum(base, counts)


def seeded_order(n: int, seed: int, split: str) -> np.ndarray:
    """A fixed random row order for one split (seed and split name → permutation)."""
    key = int.from_bytes(hashlib.sha256(split.encode()).digest()[:4], "little")
    return np.random.default_rng([seed, key]).permutation(n)


def check_counts(dataset: str, unit: str, counts: dict[str, int], prep: dict[str, Any], where: Path) -> None:
    """Warn when the train/test counts differ from the official ones; fail when ``val_size``
    would leave no training examples."""
    for split, n in counts.items():
        if n != prep["official_counts"][split]:
            log.warning("%s %s has %d %s in %s; the official dataset has %d", dataset, split, n, unit, where,
                        prep["official_counts"][split])
    if prep["val_size"] >= counts["train"]:
        raise DataError(f"task.prepare.val_size = {prep['val_size']} leaves no training {unit} "
                        f"(train has {counts['train']})")


def carve_index(is_val: np.ndarray, n_test: int, seed: int) -> dict[str, np.ndarray]:
    """Rows of each split, in its seeded random order: train and val index the official train
    set (rows not in / in ``is_val``), test indexes the official test set."""
    tr, va = np.flatnonzero(~is_val), np.flatnonzero(is_val)
    return {"train": tr[seeded_order(tr.size, seed, "train")], "val": va[seeded_order(va.size, seed, "val")],
            "test": seeded_order(n_test, seed, "test")}


def carve(train_all: SplitData, test: SplitData, index: dict[str, np.ndarray]) -> dict[str, SplitData]:
    """The train/val/test splits selected by :func:`carve_index`'s ``index``."""
    return {s: (test if s == "test" else train_all).take(i) for s, i in index.items()}


def new_tree_hash(src: Source) -> Any:
    """A hashlib object for :func:`iter_files` to digest the files of a directory source (None for
    an archive, whose own checksum is recorded)."""
    return hashlib.sha256() if src.path.is_dir() else None


def describe_source(src: Source, prep: dict[str, Any], tree_hash: Any = None) -> dict[str, Any]:
    """Content-only provenance for the metadata: official URL + checksums, or the alternative's
    digest (plus ``tree_hash``'s digest of the files read from a directory)."""
    d = src.describe()
    if src.official:
        d["url"] = prep["url"]
    else:
        d["official_file"] = prep["filename"]
    if tree_hash is not None:
        d["sha256_of_files"] = tree_hash.hexdigest()
    return d


def location(src: Source) -> str:
    return f"{src.path} ({src.origin}{', official' if src.official else ', NOT the official file'})"
