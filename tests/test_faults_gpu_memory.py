"""CUDA out of memory in one of nine jobs packed on one GPU (issue 51, 4): that job ends with one
line naming the device, the memory in use, its slot and what to change; its slot is free again;
the other eight finish; the same command resumes the failed job from its checkpoint.

Real processes claiming real slots (hkt/gpu_slots.py), as a local workflow's jobs do. The
GPU is simulated, as tests/test_run_conditions.py simulates it: the failing job's device is said to
be an H200, with its memory as the driver would report it, and its fifth training step raises
torch's out-of-memory error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import write_prepared_data
from hkt.run_record import RECORD_NAME
from hkt.gpu_slots import ENV_VAR, Slots, claim

GIB = 2**30
# the failing job: an H200 nearly full, its fifth step out of memory
OUT_OF_MEMORY = f"""
import sys, torch
from hkt.train import loop
calls = {{"n": 0}}
real = loop.forward_backward
def step(*a, **kw):
    calls["n"] += 1
    if calls["n"] == 5:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return real(*a, **kw)
loop.forward_backward = step
loop.describe_device = lambda device: "cuda:0 (NVIDIA H200)"
loop.cuda_memory = lambda device: ({int(138.5 * GIB)}, {int(139.8 * GIB)}, {int(15.2 * GIB)})
"""
MAIN = "from hkt.cli.main import main; sys.exit(main(sys.argv[1:]))"


def test_one_of_nine_packed_jobs_out_of_memory_fails_alone_and_resumes(tmp_path):
    data = write_prepared_data(tmp_path / "data", "listops")
    slots = Slots(tmp_path / "slots", gpus=1, per_gpu=9)
    env = {**os.environ, ENV_VAR: slots.env(["train"]), "CUDA_VISIBLE_DEVICES": "",
           "OMP_NUM_THREADS": "1"}

    def job(i: int, prelude: str = "") -> list[str]:
        return [sys.executable, "-c", f"import sys\n{prelude}\n{MAIN}", "train", "--data", str(data),
                "--out", str(tmp_path / f"run{i}"), "task=listops", "model=mha", "profile=smoke",
                "train.max_steps=6", "tracking.enabled=false", "--no-progress"]

    failing = 4
    procs = [subprocess.Popen(job(i, OUT_OF_MEMORY if i == failing else ""), env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(9)]
    outcomes = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    for i, (code, err) in enumerate(outcomes):
        if i != failing:
            assert code == 0 and (tmp_path / f"run{i}" / RECORD_NAME).exists(), err[-2000:]
    code, err = outcomes[failing]
    errors = [line for line in err.splitlines() if line.startswith("hkt: error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err[-3000:]
    last = tmp_path / f"run{failing}" / "checkpoints" / "last.pt"
    assert errors[0].startswith(
        "hkt: error: CUDA out of memory on cuda:0 (NVIDIA H200) (138.50 GiB of 139.80 GiB in use, "
        "15.20 GiB of it this job's; slot ")
    # how many slots are held now is left out while another job has the claim's turn (under
    # load, when the eight others start and stop around it: hkt.gpu_slots.Claim.held_now)
    assert re.search(r"; slot [1-9] of 9 on GPU 0(, [1-9] of them held)?\): ", errors[0]), errors[0]
    assert ("lower jobs_per_gpu (now 9: --config jobs_per_gpu=N) "
            "or train.batch_size (now 8); kept the checkpoint of step 3 " f"({last}); the same "
            "command resumes from there" in errors[0])
    assert not (tmp_path / f"run{failing}" / RECORD_NAME).exists()
    # every slot is free again, the failed job's too: the whole GPU is claimed without waiting
    assert claim(slots.taking("bench")).slots == list(range(9))  # (and let go at once)

    again = subprocess.run(job(failing), env=env, stderr=subprocess.PIPE, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming from {last} at step 3/6" in again.stderr
    record = json.loads((tmp_path / f"run{failing}" / RECORD_NAME).read_text())
    assert record["steps"] == 6
