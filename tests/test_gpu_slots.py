"""GPU slots (hkt/gpu_slots.py): several jobs of a local workflow share a GPU, each on one
device, spread evenly, and a slot is free again as soon as its job ends, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hkt.errors import ConfigError
from hkt.gpu_slots import ENV_VAR, Slots, claim, for_command, visible_device


def test_jobs_spread_evenly_over_the_gpus_and_a_whole_gpu_goes_where_none_runs(tmp_path):
    slots = Slots(tmp_path, gpus=2, per_gpu=3)
    claims = [claim(slots) for _ in range(5)]
    assert [(c.gpu, c.slots) for c in claims] == [(0, [0]), (1, [0]), (0, [1]), (1, [1]), (0, [2])]
    for c in claims[1::2]:  # GPU 1 empties
        c.release()
    whole = claim(slots.taking("bench"))
    assert (whole.gpu, whole.slots) == (1, [0, 1, 2])


def test_a_killed_job_frees_its_slot(tmp_path):
    """`kill -9` runs no cleanup: the operating system releases the lock with the process."""
    slots = Slots(tmp_path, gpus=1, per_gpu=2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from hkt.gpu_slots import Slots, claim; "
         f"c = claim(Slots(Path({str(tmp_path)!r}), 1, 2)); print(c.slots, flush=True); "
         "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "[0]"
        assert claim(slots).slots == [1]  # the holder's slot is taken: the other one
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    assert claim(slots).slots == [0]


def test_with_every_slot_taken_a_job_waits_for_one(tmp_path):
    slots = Slots(tmp_path, gpus=1, per_gpu=1)
    first = claim(slots)
    said, got = [], []
    waiter = threading.Thread(target=lambda: got.append(claim(slots, say=said.append)))
    waiter.start()
    while not said and waiter.is_alive():  # it says that it waits before it waits
        waiter.join(0.01)
    assert said == ["waiting for 1 more slot(s) of GPU 0 (1 per GPU; every one is taken)"]
    assert not got
    first.release()
    waiter.join(60)
    assert got and got[0].slots == [0]


def test_which_commands_claim_and_how_many_slots(tmp_path):
    env = {ENV_VAR: Slots(tmp_path, 2, 9).env(["train", "analyze", "bench"])}
    assert for_command(["train", "--data", "d"], env) == Slots(tmp_path, 2, 9, 1)
    assert for_command(["analyze", "run"], env).take == 1
    assert for_command(["bench", "attention"], env).take == 9  # timings: the GPU to itself
    assert for_command(["prepare", "listops"], env) is None
    assert for_command(["train"], {}) is None  # not a workflow's local job
    # a suite whose training asks no GPU (the CPU suite on a GPU machine) claims none for it
    assert for_command(["train"], {ENV_VAR: Slots(tmp_path, 2, 9).env(["bench"])}) is None
    with pytest.raises(ConfigError, match=rf"\${ENV_VAR}='x:y': want DIR:GPUS:PER_GPU:COMMANDS"):
        for_command(["train"], {ENV_VAR: "x:y"})
    with pytest.raises(ConfigError, match="want at least one GPU"):
        for_command(["train"], {ENV_VAR: f"{tmp_path}:0:9:train"})
    with pytest.raises(ConfigError, match="prepare claim no GPU slots"):
        for_command(["train"], {ENV_VAR: f"{tmp_path}:1:9:train,prepare"})


def test_the_device_is_the_nth_visible_one():
    assert visible_device(1, {}) == "1"
    assert visible_device(1, {"CUDA_VISIBLE_DEVICES": "2,3"}) == "3"


def test_hkt_claims_its_slot_before_the_command_runs(tmp_path, monkeypatch, capsys):
    """What a local workflow's training job does: its GPU named in one line, and in
    CUDA_VISIBLE_DEVICES while it runs; the slot free again afterwards."""
    from conftest import write_prepared_data
    from hkt.cli.main import main

    data = write_prepared_data(tmp_path / "data", "listops")
    monkeypatch.setenv(ENV_VAR, Slots(tmp_path / "slots", 1, 9).env(["train"]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    seen = []
    import hkt.train.command as train_cli

    real = train_cli.run
    monkeypatch.setattr(train_cli, "run", lambda args: seen.append(
        os.environ["CUDA_VISIBLE_DEVICES"]) or real(args))
    assert main(["train", "--data", str(data), "--out", str(tmp_path / "run"), "task=listops",
                 "model=mha", "profile=smoke", "train.max_steps=2", "tracking.enabled=false",
                 "--no-progress"]) == 0
    assert seen == ["0"]
    assert "hkt: on GPU 0 of 1 (slot 1 of 9; CUDA_VISIBLE_DEVICES=0)" in capsys.readouterr().err
    assert claim(Slots(Path(tmp_path / "slots"), 1, 9)).slots == [0]  # released at the end
    # the process's own view as it was: a later subprocess does not inherit the claim's GPU
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_a_claim_leaves_no_gpu_view_in_a_process_that_had_none(tmp_path, monkeypatch):
    from hkt.gpu_slots import claimed

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "x")  # recorded, so restored at teardown
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with claimed(Slots(tmp_path / "slots", 1, 9).taking("train"), say=lambda s: None):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
