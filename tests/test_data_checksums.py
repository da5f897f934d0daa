"""A prepared split's two checksums (hkt/data/parquet.py, docs/data.md): the file's SHA-256,
which the release of hkt that wrote it changes (its metadata's ``code_version``), and its
content's, which only the rows and the content-defining metadata change; a run compares the
content of its data on resume and rerun (issue 58)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from hkt.data.parquet import SplitData, content_sha256, write_split
from hkt.fileio import sha256_file
from hkt.train.rundir import RunMismatch, check_same_data

META = {"task": "listops", "split": "test", "vocab": ["<pad>", "1", "2"], "vocab_size": 3,
        "num_classes": 10, "max_length": 4, "num_examples": 3, "code_version": "0.1.0"}


def split(labels=(1, 2, 3)) -> SplitData:
    return SplitData.from_lengths(["a", "b", "c"], np.array([1, 2, 1, 2, 2, 1], dtype=np.uint16),
                                  np.array([1, 2, 3]), np.array(labels))


def written(path: Path, data: SplitData | None = None, **meta) -> Path:
    write_split(path, data or split(), {**META, **meta})
    return path


def test_files_differing_only_in_the_code_version_have_one_content(tmp_path):
    old = written(tmp_path / "old.parquet")
    new = written(tmp_path / "new.parquet", code_version="0.2.0")
    assert sha256_file(old) != sha256_file(new)  # the file checksum sees the release
    assert content_sha256(old) == content_sha256(new)  # the content checksum does not


@pytest.mark.parametrize("change", [
    {"data": split(labels=(1, 2, 4))},                      # one label
    {"data": SplitData.from_lengths(["a", "b", "c"],        # one token
                                    np.array([1, 2, 1, 2, 2, 2], dtype=np.uint16),
                                    np.array([1, 2, 3]), np.array([1, 2, 3]))},
    {"data": SplitData.from_lengths(["a", "b", "d"],        # one id
                                    np.array([1, 2, 1, 2, 2, 1], dtype=np.uint16),
                                    np.array([1, 2, 3]), np.array([1, 2, 3]))},
    {"vocab": ["<pad>", "1", "3"]},                         # content-defining metadata
])
def test_a_changed_value_changes_the_content_checksum(tmp_path, change):
    base = content_sha256(written(tmp_path / "base.parquet"))
    assert content_sha256(written(tmp_path / "changed.parquet", **change)) != base


def data(files: str, content: str) -> SimpleNamespace:
    """What check_same_data reads of a run's data (hkt.train.data.RunData)."""
    return SimpleNamespace(dir=Path("data"), checksums={"test": files},
                           content_checksums={"test": content})


def test_a_run_compares_its_datas_content_and_an_older_one_its_files():
    saved = {"data_checksums": {"test": "f1"}, "data_content_checksums": {"test": "c1"}}
    check_same_data(saved, data("f2", "c1"), Path("last.pt"))  # another release wrote them
    with pytest.raises(RunMismatch, match=r"content sha256 mismatch"):
        check_same_data(saved, data("f1", "c2"), Path("last.pt"))
    older = {"data_checksums": {"test": "f1"}}  # saved before content checksums were kept
    check_same_data(older, data("f1", "c9"), Path("last.pt"))
    with pytest.raises(RunMismatch, match=r"file sha256 mismatch"):
        check_same_data(older, data("f2", "c1"), Path("last.pt"))
    check_same_data({}, data("f1", "c1"), Path("last.pt"))  # nothing saved: nothing to compare
