"""SIGTERM and SIGINT sent to real `hkt` processes (issue 23, faults 1 and 2): a training run
writes a checkpoint of the step it is at, ends its MLflow run as KILLED, says in one line where
it stopped and exits 143 or 130; the same command resumes it to the result of an uninterrupted
run. `hkt prepare` stops with one line and leaves no half-written file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from conftest import write_prepared_data

TRAIN = ["task=listops", "model=mha", "profile=smoke", "train.max_steps=200",
         "train.checkpoint_every=50", "train.eval_every=200", "train.log_every=20",
         "--no-progress"]
TIMING = {"samples_per_s"}  # history columns that are measurements of time, not of the model


def hkt_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hkt.cli.main", *args]


def env_for(results: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["HKT_RESULTS_DIR"] = str(results)
    return env


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def history(run: Path) -> list[dict[str, str]]:
    import csv

    with open(run / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(fh)]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_prepared_data(tmp_path_factory.mktemp("sig") / "data", "listops", n_train=256)


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory) -> Path:
    """The same run, uninterrupted."""
    tmp = tmp_path_factory.mktemp("ref")
    run = tmp / "run"
    r = subprocess.run(hkt_cmd("train", "--data", str(data), "--out", str(run), *TRAIN,
                               "tracking.enabled=false"), capture_output=True, text=True,
                       env=env_for(tmp / "results"), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return run


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_training_checkpoints_the_step_and_the_same_command_resumes(
        sig, code, data, reference, tmp_path):
    results, run = tmp_path / "results", tmp_path / "run"
    cmd = hkt_cmd("train", "--data", str(data), "--out", str(run), *TRAIN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(results))
    wait_for(run / "checkpoints" / "last.pt", proc)  # the checkpoint of step 50
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    last = err.strip().splitlines()[-1]
    m = re.fullmatch(rf"hkt: stopped by {sig.name} at step (\d+)/200: checkpoint written at step "
                     r"(\d+) \(.*last\.pt\); the same command resumes it", last)
    assert m and m[1] == m[2], last
    step = int(m[1])
    assert 50 <= step < 200
    ck = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ck["step"] == step  # the step it said, not the last periodic checkpoint
    assert not (run / "record.json").exists()
    run_id = json.loads((run / "mlflow_run.json").read_text())["run_id"]
    client = MlflowClient(f"sqlite:///{results}/mlflow.db")
    info = client.get_run(run_id).info
    assert info.status == "KILLED" and info.end_time is not None

    resumed = subprocess.run(cmd, capture_output=True, text=True, env=env_for(results), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {run / 'checkpoints' / 'last.pt'} at step {step}/200" in resumed.stderr
    ours = json.loads((run / "record.json").read_text())
    ref = json.loads((reference / "record.json").read_text())
    assert (ours["val_accuracy"], ours["test_accuracy"], ours["best_step"]) == \
        (ref["val_accuracy"], ref["test_accuracy"], ref["best_step"])
    assert history(run) == history(reference)  # bit for bit, every logged step
    assert (run / "predictions.parquet").read_bytes() == \
        (reference / "predictions.parquet").read_bytes()  # of the best checkpoint (issue 58)
    assert client.get_run(run_id).info.status == "FINISHED"


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_prepare_leaves_nothing_half_written(sig, code, tmp_path):
    out = tmp_path / "data"
    proc = subprocess.Popen(hkt_cmd("prepare", "listops", "--out", str(out),
                                    "prepare.splits.train=400000"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while "trees" not in (line := proc.stderr.readline()):  # generating: well inside the work
        assert line or proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines()[-1] == (
        f"hkt: stopped by {sig.name} during `hkt prepare`: nothing half-written is left (every "
        "file is written whole or not at all); run the same command again to redo it")
    assert not out.exists() or not list(out.iterdir()), sorted(p.name for p in out.iterdir())


def test_a_signal_while_prepare_writes_a_split_leaves_whole_files_and_no_usable_mix(tmp_path, monkeypatch,
                                                                                   capsys):
    """SIGTERM half-way through writing the second split of a re-prepare: the split being written
    is not left half-written, the files already there are whole, the directory is refused (its
    manifest is gone) with a message saying to rerun, and the rerun makes it whole and usable."""
    import pyarrow.parquet as pq

    from hkt.cli import main as cli
    from hkt.data import parquet
    from hkt.errors import DataError
    from hkt.train.data import RunData

    out = tmp_path / "data"
    args = ["prepare", "listops", "--out", str(out), "prepare.splits.train=300",
            "prepare.splits.val=60", "prepare.splits.test=60"]
    assert cli.main(args) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real, calls = pq.write_table, []

    def write_then_signal(table, where, **kw):
        calls.append(where)
        if len(calls) == 2:  # the second split: half its bytes are on disk when the signal comes
            Path(where).write_bytes(b"PAR1" + os.urandom(4096))
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises Stopped here
            raise AssertionError("SIGTERM did not stop `hkt prepare`")
        real(table, where, **kw)

    monkeypatch.setattr(parquet.pq, "write_table", write_then_signal)
    assert cli.main([*args[:-3], "prepare.splits.train=200"]) == 143
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "hkt: stopped by SIGTERM during `hkt prepare`: nothing half-written is left")
    left = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(left) == ["README.md", "test.parquet", "train.parquet", "val.parquet"]  # no temp file
    assert left["train.parquet"] != before["train.parquet"]  # written: the new train split
    assert left["val.parquet"] == before["val.parquet"]  # interrupted: the old file, whole
    assert left["test.parquet"] == before["test.parquet"]  # not reached
    for name in ("test.parquet", "train.parquet", "val.parquet"):
        pq.read_table(out / name)  # every file there is a whole Parquet file
    with pytest.raises(DataError, match="has no manifest.json: `hkt prepare` did not finish.*run `hkt prepare"):
        RunData(out)  # old and new splits do not mix into a dataset

    monkeypatch.setattr(parquet.pq, "write_table", real)
    assert cli.main([*args[:-3], "prepare.splits.train=200"]) == 0
    assert len(RunData(out).dataset("train")) == 200


def test_a_signal_while_the_store_is_created_leaves_no_half_made_store(tmp_path, monkeypatch):
    """Ctrl-C while MLflow migrates a fresh SQLite store: the store is made in a temporary file
    and renamed when complete, so nothing (or a whole store) is left, never a half-migrated one."""
    from hkt import mlflow_store as store, signals

    db = tmp_path / "mlflow.db"
    real = store._reached_client
    calls = []

    def interrupted(uri):
        calls.append(uri)
        real(uri)  # the migrations ran on the temporary file
        raise signals.Stopped(signal.SIGINT)

    monkeypatch.setattr(store, "_reached_client", interrupted)
    with pytest.raises(signals.Stopped):
        store.open_client(f"sqlite:///{db}")
    assert calls and calls[0] != f"sqlite:///{db}"  # it was not the store itself
    assert not db.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["mlflow.db.lock"]  # no temporary file left
    monkeypatch.setattr(store, "_reached_client", real)
    client = store.open_client(f"sqlite:///{db}")  # the next start makes a whole one
    assert client.search_experiments() == []  # MLflow's empty Default is deleted


# A stop while validating or testing (issue 38, part 4): the steps trained so far are kept.
EVAL_RUN = ["task=listops", "model=mha", "profile=smoke", "train.max_steps=30",
            "train.eval_every=10", "train.checkpoint_every=20", "train.log_every=5",
            "tracking.enabled=false", "--no-progress"]


def signal_inside_evaluation(monkeypatch, sig: signal.Signals, nth: int) -> list[int]:
    """Send ``sig`` to this process after the first batch of the ``nth`` evaluation (the
    validations at steps 10, 20 and 30 are the 1st to 3rd; the test is the 4th). Returns the
    evaluations seen so far: the seam is the loop's own ``evaluate``."""
    from hkt.train import loop

    real, calls = loop.evaluate, []

    def evaluate(*args, on_batch=None, **kw):
        calls.append(len(calls) + 1)

        def batch_done(batches: int, examples: int) -> None:
            if len(calls) == nth and batches == 1:
                os.kill(os.getpid(), sig)
            on_batch(batches, examples)

        return real(*args, on_batch=batch_done, **kw)

    monkeypatch.setattr(loop, "evaluate", evaluate)
    return calls


@pytest.fixture(scope="module")
def eval_reference(data, tmp_path_factory) -> Path:
    from hkt.cli.main import main

    run = tmp_path_factory.mktemp("eval-ref") / "run"
    assert main(["train", "--data", str(data), "--out", str(run), *EVAL_RUN]) == 0
    return run


@pytest.mark.parametrize("sig, nth, step, during, kept", [
    # the first validation, before any periodic checkpoint: it used to say "no checkpoint yet"
    (signal.SIGINT, 1, 10, "validating", "checkpoint written at step 10 ({last}); the same "
                                         "command resumes it, validating step 10 again"),
    # a validation whose step also owes a checkpoint: the resumed run writes it
    (signal.SIGTERM, 2, 20, "validating", "checkpoint written at step 20 ({last}); the same "
                                          "command resumes it, validating step 20 again"),
    # the test of the best checkpoint: the last step's checkpoint is already on disk
    (signal.SIGTERM, 4, 30, "testing", "kept the checkpoint of step 30 ({last}); the same "
                                       "command resumes from there"),
])
def test_a_stop_while_evaluating_keeps_the_last_step_and_resumes_to_the_same_result(
        sig, nth, step, during, kept, data, eval_reference, tmp_path, monkeypatch, capsys):
    from hkt.cli.main import main

    run = tmp_path / "run"
    last = run / "checkpoints" / "last.pt"
    args = ["train", "--data", str(data), "--out", str(run), *EVAL_RUN]
    calls = signal_inside_evaluation(monkeypatch, sig, nth)
    assert main(args) == 128 + sig
    assert len(calls) == nth  # it stopped in that evaluation, not later
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (f"hkt: stopped by {sig.name} at step {step}/30 (while {during}): "
                    + kept.format(last=last))
    assert torch.load(last, weights_only=True)["step"] == step  # the last finished step
    assert not (run / "record.json").exists()

    monkeypatch.undo()
    assert main(args) == 0
    assert f"resuming from {last} at step {step}/30" in capsys.readouterr().err
    ours = json.loads((run / "record.json").read_text())
    ref = json.loads((eval_reference / "record.json").read_text())
    assert (ours["val_accuracy"], ours["test_accuracy"], ours["best_step"]) == \
        (ref["val_accuracy"], ref["test_accuracy"], ref["best_step"])
    assert history(run) == history(eval_reference)  # every row, validation at `step` included
    # the predictions of the best checkpoint (issue 58), not of the last: byte for byte
    assert ours["best_step"] < ours["steps"] and ours["predictions"] == ref["predictions"]
    assert (run / "predictions.parquet").read_bytes() == \
        (eval_reference / "predictions.parquet").read_bytes()
    assert [r["step"] for r in history(run) if r["val_acc"]] == ["10", "20", "30"]


def test_a_run_stopped_at_one_thread_finishes_at_two_as_on_another_machine(data, reference,
                                                                             tmp_path):
    """Issue 59: a long run checkpointed on one machine resumes on another with other threads
    (train.num_threads is run-neutral); it resumes, not restarts, and its record says the threads
    it finished with. Threads move losses in the 8th digit at most: the accuracies are the same."""
    results, run = tmp_path / "results", tmp_path / "run"
    cmd = hkt_cmd("train", "--data", str(data), "--out", str(run), *TRAIN)
    proc = subprocess.Popen([*cmd, "train.num_threads=1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env_for(results))
    wait_for(run / "checkpoints" / "last.pt", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-3000:]
    step = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["step"]
    resumed = subprocess.run([*cmd, "train.num_threads=2"], capture_output=True, text=True,
                             env=env_for(results), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {run / 'checkpoints' / 'last.pt'} at step {step}/200" in resumed.stderr
    ours = json.loads((run / "record.json").read_text())
    ref = json.loads((reference / "record.json").read_text())
    assert ours["threads"] == 2 and ours["config"]["train"]["num_threads"] == 2
    assert (ours["val_accuracy"], ours["test_accuracy"], ours["best_step"]) == \
        (ref["val_accuracy"], ref["test_accuracy"], ref["best_step"])
    assert ours["test_loss"] == pytest.approx(ref["test_loss"], rel=1e-6)
