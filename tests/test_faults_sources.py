"""Raw sources that must be refused, through ``hkt prepare`` as a user runs it (issue 11: 9, 10)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from fixtures_data import imdb_reviews, write_imdb_archive, write_imdb_tree
from hkt.cli.main import main

ARGS = ["max_length=256", "prepare.val_size=4", "--quiet"]


@pytest.fixture(scope="module")
def reviews():
    return imdb_reviews(n_per_folder=4)


def _prepare(source: Path, out: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["prepare", "imdb", "--out", str(out), "--source", str(source), *ARGS])
    return code, capsys.readouterr().err


def test_directory_link_leaving_the_source_is_refused(tmp_path, reviews, capsys):
    base = write_imdb_tree(tmp_path / "src", reviews)
    secret = tmp_path / "secret.txt"
    secret.write_text("not a review")
    os.symlink(secret, base / "train" / "pos" / "60_9.txt")
    code, err = _prepare(base, tmp_path / "out", capsys)
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("hkt: error: unsafe member in source directory") and "60_9.txt" in last
    assert "outside the directory" in err and not (tmp_path / "out" / "train.parquet").exists()


def test_directory_link_inside_the_source_is_read(tmp_path, reviews, capsys):
    base = write_imdb_tree(tmp_path / "src", reviews)
    inside = base / "train" / "pos"
    first = sorted(inside.iterdir())[0]
    os.symlink(first.name, inside / "60_9.txt")  # relative link to a sibling: stays inside
    code, err = _prepare(base, tmp_path / "out", capsys)
    assert code == 0, err


def test_linked_directory_leaving_the_source_is_refused(tmp_path, reviews, capsys):
    base = write_imdb_tree(tmp_path / "src", reviews)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", base / "train" / "pos" / "more")
    code, err = _prepare(base, tmp_path / "out", capsys)
    assert code == 2 and "unsafe member in source directory" in err and "more" in err


def test_gzip_trailer_crc_is_checked(tmp_path, reviews, capsys):
    good = write_imdb_archive(tmp_path / "aclImdb_alt.tar.gz", reviews)
    code, err = _prepare(good, tmp_path / "ok", capsys)
    assert code == 0, err
    data = bytearray(good.read_bytes())
    data[-8] ^= 0xFF  # first byte of the gzip trailer's CRC-32
    bad = tmp_path / "aclImdb_crc.tar.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(gzip.BadGzipFile):
        gzip.decompress(bytes(data))  # the fixture really is corrupt
    code, err = _prepare(bad, tmp_path / "out", capsys)
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("hkt: error: archive") and "corrupt or truncated" in last and "CRC" in last
    assert not (tmp_path / "out" / "train.parquet").exists()
