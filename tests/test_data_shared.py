"""Integration: prepare the real IMDB and CIFAR-10 data from the offline mirror ../shared/data.

Skipped (with the reason) when the mirror is absent; ``HKT_SHARED_DATA`` points elsewhere.
Checks the official counts (IMDB 25k/25k, CIFAR-10 50k/10k) and the label balance.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from fixtures_data import shared_data_dir
from hkt.data.parquet import read_metadata
from hkt.data.prepare import prepare_task

SHARED = shared_data_dir()
pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(not (SHARED / "imdb").is_dir() or not (SHARED / "cifar10").is_dir(),
                       reason=f"offline data mirror not found at {SHARED} (set HKT_SHARED_DATA)"),
]


def _labels(path):
    return pq.read_table(path, columns=["label"])["label"].to_numpy()


def test_imdb_from_shared_mirror(tmp_path, monkeypatch):
    monkeypatch.setenv("HKT_DATA_MIRROR", str(SHARED))
    prepare_task("imdb", tmp_path)
    lab = {s: _labels(tmp_path / f"{s}.parquet") for s in ("train", "val", "test")}
    assert len(lab["train"]) + len(lab["val"]) == 25_000 and len(lab["test"]) == 25_000
    assert len(lab["val"]) == 2_500
    for s, y in lab.items():
        assert np.bincount(y, minlength=2).tolist() == [len(y) // 2, len(y) // 2], s
    meta = read_metadata(tmp_path / "train.parquet")
    assert meta["source"]["official"] is False
    assert meta["source"]["sha256"] == "98b8d50b2f76316a6fde3b9e0c84d75540c824cd48eb0e871766e73952906d7d"
    lengths = pq.read_table(tmp_path / "test.parquet", columns=["length"])["length"].to_numpy()
    assert lengths.max() == 1024 and lengths.min() > 0


def test_cifar10_from_shared_mirror(tmp_path, monkeypatch):
    monkeypatch.setenv("HKT_DATA_MIRROR", str(SHARED))
    prepare_task("cifar10", tmp_path)
    lab = {s: _labels(tmp_path / f"{s}.parquet") for s in ("train", "val", "test")}
    assert len(lab["train"]) + len(lab["val"]) == 50_000 and len(lab["test"]) == 10_000
    assert len(lab["val"]) == 5_000
    assert np.bincount(lab["train"], minlength=10).tolist() == [4_500] * 10
    assert np.bincount(lab["val"], minlength=10).tolist() == [500] * 10
    assert np.bincount(lab["test"], minlength=10).tolist() == [1_000] * 10
    meta = read_metadata(tmp_path / "test.parquet")
    assert meta["source"]["layout"] == "image folder" and meta["vocab_size"] == 256
