"""Temporary files of writers killed with SIGKILL are removed by the next run (issue 11: 4)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import write_prepared_data
from hkt.cli.main import main

# A writer that opens an atomic write of TARGET and hangs inside it (until killed).
_WRITER = """
import sys, time
from hkt.fileio import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    tmp.write_bytes(b"x" * 1000)
    print("writing", flush=True)
    time.sleep(600)
"""


def _start_writer(target: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    return proc


def _temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_killed_writers_temp_is_removed_by_the_next_training_run(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    args = ["train", "--data", str(data), "--out", str(tmp_path / "run"), "task=listops", "model=mha",
            "profile=smoke", "tracking.enabled=false", "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    ckpt = tmp_path / "run" / "checkpoints"
    dead = _start_writer(ckpt / "last.pt")  # as a run killed while writing its checkpoint
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    orphan = [n for n in _temps(ckpt) if f"-{dead.pid}." in n]
    assert orphan and orphan[0].startswith(".last.pt.")
    elsewhere = tmp_path / "other"  # a live writer in another directory
    live = _start_writer(elsewhere / "history.csv")
    try:
        assert main(args) == 0, capsys.readouterr().err  # the finished run only reports
        assert not [n for n in _temps(ckpt) if f"-{dead.pid}." in n]       # the orphan is gone
        assert [n for n in _temps(elsewhere) if f"-{live.pid}." in n]      # the live file stays
    finally:
        live.kill()
        live.wait()


def test_a_live_writers_temp_is_never_removed(tmp_path):
    from hkt.fileio import atomic_write_text

    live = _start_writer(tmp_path / "a")
    try:
        atomic_write_text(tmp_path / "b", "new")  # sweeps the directory first
        assert [n for n in _temps(tmp_path) if f"-{live.pid}." in n]
    finally:
        live.kill()
        live.wait()
    atomic_write_text(tmp_path / "b", "newer")  # now the writer is dead: its file goes
    assert _temps(tmp_path) == []


def test_other_hosts_and_unrelated_files_are_left_alone(tmp_path):
    from hkt.fileio import atomic_write_text

    foreign = tmp_path / ".x.otherhost-1.0123456789ab.tmp"  # another machine on a shared FS
    unrelated = tmp_path / "notes.tmp"
    for p in (foreign, unrelated):
        p.write_text("keep")
    atomic_write_text(tmp_path / "x", "new")
    assert foreign.exists() and unrelated.exists() and (tmp_path / "x").read_text() == "new"
    assert _temps(tmp_path) == sorted([foreign.name, unrelated.name])
    assert time.time() - os.stat(tmp_path / "x").st_mtime < 60
