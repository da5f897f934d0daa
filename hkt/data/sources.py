"""Where raw data comes from: verified downloads, the offline mirror, local archives.

* :func:`download` fetches a URL with ``urllib`` into ``DEST.part``, resuming with an HTTP
  ``Range`` request after a dropped connection (or restarting when the server ignores it),
  showing progress, and verifying size and checksums before renaming to ``DEST``. A mismatch or a
  truncated download raises :class:`DataError` naming the file, the expected and the actual
  values, and deletes the partial file. A verified ``DEST`` that is already present is reused.
* :func:`resolve_source` picks the raw source of a task: ``--source`` (or ``prepare.source``),
  else the mirror ``$HKT_DATA_MIRROR/<family>/`` (or ``prepare.mirror``), else the download.
  An official file is always checked against the official checksums; anything else is used
  with a warning and its own SHA-256 is recorded.
* Reading what they fetched, safely: :func:`hkt.data.archives.iter_files` (re-exported here).
"""

from __future__ import annotations

import http.client
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from hkt.errors import DataError
from hkt.fileio import file_digests

log = logging.getLogger("hkt.data")

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
IGNORED_MIRROR_FILES = {"readme", "readme.md", "readme.txt", "sha256sums", "md5sums", "checksums"}
_CHUNK = 1 << 20


# ---- checksums ---------------------------------------------------------------------------

def verify_file(path: Path, expected: dict[str, str | None], *, delete_on_mismatch: bool = False,
                what: str | None = None) -> dict[str, str]:
    """Check ``path`` against ``expected`` (algorithm → hex digest or None); return all digests.

    Always returns the SHA-256 (and the MD5). Raises DataError naming the file, the expected and
    the actual checksums on a mismatch (deleting the file first if ``delete_on_mismatch``).
    """
    algos = tuple(dict.fromkeys(["sha256", "md5", *[a for a, v in expected.items() if v]]))
    actual = file_digests(path, algos)
    for algo, want in expected.items():
        if want and actual[algo] != want.lower():
            if delete_on_mismatch:
                path.unlink(missing_ok=True)
            raise DataError(
                f"checksum mismatch for {what or path}: expected {algo.upper()} {want.lower()}, got "
                f"{actual[algo]}" + (" (the file was deleted; run again to download it anew)" if delete_on_mismatch
                                     else " (a corrupt or different file: replace it with the official one)"))
    return actual


# ---- downloads ---------------------------------------------------------------------------
# Hand-written on purpose. pooch (1.9) downloads to a temporary file that it deletes on failure:
# an interrupted 80 MB download starts again from byte 0, where this one resumes with an HTTP
# Range request (tests/test_data_sources.py drops a transfer served on 127.0.0.1 and checks the
# resume). The checksums, the offline mirror and the safe archive reading are ours either way.
# tqdm was not taken for the progress line either: in a log file (not a terminal) it writes
# carriage-return redraws or, with disable=None, nothing; this writes one plain line every 5 s.

class DownloadFailed(DataError):
    """A download that could not reach its host or was refused by it (no network, a firewall,
    HTTP errors): :func:`resolve_source` adds how to run without it (the mirror)."""


class _Progress:
    def __init__(self, name: str, total: int | None, start: int, enabled: bool) -> None:
        self.name, self.total, self.done = name, total, start
        self.t0 = self.last = time.monotonic()
        self.start = start
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()

    def update(self, n: int, final: bool = False) -> None:
        self.done += n
        now = time.monotonic()
        if not self.enabled or (not final and now - self.last < (0.5 if self.tty else 5.0)):
            return
        self.last = now
        rate = (self.done - self.start) / max(now - self.t0, 1e-9) / 1e6
        of = f"/{self.total / 1e6:.1f}" if self.total else ""
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        line = f"downloading {self.name}: {self.done / 1e6:.1f}{of} MB{pct} {rate:.1f} MB/s"
        if self.tty:
            print("\r" + line + ("\n" if final else ""), end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, TimeoutError,
                   ConnectionError, OSError)  # HTTPError (a URLError) is handled in _fetch


def download(url: str, dest: Path, *, sha256: str | None = None, md5: str | None = None,
             size: int | None = None, retries: int = 3, timeout: float = 60.0,
             progress: bool = True) -> dict[str, str]:
    """Download ``url`` to ``dest`` (verified); return its digests. Skips a verified existing file.

    The data go to ``dest.part`` first. After a dropped connection the download resumes with a
    ``Range`` request (up to ``retries`` times); a server that ignores ``Range`` restarts it.
    A partial file left by an interrupted run is resumed the same way. The finished file's size
    and checksums are checked before it is renamed to ``dest``. Processes downloading the same
    ``dest`` (two prepare jobs, two suites sharing a cache) take turns on ``dest.lock``: the
    second finds the first's verified file.
    """
    if not (sha256 or md5):
        raise DataError(f"refusing to download {url} without an expected checksum (set sha256 or md5)")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        return _download(url, dest, sha256, md5, size, retries, timeout, progress)


def _download(url: str, dest: Path, sha256: str | None, md5: str | None, size: int | None,
              retries: int, timeout: float, progress: bool) -> dict[str, str]:
    expected = {"sha256": sha256, "md5": md5}
    if dest.is_file():
        try:
            digests = verify_file(dest, expected, what=str(dest))
            log.info("using verified %s", dest)
            return digests
        except DataError as exc:
            log.warning("%s; deleting it and downloading again", exc)
            dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    total = size
    for attempt in range(1, retries + 2):  # the first try, then up to `retries` more
        try:
            total = _fetch(url, part, total, size, timeout, progress)
        except _NETWORK_ERRORS as exc:
            if attempt > retries:
                got = _size(part)
                part.unlink(missing_ok=True)
                raise DownloadFailed(f"downloading {url} failed after {retries} retries ({exc}); got "
                                f"{got} bytes of {total if total else 'unknown'}; the partial "
                                "file was deleted") from None
            log.warning("%s: %s; retrying (%d/%d)", dest.name, exc, attempt, retries)
            time.sleep(min(2.0 ** attempt, 10.0) * 0.1)
            continue
        got = _size(part)
        if total is None or got >= total:
            break
        if attempt > retries:
            algo = "sha256" if sha256 else "md5"
            actual = file_digests(part, (algo,))[algo]
            part.unlink(missing_ok=True)
            raise DataError(f"truncated download of {dest.name} from {url}: expected {total} bytes, got {got} "
                            f"after {retries} retries; expected {algo.upper()} {sha256 or md5}, got {actual}; "
                            "the partial file was deleted")
        log.warning("%s: connection closed at %d of %d bytes; resuming (%d/%d)",
                    dest.name, got, total, attempt, retries)
    if total is not None and (got := _size(part)) > total:
        part.unlink(missing_ok=True)
        raise DataError(f"download of {dest.name} from {url} is larger than expected "
                        f"({got} > {total} bytes); the partial file was deleted")
    digests = verify_file(part, expected, delete_on_mismatch=True, what=f"{dest.name} (downloaded from {url})")
    os.replace(part, dest)
    return digests


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _fetch(url: str, part: Path, total: int | None, size: int | None, timeout: float,
           progress: bool) -> int | None:
    """One request: resume ``part`` (``Range``) or start it again where the server will not,
    stream the body to it; returns the total size as now known. HTTP 416 on a resume means
    the partial file already holds everything there is (the size and checksum checks then
    judge it)."""
    have = _size(part)
    name = part.name[: -len(".part")]
    req = urllib.request.Request(url, headers={"User-Agent": "hkt-bench"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status = getattr(resp, "status", 200)
            length = resp.headers.get("Content-Length")
            if have and status == 206:
                mode = "ab"
                crange = resp.headers.get("Content-Range", "")
                if total is None and "/" in crange and crange.rsplit("/", 1)[1].isdigit():
                    total = int(crange.rsplit("/", 1)[1])
                elif total is None and length is not None:
                    total = have + int(length)
            else:
                if have:
                    log.info("%s: server ignored the resume request; restarting", name)
                have, mode = 0, "wb"
                if length is not None:
                    n = int(length)
                    if size is not None and n != size:
                        log.warning("%s: server announces %d bytes, expected %d", name, n, size)
                    total = total or n
            bar = _Progress(name, total, have, progress)
            with open(part, mode) as f:
                while block := resp.read(_CHUNK):
                    f.write(block)
                    bar.update(len(block))
            bar.update(0, final=True)
    except urllib.error.HTTPError as exc:
        if exc.code != 416 or not have:
            raise DownloadFailed(f"downloading {url} failed: HTTP {exc.code} {exc.reason}") from None
    return total


def default_download_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hkt"


# ---- choosing the source -----------------------------------------------------------------

@dataclass
class Source:
    """A resolved raw source: ``path`` (file or directory) and what we know about it."""

    path: Path
    official: bool
    origin: str                          # "argument", "config", "mirror" or "download"
    digests: dict[str, str] = field(default_factory=dict)  # of the file (empty for a directory)

    def describe(self) -> dict[str, Any]:
        """Content-only description for the Parquet metadata (no local paths)."""
        d: dict[str, Any] = {"file": self.path.name, "official": self.official,
                             "layout": "directory" if self.path.is_dir() else "archive"}
        d.update(self.digests)
        return d


def _is_archive(p: Path) -> bool:
    return p.is_file() and p.name.lower().endswith(ARCHIVE_SUFFIXES)


def _mirror_checksums(mirror: Path) -> dict[str, str]:
    """``SHA256SUMS`` at the mirror root (``<sha256>  <relative path>`` per line), if present."""
    sums: dict[str, str] = {}
    f = mirror / "SHA256SUMS"
    if f.is_file():
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and len(parts[0]) == 64:
                sums[parts[1].lstrip("*").strip()] = parts[0].lower()
    return sums


def _check_local(path: Path, prep: dict[str, Any], origin: str, expected_sha: str | None = None) -> Source:
    """Classify a local file or directory as the official archive or an alternative."""
    official_name = prep.get("filename")
    official = {"sha256": prep.get("sha256"), "md5": prep.get("md5")}
    if not path.exists():
        raise DataError(f"source {path} does not exist")
    if path.is_dir():
        log.warning("using the directory %s, not the official %s: its content is recorded by a digest "
                    "of the files used", path, official_name)
        return Source(path, official=False, origin=origin)
    if not _is_archive(path):
        raise DataError(f"source {path} is neither a directory nor an archive ({', '.join(ARCHIVE_SUFFIXES)})")
    if path.name == official_name:  # claims to be the official file: it must verify
        digests = verify_file(path, official, what=f"{path} (the official {official_name})")
        return Source(path, official=True, origin=origin, digests=digests)
    digests = file_digests(path)
    if any(official[a] and digests[a] == official[a] for a in official):
        return Source(path, official=True, origin=origin, digests=digests)
    if expected_sha and digests["sha256"] != expected_sha:
        raise DataError(f"checksum mismatch for {path}: the mirror's SHA256SUMS expects SHA-256 {expected_sha}, "
                        f"got {digests['sha256']}")
    log.warning("using %s, which is not the official %s (SHA-256 %s is recorded in the data card)",
                path, official_name, digests["sha256"])
    return Source(path, official=False, origin=origin, digests=digests)


def mirror_source(mirror: Path, family: str, prep: dict[str, Any]) -> Source:
    """The source in ``mirror/<family>/``: the official file, or the single alternative there."""
    d = mirror / family
    if not mirror.is_dir():
        raise DataError(f"data mirror {mirror} (HKT_DATA_MIRROR or prepare.mirror) is not a directory")
    if not d.is_dir():
        raise DataError(f"data mirror {mirror} has no {family}/ folder: expected {d}/ holding "
                        f"{prep.get('filename')} or one alternative archive or directory")
    official = d / prep["filename"]
    if official.exists():
        return _check_local(official, prep, "mirror")
    cands = sorted(p for p in d.iterdir()
                   if not p.name.startswith(".") and p.name.lower() not in IGNORED_MIRROR_FILES
                   and (p.is_dir() or _is_archive(p)))
    if not cands:
        raise DataError(f"data mirror folder {d} holds neither the official {prep['filename']} nor an "
                        f"archive ({', '.join(ARCHIVE_SUFFIXES)}) or directory")
    if len(cands) > 1:
        raise DataError(f"data mirror folder {d} holds several candidates ({', '.join(p.name for p in cands)}); "
                        "keep exactly one archive or directory there")
    rel = f"{family}/{cands[0].name}"
    return _check_local(cands[0], prep, "mirror", expected_sha=_mirror_checksums(mirror).get(rel))


def resolve_source(family: str, prep: dict[str, Any], source: Path | None = None,
                   progress: bool = True) -> Source:
    """The raw source of a downloadable task (see the module docstring for the order)."""
    if source is not None:
        return _check_local(Path(source).expanduser(), prep, "argument")
    if prep.get("source"):
        return _check_local(Path(prep["source"]).expanduser(), prep, "config")
    if prep.get("mirror"):
        return mirror_source(Path(prep["mirror"]).expanduser(), family, prep)
    ddir = Path(prep["download_dir"]).expanduser() if prep.get("download_dir") else default_download_dir()
    dest = ddir / prep["filename"]
    try:
        digests = download(prep["url"], dest, sha256=prep.get("sha256"), md5=prep.get("md5"),
                           size=prep.get("size"), retries=prep.get("retries", 3),
                           timeout=prep.get("timeout_s", 60), progress=progress)
    except DownloadFailed as exc:
        raise DownloadFailed(f"{exc}. {offline_advice(family, prep['filename'], dest)}") from None
    return Source(dest, official=True, origin="download", digests=digests)


def offline_advice(family: str, filename: str, dest: Path) -> str:
    """What to do where the official host cannot be reached: the mirror, the file, the page."""
    return (f"Without internet: put {filename} (or one archive or directory of its layout) in "
            f"DIR/{family}/ and set HKT_DATA_MIRROR=DIR, or copy {filename} to {dest} "
            "(docs/data.md)")
