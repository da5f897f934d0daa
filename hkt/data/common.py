"""Helpers shared by the downloaded tasks (IMDB, CIFAR-10): config schema parts, split carving."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from hkt.data.config import hexdigest, nonneg_int, optional, pos_int, str_list, text
from hkt.data.parquet import SplitData
from hkt.data.sources import Source
from hkt.errors import ConfigError

# prepare keys every downloaded task has
DOWNLOAD_SCHEMA: dict[str, Any] = {
    "source": optional(text),
    "url": text,
    "filename": text,
    "sha256": optional(hexdigest(64)),
    "md5": optional(hexdigest(32)),
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


def shuffled(data: SplitData, seed: int, split: str) -> SplitData:
    return data.take(seeded_order(len(data), seed, split))


def describe_source(src: Source, prep: dict[str, Any], tree_sha256: str | None) -> dict[str, Any]:
    """Content-only provenance for the metadata: official URL + checksums, or the alternative's digest."""
    d = src.describe()
    if src.official:
        d["url"] = prep["url"]
    else:
        d["official_file"] = prep["filename"]
    if tree_sha256 is not None:
        d["sha256_of_files"] = tree_sha256
    return d


def location(src: Source) -> str:
    return f"{src.path} ({src.origin}{', official' if src.official else ', NOT the official file'})"
