"""The training loader: padding, masks, determinism, bucketing, exact mid-epoch resume; the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from hkt.data.load import BucketBatchSampler, TokenDataset, make_loader, read_split_metadata
from hkt.data.parquet import SplitData, write_split
from hkt.fileio import sha256_file
from hkt.data.prepare import prepare_task
from hkt.errors import DataError

LISTOPS_SMALL = ["prepare.splits.train=200", "prepare.splits.val=20", "prepare.splits.test=20",
                 "prepare.chunk_size=2000", "prepare.min_length=10"]


@pytest.fixture(scope="module")
def split_file(tmp_path_factory) -> Path:
    """103 rows of lengths 1..103 (row i = tokens i+1 repeated), max_length 128."""
    out = tmp_path_factory.mktemp("load") / "train.parquet"
    lens = np.arange(1, 104)
    flat = np.concatenate([np.full(n, (n % 250) + 1) for n in lens])
    offsets = np.concatenate([[0], np.cumsum(lens)])
    data = SplitData([f"r{i}" for i in range(lens.size)], flat, offsets, lens % 3)
    write_split(out, data, {"task": "t", "vocab_size": 256, "num_classes": 3, "max_length": 128, "pad_id": 0})
    return out


def test_take_and_atomic_write_split(tmp_path, monkeypatch):
    """take() gathers rows (without the whole split's stats); a failed write keeps the old file
    and leaves no temporary file."""
    data = SplitData.from_lengths(["a", "b", "c"], np.arange(1, 7), np.array([1, 2, 3]), np.array([0, 1, 0]),
                                  {"truncated": 2})
    sub = data.take(np.array([2, 0]))
    assert sub.ids == ["c", "a"] and sub.flat.tolist() == [4, 5, 6, 1] and sub.lengths.tolist() == [3, 1]
    assert sub.labels.tolist() == [0, 0] and sub.stats == {} and data.stats == {"truncated": 2}
    path = tmp_path / "train.parquet"
    digest = write_split(path, data, {"task": "t"})

    def broken(table, where, **kwargs):
        Path(where).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr("pyarrow.parquet.write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_split(path, sub, {"task": "t"})
    assert sha256_file(path) == digest and [p.name for p in tmp_path.iterdir()] == ["train.parquet"]


def test_batches_padding_mask_lengths(split_file):
    loader = make_loader(split_file, batch_size=10, pad_multiple=16)
    batches = list(loader)
    assert len(batches) == len(loader) == 11
    seen = []
    for b in batches:
        tokens, mask, lengths, labels = b["tokens"], b["mask"], b["lengths"], b["labels"]
        assert tokens.dtype == torch.long and mask.dtype == torch.bool and lengths.dtype == torch.long
        t = tokens.shape[1]
        assert (t % 16 == 0 or t == 128) and int(lengths.max()) <= t <= 128
        assert torch.equal(mask, torch.arange(t)[None] < lengths[:, None])
        assert torch.all(tokens[~mask] == 0)
        for row, n, lab, idx in zip(tokens, lengths, labels, b["index"]):
            assert int(n) == int(idx) + 1 and int(lab) == (int(idx) + 1) % 3
            assert torch.all(row[: int(n)] == (int(n) % 250) + 1)
        seen += b["index"].tolist()
    assert seen == list(range(103))  # shuffle=False keeps the file order


def test_cap_and_truncation(split_file):
    b = next(iter(make_loader(split_file, batch_size=103, pad_multiple=100)))
    assert b["tokens"].shape[1] == 128  # rounded to 200, capped at the data's max_length
    b = next(iter(make_loader(split_file, batch_size=103, pad_multiple=8, max_length=50)))
    assert b["tokens"].shape[1] == 50 and int(b["lengths"].max()) == 50


def test_deterministic_per_seed_and_epoch(split_file):
    def order(seed, epochs=2, **kw):
        loader = make_loader(split_file, batch_size=8, shuffle=True, seed=seed, **kw)
        return [[b["index"].tolist() for b in loader] for _ in range(epochs)]

    a, b = order(1), order(1)
    assert a == b and a[0] != a[1]
    assert order(2) != a
    flat = sorted(i for batch in a[0] for i in batch)
    assert flat == list(range(103))


def test_bucketing_reduces_padding_and_keeps_all(split_file):
    def padding(bucket):
        loader = make_loader(split_file, batch_size=8, shuffle=True, seed=0, bucket=bucket, bucket_size=4,
                             pad_multiple=1)
        total, idx = 0, []
        for b in loader:
            total += b["mask"].numel() - int(b["lengths"].sum())
            idx += b["index"].tolist()
        assert sorted(idx) == list(range(103))
        return total

    assert padding(True) < padding(False) / 2


def test_drop_last(split_file):
    loader = make_loader(split_file, batch_size=10, shuffle=True, drop_last=True)
    sizes = [b["tokens"].shape[0] for b in loader]
    assert sizes == [10] * 10 and len(loader) == 10


@pytest.mark.parametrize("bucket", [False, True])
def test_exact_mid_epoch_resume(split_file, bucket):
    kw = dict(batch_size=7, shuffle=True, seed=5, bucket=bucket, bucket_size=3)
    ref = make_loader(split_file, **kw)
    full = [b["index"].tolist() for _ in range(2) for b in ref]

    run = make_loader(split_file, **kw)
    got, state = [], None
    for i, b in enumerate(run):
        got.append(b["index"].tolist())
        if i == 5:
            state = json.loads(json.dumps(run.state_dict()))  # survives a JSON/checkpoint round trip
            break
    resumed = make_loader(split_file, **kw)
    resumed.load_state_dict(state)
    got += [b["index"].tolist() for b in resumed]      # rest of epoch 0
    got += [b["index"].tolist() for b in resumed]      # epoch 1
    assert got == full


def test_resume_after_last_batch_of_epoch(split_file):
    kw = dict(batch_size=50, shuffle=True, seed=1)
    ref = make_loader(split_file, **kw)
    epoch0 = [b["index"].tolist() for b in ref]
    epoch1 = [b["index"].tolist() for b in ref]
    run = make_loader(split_file, **kw)
    it = iter(run)
    for _ in range(len(epoch0)):
        next(it)
    state = run.state_dict()  # saved after the last batch, before the loop noticed the end
    assert state["epoch"] == 0 and state["position"] == len(epoch0)
    resumed = make_loader(split_file, **kw)
    resumed.load_state_dict(state)
    assert [b["index"].tolist() for b in resumed] == epoch1


def test_state_mismatch_is_refused(split_file):
    a = make_loader(split_file, batch_size=7, shuffle=True, seed=5)
    b = make_loader(split_file, batch_size=8, shuffle=True, seed=5)
    with pytest.raises(DataError, match="batch_size"):
        b.load_state_dict(a.state_dict())


def test_sampler_standalone_and_prefetching_workers(split_file):
    s = BucketBatchSampler(np.arange(1, 21), 6, shuffle=True, seed=0)
    it = iter(s)
    next(it)
    next(it)
    assert s.state_dict()["position"] == 2
    # with a worker process prefetching, the state counts only delivered batches
    loader = make_loader(split_file, batch_size=5, shuffle=True, seed=0, num_workers=1)
    it = iter(loader)
    first = [next(it)["index"].tolist() for _ in range(3)]
    assert loader.state_dict()["position"] == 3
    del it
    ref = make_loader(split_file, batch_size=5, shuffle=True, seed=0)
    assert first == [b["index"].tolist() for b, _ in zip(ref, range(3))]


def test_dataset_and_directory_api(tmp_path):
    prepare_task("listops", tmp_path, overrides=LISTOPS_SMALL)
    meta = read_split_metadata(tmp_path, "train")
    assert meta["vocab_size"] == 16 and meta["num_classes"] == 10 and meta["max_length"] == 512
    ds = TokenDataset(tmp_path / "val.parquet")
    item = ds[3]
    assert item["tokens"].dtype == torch.long and item["length"] == len(item["tokens"]) == ds.lengths[3]
    loader = make_loader(tmp_path, "test", batch_size=6)
    assert sum(b["tokens"].shape[0] for b in loader) == 20
    with pytest.raises(DataError, match="name the split"):
        make_loader(tmp_path, batch_size=2)
    with pytest.raises(DataError, match="does not exist"):
        make_loader(tmp_path, "nope", batch_size=2)


def test_cli_prepare_and_errors(tmp_path, capsys):
    from hkt.cli.main import main

    assert main(["prepare", "listops", "--out", str(tmp_path / "d"), *LISTOPS_SMALL]) == 0
    out = capsys.readouterr().out
    assert "train 200, val 20, test 20" in out and "examples/s" in out
    assert (tmp_path / "d" / "README.md").is_file()
    # overrides after the options too; a bad value stops before any work with the key named
    assert main(["prepare", "listops", "--out", str(tmp_path / "e"), "prepare.splits.train=abc"]) == 2
    err = capsys.readouterr().err
    assert "task.prepare.splits.train" in err and not (tmp_path / "e").exists()
    assert main(["prepare", "nosuchtask", "--out", str(tmp_path / "f")]) == 2
    assert "unknown task" in capsys.readouterr().err


def test_bench_loader(tmp_path, capsys):
    from hkt.cli.main import main  # our own package: a broken import fails here, never skips

    data = tmp_path / "d"
    prepare_task("listops", data, overrides=LISTOPS_SMALL)
    rc = main(["bench", "loader", "--data", str(data), "--out", str(tmp_path / "b"), "--steps", "1",
               "--warmup", "0", "--batch-size", "8", "--max-batches", "10"])
    out = capsys.readouterr().out
    assert "samples/s" in out and "training step" in out and ("PASS" in out or "FAIL" in out)
    assert (tmp_path / "b" / "loader_throughput.csv").is_file() and rc in (0, 1)
