"""`hkt stop` (issue 52, item 4): it stops the workflow of one results directory, and only it, by
the pid its lock records; its training jobs write checkpoints; the workflow's last line says
"stopped, resumable"; and the command `hkt stop` prints resumes the suite to the records an
uninterrupted run writes. The cheap cases (which processes, which messages) run without
Snakemake; one test runs two real workflows side by side."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hkt.suite.stop import job_processes, resumable_line
from hkt.workflow.results_lock import LOCK_NAME, is_held
from test_status import NOW, dead_pid, header, results, write  # noqa: F401 - results: a fixture
from test_workflow import ROOT, snakemake_cmd, user_env

HOST = socket.gethostname()


def hkt(*args: str, cwd: Path | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hkt.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


# --- which processes ----------------------------------------------------------------------------

def test_the_jobs_are_the_first_process_below_each_shell_of_the_workflow():
    table = {100: (1, "python3"),            # the workflow (Snakemake)
             101: (100, "bash"), 102: (101, "hkt"), 103: (102, "pt_data_worker"),  # a job
             104: (100, "sh"), 105: (104, "bash"), 106: (105, "python"),          # nested shells
             107: (100, "hkt"),              # a shell that exec'd its command
             108: (104, "bash"),             # a shell that has not started its command yet
             200: (1, "python3"), 201: (200, "bash"), 202: (201, "hkt")}  # another workflow
    assert job_processes(100, table) == [102, 106, 107]
    assert job_processes(200, table) == [202]
    assert job_processes(300, table) == []


# --- what it says where nothing is to be stopped --------------------------------------------------

def test_a_directory_that_is_not_a_results_directory_is_one_line(tmp_path):
    r = hkt("stop", str(tmp_path / "results-smok"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"hkt: error: no results directory {tmp_path / 'results-smok'}: give the "
                        "results_dir of the suite to stop (default: results)\n")
    r = hkt("stop", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == (f"hkt: error: no workflow has run in {tmp_path} (it has no "
                        f"{LOCK_NAME}): give the results_dir of the suite to stop\n")


def test_a_workflow_that_has_ended_is_not_stopped_again(tmp_path):
    (tmp_path / LOCK_NAME).write_text(json.dumps({"host": HOST, "pid": os.getpid()}))  # a live pid
    r = hkt("stop", str(tmp_path))  # but nobody holds the lock: no pid is signalled
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"hkt: no workflow is running on {tmp_path}: nothing to stop\n"


JOB = """import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: (print("job got SIGTERM", flush=True), sys.exit(143)))
print("job started", flush=True)
time.sleep(120)
"""
WORKFLOW = """import signal, subprocess, sys, time
from hkt.workflow.results_lock import claim_results_dir
from hkt.workflow.sessions import start_session
results, job, kind = sys.argv[1:4]
if kind == "stubborn":  # a workflow that does not end when asked
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
claim_results_dir(results, "/src/hkt")
start_session(results, estimate_s=60.0, heartbeat_s=60.0, cluster=kind == "cluster")
subprocess.Popen(["bash", "-c", f"{sys.executable} {job}; true"])  # a shell that stays
time.sleep(120)
"""


def holder(results: Path, kind: str = "local") -> subprocess.Popen:
    """A stand-in workflow: holds ``results``' lock, records its session and runs one job (a
    shell running a Python that says when it got SIGTERM)."""
    job, workflow = results.parent / "job.py", results.parent / "workflow.py"
    job.write_text(JOB)
    workflow.write_text(WORKFLOW)
    proc = subprocess.Popen([sys.executable, str(workflow), str(results), str(job), kind],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "job started"
    return proc


def test_only_the_workflow_of_the_results_directory_and_its_jobs_are_stopped(tmp_path):
    ours, theirs = holder(tmp_path / "ours"), holder(tmp_path / "theirs")
    try:
        r = hkt("stop", str(tmp_path / "ours"), "poll_s=0.1", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert ours.wait(timeout=30) == -signal.SIGTERM  # the stand-in has no handler: it dies
        assert ours.stdout.read() == "job got SIGTERM\n"  # its job was signalled, by its pid
        lines = r.stdout.splitlines()
        assert lines[0] == (f"hkt: stopping the workflow on {tmp_path / 'ours'} (pid {ours.pid}) "
                            "and its jobs; each training job writes a checkpoint of its step")
        assert re.fullmatch(rf"hkt: stopped the workflow on {re.escape(str(tmp_path / 'ours'))} "
                            rf"\(pid {ours.pid}\) and 1 running job; resume with: cd \S+ && "
                            rf"\S+workflow.py \S+ours \S+job.py local", lines[-1]), lines
        assert json.loads((tmp_path / "ours" / "plan" / "stop.json").read_text())["pid"] == ours.pid
        assert theirs.poll() is None and is_held(tmp_path / "theirs")  # untouched
        assert not is_held(tmp_path / "ours")
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()


def test_a_workflow_whose_jobs_run_on_a_cluster_is_left_to_snakemake(tmp_path):
    proc = holder(tmp_path / "res", "cluster")
    try:
        r = hkt("stop", str(tmp_path / "res"))
        assert r.returncode == 2 and proc.poll() is None
        assert r.stderr == (f"hkt: error: the workflow on {tmp_path / 'res'} (pid {proc.pid}) runs "
                            "its jobs on a cluster, not here: press Ctrl-C in its terminal or send "
                            f"it SIGINT (`kill -INT {proc.pid}`); Snakemake then cancels its jobs, "
                            "and each training job writes a checkpoint at the cluster's SIGTERM\n")
    finally:
        proc.kill()
        proc.wait()


def test_a_workflow_that_does_not_end_within_wait_s_is_one_line_naming_what_runs(tmp_path):
    proc = holder(tmp_path / "res", "stubborn")
    try:
        r = hkt("stop", str(tmp_path / "res"), "wait_s=3", "poll_s=0.1")
        assert r.returncode == 2 and proc.poll() is None
        assert r.stderr == (f"hkt: error: the workflow on {tmp_path / 'res'} (pid {proc.pid}) has "
                            "not ended within 3 s (wait_s, config/stop.yaml); still running: the "
                            f"workflow alone; run `hkt stop {tmp_path / 'res'}` again to wait "
                            "longer\n")  # its job ended at its SIGTERM
        assert proc.stdout.readline() == "job got SIGTERM\n"
    finally:
        proc.kill()
        proc.wait()


# --- what the workflow says last ------------------------------------------------------------------

def session(res: Path, started: float) -> None:
    """This process's session of the workflow, as it records it."""
    write(res / "plan" / "sessions.json", json.dumps({"sessions": [
        {"started": started, "last_seen": started, "host": HOST, "pid": os.getpid(),
         "argv": ["/venv/bin/snakemake", "--cores", "all", "--config", "suite=smoke"],
         "cwd": os.getcwd()}]}))


STOP = ("hkt: stopped by SIGTERM at step 412/1000: checkpoint written at step 412 "
        "(results/runs/listops/hkt/main/seed1/checkpoints/last.pt); the same command resumes it")


def test_a_stop_that_failed_no_job_ends_the_workflow_with_stopped_resumable(results):
    session(results, time.time() - 60)
    assert resumable_line(results) is None  # ended without a stop: Snakemake's error stands
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed1.log",
          header(dead_pid(), NOW) + "step  400/1000 | acc 0.300 | eta 5m00s\n" + STOP + "\n")
    write(results / "logs" / "prepare" / "listops.log", header(dead_pid(), NOW, "prepare x")
          + "hkt: stopped by SIGTERM during `hkt prepare`: nothing half-written is left\n")
    assert resumable_line(results) == (
        "hkt: stopped, resumable: 2 jobs stopped, 1 of them training from its checkpoint; the "
        "same command resumes the suite: /venv/bin/snakemake --cores all --config suite=smoke")
    write(results / "logs" / "analyze" / "listops" / "hkt" / "main" / "seed0.log",
          header(dead_pid(), NOW, "analyze x") + "hkt: error: no run record in r\n")
    assert resumable_line(results) is None  # a job failed: that is what the user must see


def test_a_stop_asked_of_this_workflow_is_resumable_with_no_job_running(results):
    started = time.time() - 60
    session(results, started)
    write(results / "plan" / "stop.json", json.dumps({"pid": os.getpid(), "host": HOST,
                                                      "requested": started - 10}))
    assert resumable_line(results) is None  # asked of an earlier session of this pid
    write(results / "plan" / "stop.json", json.dumps({"pid": os.getpid(), "host": HOST,
                                                      "requested": started + 10}))
    assert resumable_line(results).startswith("hkt: stopped, resumable: 0 jobs stopped, 0 of them")


def test_a_failed_job_of_an_earlier_session_does_not_hide_the_stop(results):
    log = results / "logs" / "analyze" / "listops" / "hkt" / "main" / "seed0.log"
    write(log, header(dead_pid(), NOW - 900, "analyze x") + "hkt: error: no run record in r\n")
    os.utime(log, (NOW - 900, NOW - 900))
    session(results, time.time() - 60)
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed1.log",
          header(dead_pid(), NOW) + STOP + "\n")
    assert resumable_line(results).startswith("hkt: stopped, resumable: 1 job stopped")


# --- two real workflows side by side --------------------------------------------------------------

SUITE = {  # the smoke profile's model, one short training job (checkpoints every 25 steps)
    "profile": "smoke", "seeds": [0],
    "train_overrides": ["train.max_steps=200", "train.checkpoint_every=25", "train.eval_every=100",
                        "train.log_every=20", "train.test_batches=2"],
    "tasks": {"listops": {"config": "listops", "prepare": [
        "prepare.splits.train=256", "prepare.splits.val=32", "prepare.splits.test=32"]}},
    "main": {"tasks": ["listops"], "models": ["mha"]},
    "ablation": {"enabled": False},
    "external": {"majority": {"enabled": False}, "ngram": {"enabled": False}},
    "analyze": {"enabled": False}, "bench": {"enabled": False},
    "resources": {"train": {"threads": 1, "gpu": 0}, "prepare": {"threads": 1}},
}
RUN = Path("runs") / "listops" / "mha" / "main" / "seed0"


def start(work: Path, cfg: Path) -> subprocess.Popen:
    """The workflow of ``cfg`` in ``work`` (results in work/results), its output in work.log."""
    work.mkdir(parents=True, exist_ok=True)
    with open(f"{work}.log", "w") as out:  # a file, not a pipe: nothing waits on a reader
        return subprocess.Popen(snakemake_cmd("--cores", "1", "--configfile", str(cfg), cwd=work),
                                stdout=out, stderr=subprocess.STDOUT, env=user_env())


@pytest.mark.slow
def test_hkt_stop_stops_one_suite_beside_another_and_its_command_resumes_it(tmp_path):
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(yaml.safe_dump(SUITE))
    a, b = tmp_path / "a", tmp_path / "b"  # working directories; results in each
    stopped, beside = start(a, cfg), start(b, cfg)
    try:
        checkpoint = a / "results" / RUN / "checkpoints" / "last.pt"
        deadline = time.monotonic() + 400
        while not checkpoint.exists():
            assert stopped.poll() is None, Path(f"{a}.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "no checkpoint written"
            time.sleep(0.2)
        r = hkt("stop", str(a / "results"), timeout=200)
        assert r.returncode == 0, r.stdout + r.stderr
        assert stopped.wait(timeout=60) == 1  # Snakemake's own status: the suite is not complete
        assert beside.poll() is None  # the other suite runs on
        out = Path(f"{a}.log").read_text()
        assert ("to stop it, from any terminal: `hkt stop results` (every training job "
                "checkpoints; the same command resumes)") in out  # said beside the plan
        last = out.strip().splitlines()[-1]
        assert last.startswith("hkt: stopped, resumable: 1 job stopped, 1 of them training from "
                               "its checkpoint; the same command resumes the suite: "), out[-3000:]
        lines = r.stdout.strip().splitlines()
        m = re.match(r"  train listops/mha/main/seed0: stopped by SIGTERM at step (\d+)/200: "
                     r"checkpoint written at step \1 ", lines[1])
        assert m, lines
        resume = lines[-1].split("; resume with: ", 1)[1]
        assert resume.startswith(f"cd {a} && {sys.executable} -m snakemake ")

        again = subprocess.run(["bash", "-c", resume], capture_output=True, text=True,
                               env=user_env(), timeout=400)  # the line it printed, as given
        assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
        assert beside.wait(timeout=400) == 0, Path(f"{b}.log").read_text()[-4000:]
        assert "hkt: stopped" not in Path(f"{b}.log").read_text()
    finally:
        for p in (stopped, beside):
            if p.poll() is None:
                p.kill()
                p.wait()
    log = (a / "results" / "logs" / "train" / RUN.relative_to("runs")).with_suffix(".log")
    assert f"at step {m[1]}/200" in log.read_text()  # resumed from the checkpoint of the stop
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "identity_check.py"),
                            str(b / "results"), str(a / "results")],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr  # every table and history equal
    ours, ref = (json.loads((w / "results" / RUN / "record.json").read_text()) for w in (a, b))
    assert (ours["val_accuracy"], ours["test_accuracy"], ours["best_step"]) == \
        (ref["val_accuracy"], ref["test_accuracy"], ref["best_step"])
