"""Atomic file writes and file digests (torch-free), shared by checkpoints, run records and
prepared data.

A file is written to a uniquely named temporary file in the target's directory, flushed and
fsync'ed, then ``os.replace``'d over the target (and the directory fsync'ed): a reader sees the
old file or the new one, never half of one, and a failed write leaves no temporary file.

A writer killed with SIGKILL cannot delete its temporary file, so the name carries the writer's
host and pid (``.NAME.HOST-PID.XXXX.tmp``), and every new write in a directory first deletes the
temporary files there of dead writers on this host. A live writer's file, or one written from
another host (a shared file system), is never touched.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["pid_alive", "atomic_path", "atomic_write_bytes", "atomic_write_text", "ensure_writable_dir",
           "remove_orphaned_temps", "file_digests", "sha256_file", "free_bytes"]


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"
_TEMP = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.[0-9a-f]{12}\.tmp$")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one owned by another user counts). No pid
    (0 or below, as a file that lost it reads) is no process: ``kill`` would signal a group."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_orphaned_temps(directory: str | os.PathLike) -> list[Path]:
    """Delete the temporary files in ``directory`` left by dead writers on this host; return them."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = _TEMP.match(name)
        if m and m["host"] == _HOST and int(m["pid"]) != os.getpid() and not pid_alive(int(m["pid"])):
            p = Path(directory) / name
            try:
                p.unlink()
                removed.append(p)
            except OSError:
                pass  # raced with another cleaner, or not ours to delete: leave it
    return removed


def _new_temp(path: Path) -> Path:
    """Create an empty ``.NAME.HOST-PID.XXXX.tmp`` beside ``path`` (default permissions), after
    removing the orphans of dead writers in that directory."""
    remove_orphaned_temps(path.parent)
    tmp = path.with_name(f".{path.name}.{_HOST}-{os.getpid()}.{secrets.token_hex(6)}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return tmp


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s content to; on success it replaces ``path``.

    For writers that want a file name (e.g. ``pyarrow.parquet.write_table``). On an exception the
    temporary file is deleted and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temp(path)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:  # a failed write() names no file: name the one being written
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; an ``OSError`` of a full disk carries the size
    it needed as ``needed`` (bytes), for its message (``hkt.cli.main.describe_os_error``)."""
    try:
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
    except OSError as exc:
        exc.needed = len(data)  # type: ignore[attr-defined]
        raise


def free_bytes(path: str | os.PathLike) -> int | None:
    """The bytes free for this user on the file system of ``path`` (or of its nearest existing
    parent); None where that cannot be read."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def ensure_writable_dir(directory: str | os.PathLike) -> Path:
    """Create ``directory`` if needed and prove it writable with a probe file (``os.access`` is
    no proof for root); raises ``OSError`` naming the path. Call it before long work whose result
    goes there."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    probe = _new_temp(directory / ".write-probe")
    probe.unlink()
    return directory


def file_digests(path: str | os.PathLike,
                 algorithms: tuple[str, ...] = ("sha256", "md5")) -> dict[str, str]:
    """Hex digests of a file in one pass, read in chunks."""
    hs = {a: hashlib.new(a) for a in algorithms}
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            for h in hs.values():
                h.update(block)
    return {a: h.hexdigest() for a, h in hs.items()}


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes (the data checksums of run records)."""
    return file_digests(path, ("sha256",))["sha256"]
