"""Full disks and read-only file systems end in one ``hkt: error:`` line (issue 11: 3).

Real file systems, not mocks: a tmpfs mounted read-only, and one too small for the output. Needs
root (as here and in CI); skipped elsewhere.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import write_prepared_data
from hkt.cli import main

LISTOPS = ["prepare.splits.train=300", "prepare.splits.val=20", "prepare.splits.test=20"]


@pytest.fixture
def mount(tmp_path):
    """mount(name, size_kb, read_only) -> a fresh tmpfs; unmounted at teardown."""
    points: list[Path] = []

    def make(name: str, size_kb: int = 1024, read_only: bool = False) -> Path:
        point = tmp_path / name
        point.mkdir()
        opts = f"size={size_kb}k" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
        points.append(point)
        return point

    yield make
    for p in points:
        subprocess.run(["umount", "-l", str(p)], check=False)


def _run(capsys, *argv: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.startswith("hkt: error:")]


def test_prepare_refuses_a_read_only_out_before_generating(mount, capsys):
    ro = mount("ro", read_only=True)
    code, errors = _run(capsys, "prepare", "listops", "--out", str(ro / "data"), *LISTOPS)
    assert code == 2 and len(errors) == 1
    assert str(ro / "data") in errors[0] and "Read-only file system" in errors[0]
    assert "writable file system" in errors[0]


def test_prepare_on_a_full_disk_names_the_file_and_leaves_no_temp(mount, capsys):
    full = mount("full", size_kb=24)
    code, errors = _run(capsys, "prepare", "listops", "--out", str(full / "data"), *LISTOPS, "--quiet")
    assert code == 2 and len(errors) == 1
    assert str(full / "data") in errors[0] and "No space left on device" in errors[0]
    assert "free some space" in errors[0]
    assert not [p for p in (full / "data").iterdir() if p.name.endswith(".tmp")]


def test_train_on_a_full_disk_and_a_read_only_store(mount, tmp_path, capsys, monkeypatch):
    data = write_prepared_data(tmp_path / "data", "listops")
    base = ["train", "--data", str(data), "task=listops", "model=mha", "profile=smoke", "--no-progress"]
    full = mount("full", size_kb=48)
    code, errors = _run(capsys, *base, "--out", str(full / "run"), "tracking.enabled=false")
    assert code == 2 and len(errors) == 1
    assert str(full / "run") in errors[0] and "No space left on device" in errors[0]

    ro = mount("ro", read_only=True)
    monkeypatch.setenv("HKT_RESULTS_DIR", str(ro / "results"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code, errors = _run(capsys, *base, "--out", str(tmp_path / "run"))
    assert code == 2 and len(errors) == 1
    assert "MLflow store" in errors[0] and str(ro / "results") in errors[0]
    assert "Read-only file system" in errors[0] and "tracking.enabled=false" in errors[0]


def test_analyze_into_a_read_only_directory(mount, tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    assert main(["train", "--data", str(data), "--out", str(run), "task=listops", "model=hkt",
                 "profile=smoke", "tracking.enabled=false", "--no-progress"]) == 0
    ro = mount("ro", read_only=True)
    code, errors = _run(capsys, "analyze", str(run), "--out", str(ro / "analysis"), "examples=8")
    assert code == 2 and len(errors) == 1
    assert str(ro / "analysis") in errors[0] and "Read-only file system" in errors[0]
