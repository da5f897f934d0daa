"""A prepared directory is all-or-nothing: an interrupted re-prepare is refused (issue 11: 5)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from hkt.cli.main import main

SMALL = ["prepare.splits.train=300", "prepare.splits.val=20", "prepare.splits.test=20", "--quiet"]


def _prepare(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hkt.cli.main", "prepare", "listops", "--out", str(out), *SMALL, *extra]


def _train(data: Path, out: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["train", "--data", str(data), "--out", str(out), "task=listops", "model=mha",
                 "profile=smoke", "tracking.enabled=false", "--no-progress"])
    return code, capsys.readouterr().err


def test_killed_re_prepare_is_refused_until_prepared_again(tmp_path, capsys):
    data = tmp_path / "K"
    subprocess.run(_prepare(data, "prepare.seed=1"), check=True)
    assert (data / "manifest.json").is_file()
    # Re-prepare with another seed and kill -9 it as soon as it starts replacing files.
    proc = subprocess.Popen(_prepare(data))
    deadline = time.monotonic() + 120
    while (data / "manifest.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if (data / "manifest.json").exists():  # the writer finished before the kill landed: retry once
        raise AssertionError("the re-prepare finished before it could be killed; enlarge SMALL")
    code, err = _train(data, tmp_path / "run", capsys)
    assert code == 2
    msg = err.strip().splitlines()[-1]
    assert msg.startswith(f"hkt: error: {data} has no manifest.json") and "hkt prepare" in msg
    assert not (tmp_path / "run" / "record.json").exists()
    subprocess.run(_prepare(data), check=True)  # what the message says to do
    code, err = _train(data, tmp_path / "run", capsys)
    assert code == 0, err


def test_a_split_from_another_preparation_is_refused(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    subprocess.run(_prepare(a, "prepare.seed=1"), check=True)
    subprocess.run(_prepare(b), check=True)
    shutil.copy(a / "val.parquet", b / "val.parquet")  # mixed splits, manifest still there
    code, err = _train(b, tmp_path / "run", capsys)
    assert code == 2
    msg = err.strip().splitlines()[-1]
    assert f"{b / 'val.parquet'} does not belong with the other splits" in msg and "hkt prepare" in msg
