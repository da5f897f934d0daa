"""Atomic file writes and file digests (torch-free), shared by checkpoints, run records and
prepared data.

A file is written to a uniquely named temporary file in the target's directory, flushed and
fsync'ed, then ``os.replace``'d over the target (and the directory fsync'ed): a reader sees the
old file or the new one, never half of one, and a failed write leaves no temporary file.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "sha256_file"]


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


def _new_temp(path: Path) -> Path:
    """Create an empty, uniquely named ``.NAME.XXXX.tmp`` beside ``path`` (default permissions)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
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
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks (the data checksums of run records)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
