"""Full disks and read-only file systems end in one ``hkt: error:`` line (issue 11: 3).

Real file systems, not mocks: a tmpfs mounted read-only, and one too small for the output. Needs
root (as here and in CI); skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import write_prepared_data
from hkt.cli.main import main

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


def fill(point: Path, leave: int = 0) -> Path:
    """Take every free page of the file system at ``point`` (a file of zeros, written in
    ever smaller pieces until not one byte more fits), then give ``leave`` bytes back; return
    the file, to delete for space."""
    filler = point / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for piece in (1 << 20, 1 << 16, 1 << 12, 1):
            try:
                while True:
                    fh.write(b"\0" * piece)
            except OSError:
                pass
    if leave:
        os.truncate(filler, filler.stat().st_size - leave)
    return filler


def test_every_writer_on_a_full_disk_leaves_the_previous_file_whole(mount, tmp_path):
    """Checkpoint, history, record, figure bytes and a table: each written once, then again on
    a full disk; the first version stays, byte for byte, with no temporary file beside it."""
    import polars as pl
    import torch

    from hkt.fileio import atomic_write_bytes
    from hkt.run_record import make_record, write_history, write_record
    from hkt.report.writers import write_table
    from hkt.train.checkpoint import save_checkpoint

    disk = mount("disk", size_kb=256)
    data = write_prepared_data(tmp_path / "data", "listops")
    record = make_record(task="listops", model="mha", variant="main", seed=0, profile="smoke",
                         config={}, n_params=1, steps=1, best_step=1, val_accuracy=0.5,
                         test_accuracy=0.5, data_dir=data, git=(None, None))
    table = pl.DataFrame({"model": ["mha"], "acc": [0.5]})
    writers = {
        "last.pt": lambda p, n: save_checkpoint({"w": torch.zeros(n)}, p),
        "history.csv": lambda p, n: write_history([{"step": s, "train_loss": 1.0} for s in range(n)], p),
        "record.json": lambda p, n: write_record({**record, "config": {"pad": "x" * n}}, p),
        "curve.png": lambda p, n: atomic_write_bytes(p, b"\x89PNG" + b"\0" * n),
        "main": lambda p, n: write_table(pl.concat([table] * n), (table.columns, [["mha", "0.50"]] * n),
                                         p, "caption"),
    }
    for name, write in writers.items():
        write(disk / name, 4)
    before = {p.name: p.read_bytes() for p in disk.iterdir()}
    filler = fill(disk)
    for name, write in writers.items():
        with pytest.raises(OSError) as caught:
            write(disk / name, 50_000)
        assert caught.value.errno == 28, name  # ENOSPC
    assert {p.name: p.read_bytes() for p in disk.iterdir() if p != filler} == before
    filler.unlink()


def test_a_disk_filled_mid_run_stops_training_with_one_line_and_the_same_command_resumes(
        mount, tmp_path, capsys, monkeypatch):
    """Issue 51, 2: the run's disk fills after its second checkpoint. One `hkt: error:` line
    names the file and the space; the last checkpoint loads; once space is freed, the same
    command resumes from it and ends with the record of an uninterrupted run."""
    from hkt.run_record import RECORD_NAME
    from hkt.train.checkpoint import load_checkpoint
    from hkt.train.checkpoint import Checkpoint

    data = write_prepared_data(tmp_path / "data", "listops")
    disk = mount("disk", size_kb=2048)
    base = ["train", "--data", str(data), "task=listops", "model=mha", "profile=smoke",
            "tracking.enabled=false", "--no-progress"]
    save, saves, filler = Checkpoint.save_last, [], []

    def fill_after_the_second(self, state, *a, **kw):
        save(self, state, *a, **kw)
        saves.append(state.step)
        if len(saves) == 2:
            filler.append(fill(disk))

    monkeypatch.setattr(Checkpoint, "save_last", fill_after_the_second)
    run = disk / "run"
    code, errors = _run(capsys, *base, "--out", str(run))
    assert code == 2 and len(errors) == 1, errors
    last = run / "checkpoints" / "last.pt"
    assert errors[0].startswith(f"hkt: error: cannot write or read {last}: No space left on device (the write needed ")
    assert " free there); free some space or choose another location, then run the same command again" in errors[0]
    assert load_checkpoint(last)["step"] == saves[1] == 6
    assert not [p for p in run.rglob("*.tmp")]

    filler[0].unlink()
    monkeypatch.setattr(Checkpoint, "save_last", save)
    assert main([*base, "--out", str(run)]) == 0
    assert f"resuming from {last} at step 6/12" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "whole")]) == 0
    resumed, whole = (json.loads((d / RECORD_NAME).read_text()) for d in (run, tmp_path / "whole"))
    for key in ("steps", "best_step", "val_accuracy", "test_accuracy", "test_loss"):
        assert resumed[key] == whole[key], key


# --- issue 61, item 8: a full disk at the workflow's start and at the MLflow store -------------
FULL_LINE = (r"hkt: error: cannot write or read {path}: No space left on device \((the write needed "
             r"[\d.]+ [KMG]?i?B, )?[\d.]+ [KMG]?i?B free there\); free some space or choose another "
             r"location, then run the same command again: it goes on from the files written whole")


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("hkt: error:")]


def test_train_on_a_full_mlflow_store_is_the_full_disk_line(mount, tmp_path, capsys, monkeypatch):
    """The store's disk full when the run is created (80 lines of SQLAlchemy before) and when the
    store itself is created: the line of every full disk, naming the store's file; no MLflow
    run is left behind, and with space the same command logs its run."""
    from hkt.mlflow_store import open_client

    data = write_prepared_data(tmp_path / "data", "listops")
    base = ["train", "--data", str(data), "task=listops", "model=mha", "profile=smoke",
            "--no-progress", "--out", str(tmp_path / "run")]
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name, existing in (("new", False), ("existing", True)):
        disk = mount(name, size_kb=4096)
        store = disk / "results" / "mlflow.db"
        if existing:
            open_client(f"sqlite:///{store}")
        filler = fill(disk)
        monkeypatch.setenv("HKT_RESULTS_DIR", str(store.parent))
        capsys.readouterr()
        code = main(base)
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and "SQLAlchemy" not in err, err[-3000:]
        assert len(_errors(err)) == 1, err[-3000:]
        assert re.fullmatch(FULL_LINE.format(path=re.escape(str(store))), _errors(err)[0]), err
        assert not [p for p in store.parent.rglob("*.tmp")]
        if existing:  # nothing was logged: the store holds no run
            filler.unlink()
            client = open_client(f"sqlite:///{store}")
            assert not client.search_runs([e.experiment_id for e in client.search_experiments()])
            assert main(base) == 0  # the same command, with space: trains and logs its run
            runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
            assert [r.info.status for r in runs] == ["FINISHED"]


def test_the_workflow_starting_on_a_full_disk_stops_with_one_line(mount, tmp_path):
    """Issue 61, 8: the disk of results_dir fills at the workflow's start: the store (on an
    empty disk too small for it), the lock, the plan (plan/calibration.json, plan/suite.json):
    each is the one line of a full disk, naming its file, not a traceback; every file there
    is whole, and no temporary file is left."""
    from test_workflow import snakemake

    from hkt.mlflow_store import open_client

    small = mount("small", size_kb=512)  # an MLflow store needs about 1 MiB
    r = snakemake("--cores", "1", "--config", "suite=smoke", f"results_dir={small / 'results'}",
                  cwd=tmp_path / "work", timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out and len(_errors(out)) == 1, out[-3000:]
    assert re.fullmatch(FULL_LINE.format(path=re.escape(str(small / "results" / "mlflow.db"))),
                        _errors(out)[0]), out[-3000:]

    disk = mount("disk", size_kb=4096)
    results = disk / "results"
    open_client(f"sqlite:///{results / 'mlflow.db'}")  # a second run's store: there already
    fill(disk, leave=24 << 10)  # the lock and the calibration fit, the plan does not
    r = snakemake("--cores", "1", "--config", "suite=smoke", f"results_dir={results}",
                  cwd=tmp_path / "work", timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out and len(_errors(out)) == 1, out[-3000:]
    assert re.fullmatch(FULL_LINE.format(path=re.escape(str(results / "plan")) + r"/\w+\.json"),
                        _errors(out)[0]), out[-3000:]
    assert not (results / "runs").exists() and not (results / "data").exists()
    left = [p for p in results.rglob("*") if p.is_file()]
    assert not [p for p in left if p.name.endswith(".tmp")], left
    for p in left:
        if p.suffix == ".json":
            json.loads(p.read_text())  # whole
