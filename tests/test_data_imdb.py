"""IMDB bytes: fixture archives in the official layout, round trips, val carve, bad input."""

from __future__ import annotations

import logging
import tarfile
from pathlib import Path

import pytest

from fixtures_data import FileServer, imdb_reviews, read_rows, sha256, write_imdb_archive, write_imdb_tree
from hkt.data.families import imdb
from hkt.data.parquet import read_metadata
from hkt.data.prepare import prepare_task
from hkt.errors import DataError

T = 256
BASE = [f"max_length={T}", "prepare.val_size=4"]


@pytest.fixture(scope="module")
def reviews():
    return imdb_reviews(n_per_folder=6)


@pytest.fixture(scope="module")
def archive(tmp_path_factory, reviews) -> Path:
    return write_imdb_archive(tmp_path_factory.mktemp("imdb") / "aclImdb_alt.tar.gz", reviews)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, archive) -> Path:
    out = tmp_path_factory.mktemp("imdb-out")
    prepare_task("imdb", out, source=archive, overrides=BASE)
    return out


def test_round_trip_bytes_labels_and_counts(prepared, reviews):
    original = {f"{s}/{lab}/{name[:-4]}": (data, int(lab == "pos"))
                for (s, lab), rows in reviews.items() for name, data in rows}
    seen = {}
    for split in ("train", "val", "test"):
        meta = read_metadata(prepared / f"{split}.parquet")
        assert meta["vocab_size"] == 257 and meta["pad_id"] == 0 and meta["max_length"] == T
        assert meta["class_names"] == ["neg", "pos"] and meta["task"] == "imdb"
        assert meta["source"]["official"] is False and len(meta["source"]["sha256"]) == 64
        for rid, (toks, label, length) in read_rows(prepared / f"{split}.parquet").items():
            data, want = original[rid]
            assert imdb.decode(toks) == data[:T] and label == want and length == len(toks) == min(len(data), T)
            assert min(toks) >= 1
            seen[rid] = split
    assert len(seen) == len(original)  # every review exactly once; unsup/ ignored
    assert all(seen[r] == "test" for r in seen if r.startswith("test/"))
    counts = {s: sum(1 for v in seen.values() if v == s) for s in ("train", "val", "test")}
    assert counts == {"train": 8, "val": 4, "test": 12}
    val_labels = [lab for _, lab, _ in read_rows(prepared / "val.parquet").values()]
    assert sorted(val_labels) == [0, 0, 1, 1]  # stratified
    assert any("é".encode() in original[r][0] for r in seen)  # non-ASCII UTF-8 exercised


def test_an_alternative_archive_is_flagged_at_the_top_of_the_card(prepared):
    """Data from a non-official archive says so in the card's first lines, not only in a log."""
    head = "\n".join((prepared / "README.md").read_text().splitlines()[:4])
    assert "**Warning:**" in head and "not the official archive" in head
    meta = read_metadata(prepared / "train.parquet")
    assert meta["source"]["sha256"] in head


def test_truncation_is_counted_in_the_card(prepared, reviews):
    card = (prepared / "README.md").read_text()
    assert "NOT the official" in card and "Validation: 4 reviews carved" in card
    raw_len = {f"{s}/{lab}/{name[:-4]}": len(data) for (s, lab), rows in reviews.items() for name, data in rows}
    # | split | examples | tokens | lengths | truncated | SHA-256 |
    table = {cells[1].strip(): cells for cells in (line.split("|") for line in card.splitlines())
             if len(cells) == 8 and cells[1].strip() in ("train", "val", "test")}
    truncated = {}
    for split in ("train", "val", "test"):
        rows = read_rows(prepared / f"{split}.parquet")
        assert int(table[split][2].replace(",", "")) == len(rows)
        truncated[split] = int(table[split][5].replace(",", ""))
        assert truncated[split] == sum(raw_len[rid] > T for rid in rows), split
    assert truncated["test"] > 0 and truncated["train"] + truncated["val"] > 0  # the fixture's long reviews


def test_directory_source_same_data(tmp_path, reviews, prepared):
    write_imdb_tree(tmp_path / "src", reviews)
    out = tmp_path / "out"
    prepare_task("imdb", out, source=tmp_path / "src" / "aclImdb", overrides=BASE)
    for split in ("train", "val", "test"):
        assert read_rows(out / f"{split}.parquet") == read_rows(prepared / f"{split}.parquet")
    meta = read_metadata(out / "train.parquet")
    assert meta["source"]["layout"] == "directory" and len(meta["source"]["sha256_of_files"]) == 64


def test_deterministic(tmp_path, archive, prepared):
    prepare_task("imdb", tmp_path, source=archive, overrides=BASE)
    for s in ("train", "val", "test"):
        assert (tmp_path / f"{s}.parquet").read_bytes() == (prepared / f"{s}.parquet").read_bytes()


def test_official_file_verified_from_mirror(tmp_path, reviews, monkeypatch):
    mirror = tmp_path / "mirror"
    arch = write_imdb_archive(mirror / "imdb" / "aclImdb_v1.tar.gz", reviews)
    monkeypatch.setenv("HKT_DATA_MIRROR", str(mirror))
    # the official name with the wrong content: stops, naming the file and both checksums
    with pytest.raises(DataError) as err:
        prepare_task("imdb", tmp_path / "o1", overrides=BASE)
    msg = str(err.value)
    assert "aclImdb_v1.tar.gz" in msg and "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe" in msg
    assert sha256(arch) in msg
    # pretend the fixture is the official file (its checksum in the config): accepted as official
    prepare_task("imdb", tmp_path / "o2", overrides=[*BASE, f"prepare.sha256={sha256(arch)}", "prepare.md5=null"])
    assert read_metadata(tmp_path / "o2" / "test.parquet")["source"]["official"] is True


def test_download_path(tmp_path, reviews, monkeypatch):
    arch = write_imdb_archive(tmp_path / "srv.tar.gz", reviews)
    monkeypatch.delenv("HKT_DATA_MIRROR", raising=False)
    with FileServer({"/aclImdb_v1.tar.gz": arch.read_bytes()}) as server:
        ov = [*BASE, f"prepare.url={server.url}/aclImdb_v1.tar.gz", f"prepare.sha256={sha256(arch)}",
              "prepare.md5=null", "prepare.size=null", f"prepare.download_dir={tmp_path / 'dl'}"]
        prepare_task("imdb", tmp_path / "o", overrides=ov)
        assert (tmp_path / "dl" / "aclImdb_v1.tar.gz").is_file()
        meta = read_metadata(tmp_path / "o" / "train.parquet")
        assert meta["source"]["official"] is True and meta["source"]["url"].endswith("/aclImdb_v1.tar.gz")


def test_non_utf8_review_is_an_error(tmp_path, reviews):
    bad = dict(reviews)
    bad[("train", "pos")] = [*reviews[("train", "pos")], ("99_9.txt", b"caf\xe9 latin-1")]
    arch = write_imdb_archive(tmp_path / "bad.tar.gz", bad)
    with pytest.raises(DataError, match=r"aclImdb/train/pos/99_9.txt .*not valid UTF-8"):
        prepare_task("imdb", tmp_path / "o", source=arch, overrides=BASE)


def test_missing_folder_and_wrong_layout(tmp_path, reviews):
    partial = {k: v for k, v in reviews.items() if k != ("test", "neg")}
    arch = write_imdb_archive(tmp_path / "partial.tar.gz", partial)
    with pytest.raises(DataError, match=r"no reviews in test/neg/"):
        prepare_task("imdb", tmp_path / "o", source=arch, overrides=BASE)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"expected the aclImdb layout"):
        prepare_task("imdb", tmp_path / "o", source=tmp_path / "empty", overrides=BASE)
    with pytest.raises(DataError, match="does not exist"):
        prepare_task("imdb", tmp_path / "o", source=tmp_path / "nope.tar.gz", overrides=BASE)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(DataError, match="neither a directory nor an archive"):
        prepare_task("imdb", tmp_path / "o", source=tmp_path / "x.txt", overrides=BASE)


def test_malicious_member_stops_preparation(tmp_path, reviews):
    link = tarfile.TarInfo("aclImdb/train/pos/500_9.txt")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    arch = write_imdb_archive(tmp_path / "evil.tar.gz", reviews, extra=[link])
    with pytest.raises(DataError, match=r"unsafe member .*500_9.txt"):
        prepare_task("imdb", tmp_path / "o", source=arch, overrides=BASE)
    arch2 = write_imdb_archive(tmp_path / "evil2.tar.gz", reviews, extra=[("aclImdb/../../evil.txt", b"x")])
    with pytest.raises(DataError, match="unsafe member"):
        prepare_task("imdb", tmp_path / "o", source=arch2, overrides=BASE)


def test_unofficial_counts_warn(tmp_path, archive, caplog):
    with caplog.at_level(logging.WARNING, logger="hkt.data"):
        prepare_task("imdb", tmp_path, source=archive, overrides=BASE)
    assert "the official dataset has 25000" in caplog.text


def test_val_size_too_large(tmp_path, archive):
    with pytest.raises(DataError, match="val_size"):
        prepare_task("imdb", tmp_path, source=archive, overrides=[f"max_length={T}", "prepare.val_size=12"])
