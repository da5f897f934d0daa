"""Reading a raw source safely: the regular files of a directory, a tar archive (any
compression) or a zip archive, streaming, without extracting (:func:`iter_files`).

Every tar member is checked with the standard library's ``tarfile.data_filter`` (``..``, links
leaving the target, device files are refused), plus a refusal of absolute names (which
``data_filter`` would silently make relative). A directory's symbolic links that point outside
it are refused the same way. A compressed archive is read to its end, so that a corrupt
checksum trailer is an error.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from hkt.errors import DataError

__all__ = ["iter_files", "strict_filter"]

_CHUNK = 1 << 20


_FAKE_ROOT = "/nonexistent-hkt-extract-root"


def strict_filter(member: tarfile.TarInfo, dest_path: str) -> tarfile.TarInfo:
    """``tarfile.data_filter``, plus refusing absolute names (which ``data_filter`` would only
    make relative)."""
    if member.name.startswith(("/", "\\")) or (len(member.name) > 1 and member.name[1] == ":"):
        raise tarfile.AbsolutePathError(member)
    return tarfile.data_filter(member, dest_path)


def _check_member(archive: Path, member: tarfile.TarInfo) -> None:
    """Refuse what :func:`strict_filter` refuses. Plain relative files and directories without
    ``..`` are accepted without the (slow, filesystem-touching) filter call; everything else, links
    included, goes through the filter."""
    name = member.name
    if ((member.isfile() or member.isdir()) and not name.startswith(("/", "\\"))
            and ".." not in name.replace("\\", "/").split("/")):
        return
    try:
        strict_filter(member, _FAKE_ROOT)
    except tarfile.FilterError as exc:
        raise DataError(f"unsafe member in archive {archive}: {member.name!r} ({exc}); refusing to read it") from None


def _check_zip_name(archive: Path, info: zipfile.ZipInfo) -> None:
    name = info.filename
    p = PurePosixPath(name.replace("\\", "/"))
    mode = info.external_attr >> 16
    if p.is_absolute() or ".." in p.parts or (len(name) > 1 and name[1] == ":") or stat.S_ISLNK(mode):
        raise DataError(f"unsafe member in archive {archive}: {name!r} (absolute path, '..' or link); "
                        "refusing to read it")


def iter_files(path: Path, select: Callable[[PurePosixPath], bool],
               tree_hash: Any = None) -> Iterator[tuple[PurePosixPath, bytes]]:
    """Yield ``(relative path, content)`` of the regular files under ``path`` that ``select`` keeps.

    ``path`` is a directory, a tar archive (gz/bz2/xz/none) or a zip archive. Order: sorted for
    directories; archive order for archives. Unsafe archive members raise DataError. For a
    directory, ``tree_hash`` (a hashlib object) is updated with each yielded path and content's
    SHA-256, giving a digest of the files used.
    """
    path = Path(path)
    if path.is_dir():
        for rel, data in _iter_dir(path, select):
            if tree_hash is not None:
                tree_hash.update(str(rel).encode() + b"\0" + hashlib.sha256(data).digest())
            yield rel, data
        return
    yield from _iter_archive(path, select)


def _check_link(path: Path, root: Path, full: Path) -> None:
    """Refuse a symbolic link under ``path`` that points outside it (as archives refuse links)."""
    target = full.resolve()
    if target != root and root not in target.parents:
        rel = full.relative_to(path).as_posix()
        raise DataError(f"unsafe member in source directory {path}: {rel!r} (a link to {target}, outside "
                        "the directory); refusing to read it")


def _iter_dir(path: Path, select: Callable[[PurePosixPath], bool]) -> Iterator[tuple[PurePosixPath, bytes]]:
    root = path.resolve()
    for parent, dirs, files in os.walk(path):
        dirs.sort()
        for name in dirs:  # os.walk does not descend into linked directories; still refuse escapes
            if (Path(parent) / name).is_symlink():
                _check_link(path, root, Path(parent) / name)
        for name in sorted(files):
            full = Path(parent) / name
            rel = PurePosixPath(full.relative_to(path).as_posix())
            if full.is_symlink():
                _check_link(path, root, full)
            if select(rel):
                try:
                    yield rel, full.read_bytes()
                except OSError as exc:
                    raise DataError(f"cannot read {full}: {exc}") from None


def _iter_archive(path: Path, select: Callable[[PurePosixPath], bool]) -> Iterator[tuple[PurePosixPath, bytes]]:
    if not path.is_file():
        raise DataError(f"source {path} does not exist")
    if zipfile.is_zipfile(path):
        try:  # is_zipfile reads only the end record: a damaged central directory fails here
            zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise DataError(f"archive {path} is corrupt or truncated: {exc}") from None
        with zf:
            for info in zf.infolist():
                _check_zip_name(path, info)
                if info.is_dir():
                    continue
                rel = PurePosixPath(info.filename)
                if select(rel):
                    try:
                        data = zf.read(info)  # checks the member's CRC
                    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                        raise DataError(f"archive {path} is corrupt or truncated: {exc}") from None
                    yield rel, data
        return
    try:
        tf = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise DataError(f"cannot open archive {path}: {exc} (expected a tar or zip archive)") from None
    with tf:
        try:
            for member in tf:
                _check_member(path, member)
                if not (member.isfile() or member.islnk()):
                    continue
                rel = PurePosixPath(member.name)
                if select(rel):
                    fobj = tf.extractfile(member)
                    if fobj is None:
                        continue
                    yield rel, fobj.read()
            # Read the compressed stream to its end: the gzip/bz2/xz trailer (CRC, length) is only
            # checked there, and tarfile stops at the end-of-archive blocks before it.
            while tf.fileobj.read(_CHUNK):
                pass
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise DataError(f"archive {path} is corrupt or truncated: {exc}") from None

