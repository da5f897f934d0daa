"""Integration: prepare the real IMDB and CIFAR-10 data from the offline mirror ../shared/data.

Each task is skipped (with the reason) when its mirror folder is absent; ``HKT_SHARED_DATA``
points elsewhere. Checks the official counts (IMDB 25k/25k, CIFAR-10 50k/10k), the exact label
balance, the lengths and the recorded source.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from fixtures_data import shared_data_dir
from hkt.data.parquet import read_metadata
from hkt.data.prepare import prepare_task

SHARED = shared_data_dir()
pytestmark = pytest.mark.shared_data

# task: (train + val, val, test, classes, vocabulary size, what the metadata's source records)
EXPECTED = {
    "imdb": (25_000, 2_500, 25_000, 2, 257,
             {"official": False, "sha256": "98b8d50b2f76316a6fde3b9e0c84d75540c824cd48eb0e871766e73952906d7d"}),
    "cifar10": (50_000, 5_000, 10_000, 10, 256, {"layout": "image folder"}),
}


def _column(path, name):
    return pq.read_table(path, columns=[name])[name].to_numpy()


@pytest.mark.parametrize("task", [
    pytest.param(t, marks=pytest.mark.skipif(not (SHARED / t).is_dir(), reason=(
        f"offline data mirror folder {SHARED / t} not found (set HKT_SHARED_DATA)")))
    for t in EXPECTED])
def test_prepare_from_shared_mirror(task, tmp_path, monkeypatch):
    n_train_all, n_val, n_test, k, vocab_size, source = EXPECTED[task]
    monkeypatch.setenv("HKT_DATA_MIRROR", str(SHARED))
    prepare_task(task, tmp_path)
    lab = {s: _column(tmp_path / f"{s}.parquet", "label") for s in ("train", "val", "test")}
    assert [len(lab["train"]) + len(lab["val"]), len(lab["val"]), len(lab["test"])] == [n_train_all, n_val, n_test]
    for s, y in lab.items():  # both datasets are balanced, and so is every split
        assert np.bincount(y, minlength=k).tolist() == [len(y) // k] * k, s
    meta = read_metadata(tmp_path / "test.parquet")
    assert {key: meta["source"][key] for key in source} == source and meta["vocab_size"] == vocab_size
    lengths = _column(tmp_path / "test.parquet", "length")
    assert lengths.min() > 0 and lengths.max() == meta["max_length"] == 1024
