"""Writing a set of files so that a reader, a second writer or a SIGKILL never sees half of it:
one writer at a time (an OS lock, :mod:`hkt.dir_lock`), the whole result built in a staging
folder first, then put in place by renames, and what a killed writer left recovered by the next
one, without ``git``.

Two forms:

* :func:`staged_dir`, a whole directory (a publication, ``docs/results/NAME``): built as
  ``.NAME.staging/NAME`` beside it (a copy of it to change, or a fresh one), then swapped in:
  ``NAME`` is renamed to ``.NAME.old``, the staged one to ``NAME``, and the old one removed.
  The lock is ``.NAME.lock`` beside it, removed when let go. A writer killed before the swap
  leaves ``NAME`` as it was; one killed between the two renames leaves ``.NAME.old``, which the
  next writer (or reader through :func:`recover`) renames back first.
* :func:`staged_files`, files among others in a directory (``hkt aggregate``'s tables, figures
  and summary in a results directory): built in ``OUT/.aggregate.partial``, which is renamed to
  ``OUT/.aggregate.ready`` once complete (the one rename that decides), then each file is moved
  into place. A writer killed before that rename leaves ``OUT``'s files as they were; one
  killed after it has its moves finished by the next writer, before anything else.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hkt.dir_lock import Busy, describe, holding
from hkt.errors import HKTError

__all__ = ["InUse", "STAGE", "move_into", "recover", "staged_dir", "staged_files"]

#: Where ``hkt aggregate`` builds its outputs inside ``--out`` (one file system: moves are renames).
STAGE = ".aggregate.partial"
#: The staging folder once complete: its files are what ``--out`` is to hold.
READY = ".aggregate.ready"
#: The lock of a directory's staged files, inside it.
FILES_LOCK = ".aggregate.lock"


class InUse(HKTError):
    """Another process is writing the same destination."""


def _beside(dest: Path, what: str) -> Path:
    return dest.parent / f".{dest.name}.{what}"


@contextmanager
def _locked(lock: Path, dest: Path, who: str) -> Iterator[None]:
    try:
        with holding(lock, {"writes": who}):
            yield
    except Busy as exc:
        raise InUse(f"{dest} is being written by another process ({exc.holder.get('writes', 'a writer')}: "
                    f"{describe(exc.holder)}); nothing was written: wait for it to finish, then "
                    "run this again") from None


def recover(dest: Path) -> None:
    """Undo what a writer of ``dest`` killed mid-way left (:func:`staged_dir`): the old
    directory put back where the swap was cut between its renames, the staging folder removed.
    Call it holding the lock."""
    old, stage = _beside(dest, "old"), _beside(dest, "staging")
    if old.exists():
        if dest.exists():
            shutil.rmtree(old)  # the swap finished; only removing the old one was cut short
        else:
            os.rename(old, dest)
    shutil.rmtree(stage, ignore_errors=True)


@contextmanager
def staged_dir(dest: Path, *, copy: bool = True, who: str = "publish_results.py") -> Iterator[Path]:
    """Lock ``dest``, recover what a killed writer left, and yield a staging directory named as
    ``dest`` (a copy of it where ``copy`` and it exists, else empty) for the ``with`` block to
    change; swap it in when the block ends, discard it where the block raises. Raises
    :class:`InUse` naming the other writer (``who`` names this one to others)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _locked(_beside(dest, "lock"), dest, who):
        recover(dest)
        stage = _beside(dest, "staging") / dest.name
        if copy and dest.is_dir():
            shutil.copytree(dest, stage, symlinks=True)
        else:
            stage.mkdir(parents=True)
        try:
            yield stage
        except BaseException:
            shutil.rmtree(stage.parent, ignore_errors=True)
            raise
        old = _beside(dest, "old")
        if dest.exists():
            os.rename(dest, old)
        os.rename(stage, dest)
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(stage.parent, ignore_errors=True)


@contextmanager
def staged_files(out: Path, who: str = "hkt aggregate") -> Iterator[Path]:
    """Lock ``out`` for its staged files, finish the moves of a writer killed after its files
    were complete, and yield a fresh staging folder inside ``out`` (for :func:`move_into`),
    removed on the way out whatever happens. Raises :class:`InUse` naming the other writer."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out / FILES_LOCK, out, who):
        _finish_moves(out)
        stage = out / STAGE
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir()
        try:
            yield stage
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def move_into(stage: Path, out: Path, written: list[Path]) -> list[Path]:
    """Put the complete set of files ``written`` under ``stage`` in place under ``out`` (each
    replacing an earlier writer's): ``stage`` becomes ``out``'s ready set in one rename, then
    its files are moved. Returns their new paths."""
    keep = {Path(f).relative_to(stage) for f in written}
    for f in [p for p in stage.rglob("*") if p.is_file()]:
        if f.relative_to(stage) not in keep:  # not part of the result (none is expected)
            f.unlink()
    os.rename(stage, out / READY)
    _finish_moves(out)
    return [out / Path(f).relative_to(stage) for f in written]


def _finish_moves(out: Path) -> None:
    """Move every file of ``out``'s ready set (:data:`READY`) into place, then remove it."""
    ready = out / READY
    if not ready.is_dir():
        return
    for f in sorted(p for p in ready.rglob("*") if p.is_file()):
        target = out / f.relative_to(ready)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(f, target)
    shutil.rmtree(ready)
