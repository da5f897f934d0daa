"""Downloads (local HTTP server only), checksums, the mirror, safe archive reading."""

from __future__ import annotations

import hashlib
import io
import logging
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from fixtures_data import FileServer, add_bytes
from hkt.data import sources
from hkt.data.archives import iter_files
from hkt.data.sources import download, mirror_source, resolve_source
from hkt.errors import DataError

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB
SHA = hashlib.sha256(PAYLOAD).hexdigest()
MD5 = hashlib.md5(PAYLOAD).hexdigest()


@pytest.fixture
def server():
    with FileServer({"/data.bin": PAYLOAD}) as s:
        yield s


def test_download_verifies_and_skips_when_present(server, tmp_path):
    dest = tmp_path / "data.bin"
    digests = download(f"{server.url}/data.bin", dest, sha256=SHA, md5=MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD and digests["sha256"] == SHA
    assert not (tmp_path / "data.bin.part").exists()
    n = len(server.requests)
    download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False)
    assert len(server.requests) == n  # verified file present: no request


def test_two_processes_downloading_one_file_take_turns(server, tmp_path):
    """Two prepare jobs (or two suites sharing a cache) fetching the same archive at once: one
    downloads, the other waits and finds it verified; neither writes into the other's .part."""
    import threading

    dest, start, errors = tmp_path / "data.bin", threading.Barrier(2), []

    def fetch():
        start.wait()
        try:
            download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False)
        except Exception as exc:  # noqa: BLE001  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and dest.read_bytes() == PAYLOAD
    assert len(server.requests) == 1


def test_download_resumes_a_partial_file(server, tmp_path):
    dest = tmp_path / "data.bin"
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:300_000])
    download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.requests[-1]["range"] == "bytes=300000-"


def test_download_restarts_when_range_is_ignored(server, tmp_path):
    server.honour_range = False
    dest = tmp_path / "data.bin"
    (tmp_path / "data.bin.part").write_bytes(b"garbage" * 1000)
    download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_dropped_connection_is_resumed(server, tmp_path):
    server.truncate_at = 400_000
    dest = tmp_path / "data.bin"

    # the server drops every first response at 400 kB; the retry resumes with Range and succeeds
    download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False, retries=2)
    assert dest.read_bytes() == PAYLOAD
    assert any(r["range"] == "bytes=400000-" for r in server.requests)


def test_truncated_download_fails_and_deletes_partial(server, tmp_path):
    server.truncate_at = 400_000
    server.honour_range = False  # every attempt restarts and is cut again
    dest = tmp_path / "data.bin"
    with pytest.raises(DataError) as err:
        download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False, retries=1)
    msg = str(err.value)
    assert "truncated" in msg and "data.bin" in msg and SHA in msg and str(len(PAYLOAD)) in msg
    assert not dest.exists() and not (tmp_path / "data.bin.part").exists()


def test_a_download_larger_than_announced_fails_and_deletes_partial(server, tmp_path):
    """The config's size is the total: a server that sends more (a wrong file) is refused."""
    dest = tmp_path / "data.bin"
    with pytest.raises(DataError) as err:
        download(f"{server.url}/data.bin", dest, sha256=SHA, size=1000, progress=False)
    assert str(err.value) == (f"download of data.bin from {server.url}/data.bin is larger than "
                              f"expected ({len(PAYLOAD)} > 1000 bytes); the partial file was deleted")
    assert not dest.exists() and not (tmp_path / "data.bin.part").exists()


def test_a_server_that_answers_416_to_a_complete_partial_file(server, tmp_path):
    """HTTP 416 on a resume: the partial file already holds everything; its checksum decides."""
    dest = tmp_path / "data.bin"
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD)
    digests = download(f"{server.url}/data.bin", dest, sha256=SHA, size=len(PAYLOAD),
                       progress=False)
    assert digests["sha256"] == SHA and dest.read_bytes() == PAYLOAD


def test_wrong_checksum_fails_and_deletes(server, tmp_path):
    dest = tmp_path / "data.bin"
    wrong = "0" * 64
    with pytest.raises(DataError) as err:
        download(f"{server.url}/data.bin", dest, sha256=wrong, progress=False)
    msg = str(err.value)
    assert "data.bin" in msg and wrong in msg and SHA in msg
    assert not dest.exists() and not (tmp_path / "data.bin.part").exists()


def test_corrupt_cached_file_is_replaced(server, tmp_path, caplog):
    dest = tmp_path / "data.bin"
    dest.write_bytes(b"corrupt")
    with caplog.at_level(logging.WARNING, logger="hkt.data"):
        download(f"{server.url}/data.bin", dest, sha256=SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD and "checksum mismatch" in caplog.text


def test_http_error_and_no_checksum(server, tmp_path):
    with pytest.raises(DataError, match="HTTP 404"):
        download(f"{server.url}/missing.bin", tmp_path / "m.bin", sha256=SHA, progress=False)
    with pytest.raises(DataError, match="without an expected checksum"):
        download(f"{server.url}/data.bin", tmp_path / "m.bin", progress=False)


def _prep(**kw):
    base = {"url": "http://127.0.0.1:9/never", "filename": "official.tar.gz", "sha256": SHA, "md5": None,
            "size": None, "source": None, "mirror": None, "download_dir": None, "retries": 0, "timeout_s": 5}
    base.update(kw)
    return base


def _tgz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            add_bytes(tf, name, data)
    return path


def test_resolve_source_downloads_through_the_config(server, tmp_path):
    arch = _tgz(tmp_path / "src.tar.gz", {"x/a.txt": b"a"})
    server.files["/official.tar.gz"] = arch.read_bytes()
    prep = _prep(url=f"{server.url}/official.tar.gz", sha256=hashlib.sha256(arch.read_bytes()).hexdigest(),
                 download_dir=str(tmp_path / "dl"))
    src = resolve_source("task", prep, progress=False)
    assert src.official and src.origin == "download" and src.path == tmp_path / "dl" / "official.tar.gz"


def test_mirror_official_alternative_and_errors(tmp_path, caplog):
    mirror = tmp_path / "mirror"
    (mirror / "task").mkdir(parents=True)
    alt = _tgz(mirror / "task" / "alternative.tar.gz", {"x/a.txt": b"a"})
    (mirror / "task" / "README.md").write_text("ignored")
    with caplog.at_level(logging.WARNING, logger="hkt.data"):
        src = mirror_source(mirror, "task", _prep())
    assert not src.official and src.path == alt and "not the official" in caplog.text
    assert src.digests["sha256"] == hashlib.sha256(alt.read_bytes()).hexdigest()

    # SHA256SUMS at the mirror root is honoured
    (mirror / "SHA256SUMS").write_text(f"{'1' * 64}  task/alternative.tar.gz\n")
    with pytest.raises(DataError, match="SHA256SUMS"):
        mirror_source(mirror, "task", _prep())
    (mirror / "SHA256SUMS").unlink()

    # two candidates: ambiguous
    (mirror / "task" / "other").mkdir()
    with pytest.raises(DataError, match="several candidates"):
        mirror_source(mirror, "task", _prep())

    # the official name wins and must verify against the official checksum
    official = mirror / "task" / "official.tar.gz"
    official.write_bytes(b"not really")
    with pytest.raises(DataError) as err:
        mirror_source(mirror, "task", _prep())
    assert "official.tar.gz" in str(err.value) and SHA in str(err.value)
    assert hashlib.sha256(b"not really").hexdigest() in str(err.value)
    official.write_bytes(PAYLOAD)
    assert mirror_source(mirror, "task", _prep()).official

    with pytest.raises(DataError, match="no missing/ folder"):
        mirror_source(mirror, "missing", _prep())


def test_mirror_from_environment_via_config(tmp_path, monkeypatch):
    from hkt.data.task_config import load_task_config

    monkeypatch.setenv("HKT_DATA_MIRROR", str(tmp_path))
    assert load_task_config("imdb")["prepare"]["mirror"] == str(tmp_path)
    monkeypatch.delenv("HKT_DATA_MIRROR")
    assert load_task_config("imdb")["prepare"]["mirror"] is None


def _evil_archive(tmp_path: Path, kind: str) -> Path:
    """A tar.gz with one good file and one malicious member of ``kind``."""
    p = tmp_path / f"{kind}.tar.gz"
    with tarfile.open(p, "w:gz") as tf:
        add_bytes(tf, "root/train/pos/0_9.txt", b"fine")
        if kind == "absolute":
            add_bytes(tf, "/tmp/evil.txt", b"x")
        elif kind == "dotdot":
            add_bytes(tf, "root/../../evil.txt", b"x")
        elif kind in ("symlink", "hardlink"):
            info = tarfile.TarInfo("root/train/pos/1_9.txt")
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            info.linkname = "/etc/passwd" if kind == "symlink" else "../../../etc/passwd"
            tf.addfile(info)
        else:
            info = tarfile.TarInfo("root/dev")
            info.type = tarfile.CHRTYPE
            tf.addfile(info)
    return p


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink", "hardlink", "device"])
def test_malicious_tar_members_are_refused(tmp_path, kind):
    with pytest.raises(DataError, match="unsafe member"):
        list(iter_files(_evil_archive(tmp_path, kind), lambda rel: True))
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_zip_traversal_refused_and_zip_read(tmp_path):
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("root/a.txt", b"a")
        zf.writestr("root/b.bin", b"b")
    assert [(str(r), d) for r, d in iter_files(good, lambda r: r.suffix == ".txt")] == [("root/a.txt", b"a")]
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../evil.txt", b"x")
    with pytest.raises(DataError, match="unsafe member"):
        list(iter_files(bad, lambda r: True))


def test_iter_files_directory_and_tree_hash(tmp_path):
    (tmp_path / "d" / "b").mkdir(parents=True)
    (tmp_path / "d" / "b" / "2.txt").write_bytes(b"2")
    (tmp_path / "d" / "1.txt").write_bytes(b"1")
    h1, h2 = hashlib.sha256(), hashlib.sha256()
    got = list(iter_files(tmp_path / "d", lambda r: True, tree_hash=h1))
    assert got == [(PurePosixPath("1.txt"), b"1"), (PurePosixPath("b/2.txt"), b"2")]
    list(iter_files(tmp_path / "d", lambda r: True, tree_hash=h2))
    assert h1.hexdigest() == h2.hexdigest()


def test_corrupt_archive_is_a_clear_error(tmp_path):
    arch = _tgz(tmp_path / "a.tar.gz", {f"x/{i}.txt": bytes(1000) for i in range(50)})
    data = arch.read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="corrupt or truncated|cannot open"):
        list(iter_files(tmp_path / "cut.tar.gz", lambda r: True))
    (tmp_path / "junk.tar.gz").write_bytes(b"junk" * 100)
    with pytest.raises(DataError):
        list(iter_files(tmp_path / "junk.tar.gz", lambda r: True))
    # a zip whose end record is intact but whose central directory is damaged
    import zipfile

    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        for i in range(3):
            zf.writestr(f"x/{i}.txt", bytes(1000))
    data = bytearray((tmp_path / "a.zip").read_bytes())
    central = data.rindex(b"PK\x01\x02", 0, len(data) - 22)
    data[central:central + 4] = b"XXXX"
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    assert zipfile.is_zipfile(tmp_path / "bad.zip")
    with pytest.raises(DataError, match="bad.zip is corrupt or truncated"):
        list(iter_files(tmp_path / "bad.zip", lambda r: True))


def test_file_digests_match_hashlib(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(io.BytesIO(PAYLOAD).read())
    assert sources.file_digests(p) == {"sha256": SHA, "md5": MD5}


def test_a_download_that_cannot_connect_says_how_to_run_offline(tmp_path):
    """Offline, with nothing set (issue 64): the error names the mirror variable, the file to put
    where, and the page that says more, in one line."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prep = _prep(url=f"http://127.0.0.1:{port}/official.tar.gz", download_dir=str(tmp_path / "dl"))
    with pytest.raises(DataError) as err:
        resolve_source("task", prep, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "failed after 0 retries" in msg
    assert "put official.tar.gz" in msg and "DIR/task/" in msg and "HKT_DATA_MIRROR=DIR" in msg
    assert f"copy official.tar.gz to {tmp_path / 'dl' / 'official.tar.gz'}" in msg
    assert msg.endswith("(docs/data.md)")
    assert not (tmp_path / "dl" / "official.tar.gz.part").exists()
