"""`hkt status` on a results directory in each state: fresh, half-done (a job running, one
finished), a failed job, finished; what it reads is what the workflow and `hkt --log` write
(plan/suite.json, record files, attempt headers and progress lines)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hkt.cli.main import main
from hkt.suite.standing import JobState, schedule, settings, suite_status
from hkt.suite.status import format_status

NOW = float(int(time.time()))  # status is computed at this instant (main(): a second later)
HOST = socket.gethostname()


def header(pid: int, when: float, cmd: str = "train --data d --out r") -> str:
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(when))
    return f"===== hkt {cmd} | {iso} | host {HOST} pid {pid} =====\n"


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def results(tmp_path) -> Path:
    """A suite of 2 cores: prepare, three training jobs (1000 steps, 0.5 s each planned),
    one analysis, the aggregate; as the workflow writes its plan."""
    res = tmp_path / "results"
    jobs = [{"rule": "prepare", "name": "listops", "seconds": 60.0,
             "output": "results/data/listops/manifest.json", "log": "results/logs/prepare/listops.log",
             "threads": 1, "steps": 0, "step_s": 0.0}]
    for seed in range(3):
        jobs.append({"rule": "train", "name": f"listops/hkt/main/seed{seed}", "seconds": 600.0,
                     "output": f"results/runs/listops/hkt/main/seed{seed}/record.json",
                     "log": f"results/logs/train/listops/hkt/main/seed{seed}.log", "threads": 1,
                     "steps": 1000, "step_s": 0.5})
    jobs += [{"rule": "analyze", "name": "listops/hkt/main/seed0", "seconds": 120.0,
              "output": "results/analysis/listops/hkt/main/seed0/analysis.parquet",
              "log": "results/logs/analyze/listops/hkt/main/seed0.log", "threads": 1,
              "steps": 0, "step_s": 0.0},
             {"rule": "aggregate", "name": "aggregate", "seconds": 30.0,
              "output": "results/summary.md", "log": "results/logs/aggregate/aggregate.log",
              "threads": 1, "steps": 0, "step_s": 0.0}]
    plan = {"suite": "cpu", "profile": "cpu", "device": "cpu (2 cores)", "cores": 2,
            "started": NOW - 3600, "host": HOST, "pid": dead_pid(), "workdir": str(tmp_path),
            "results_dir": "results", "slots": {}, "jobs": jobs}
    (res / "plan").mkdir(parents=True)
    (res / "plan" / "suite.json").write_text(json.dumps(plan))
    (res / ".workflow.lock").write_text(json.dumps(  # as hkt.workflow.results_lock leaves it
        {"host": HOST, "pid": plan["pid"], "checkout": "/src/hkt", "started": "2026-12-01T09:00:00+00:00"}))
    return res


def record(**fields) -> dict:
    """A run record that loads (one that does not is no finished run: it is redone)."""
    from test_report_aggregate import make_record

    return make_record(**fields)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def status_of(res: Path):
    return suite_status(res, settings([]), now=NOW)


def test_fresh(results):
    s = status_of(results)
    assert [j.state for j in s.jobs] == ["waiting"] * 6
    # 2 cores: prepare 60 | train 600, 600 | train 600 + analyze 120 | aggregate 30
    assert s.remaining_s == pytest.approx(60 + 600 + 600 + 30)
    text = format_status(s)
    assert "jobs: 6: done 0, running 0, waiting 6, failed 0" in text
    assert "waiting: prepare 1, train 3, analyze 1, aggregate 1" in text
    assert "no training step has run yet" in text


def test_half_done_with_a_running_training_job(results):
    write(results / "data" / "listops" / "manifest.json", "{}")
    write(results / "runs" / "listops" / "hkt" / "main" / "seed0" / "record.json",
          json.dumps(record(ms_per_step=400.0)))  # 0.8x the plan's 0.5 s
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed1.log",
          header(dead_pid(), NOW - 7200) + "an earlier attempt\nhkt: stopped by SIGTERM at step 100/1000\n"
          + header(os.getpid(), NOW - 200)
          + "step  400/1000 | loss 1.2 | acc 0.300 | 60 samples/s | eta 5m00s\n"
          + "step  420/1000 | loss 1.1 | acc 0.310 | 64 samples/s | val 0.352 | best 0.352@400 | eta 4m50s\n")
    s = status_of(results)
    states = {j.name: j.state for j in s.jobs if j.rule == "train"}
    assert states == {"listops/hkt/main/seed0": "done", "listops/hkt/main/seed1": "running",
                      "listops/hkt/main/seed2": "waiting"}
    running = next(j for j in s.jobs if j.state == "running")
    assert running.remaining_s == 290  # its progress line's ETA
    assert running.detail == "step 420/1000 (42%) | acc 0.310 | val 0.352 | best 0.352@400 | eta 4m50s"
    # measured pace: the record's steps (no evaluation in them) 400 ms against the plan's 0.5 s,
    # 0.8x; the running job's ETA (with its validations) 290 s / 580 steps against the plan's
    # 600 s / 1000 steps with validations, 0.833x (not 1.0x against the bare step): median 0.817
    assert s.speed == pytest.approx((0.8 + 290 / 580 / 0.6) / 2)
    # seed1 290 on core A; seed2 490 (600 x 0.817) on core B, analyze 120 on A; then aggregate 30
    assert s.remaining_s == pytest.approx(600 * s.speed + 30)
    text = format_status(s)
    assert "jobs: 6: done 2, running 1, waiting 3, failed 0" in text
    assert "training steps take 0.82x the plan's time" in text
    finish = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(NOW + 600 * s.speed + 30))
    assert f"expected to finish {finish}" in text


def test_a_job_in_its_test_pass_counts_the_pass_as_its_remaining_time(results):
    """After the last step the trainer's ETA is 0 s, but the test pass (minutes at T = 1024)
    is still to come: the pass's own ETA is the job's remaining time."""
    write(results / "data" / "listops" / "manifest.json", "{}")
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed0.log",
          header(os.getpid(), NOW - 700)
          + "step 1000/1000 | loss 1.1 | acc 0.310 | 64 samples/s | val 0.352 | best 0.352@750 | eta 0s\n"
          + "testing the best checkpoint (step 750) on results/data/listops/test.parquet\n"
          + "step 1000/1000 | testing: 40/100 batches, 1280 examples so far | eta 1m30s\n")
    running = next(j for j in status_of(results).jobs if j.state == "running")
    assert running.remaining_s == 90
    assert running.detail == "step 1000/1000 (100%) | testing: 40/100 batches, 1280 examples so far | eta 1m30s"


def test_a_job_with_no_progress_line_yet_counts_at_the_measured_pace_from_where_it_resumed(results):
    """Seconds after a training job starts (or resumes) it has printed no ETA: it counts at the
    pace the finished jobs measured, from the step it resumed at, less the time it has run."""
    write(results / "data" / "listops" / "manifest.json", "{}")
    write(results / "runs" / "listops" / "hkt" / "main" / "seed0" / "record.json",
          json.dumps(record(ms_per_step=400.0)))  # 0.8x the plan's 0.5 s
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed1.log",
          header(os.getpid(), NOW - 20) + "# resolved config\nseed: 1\n")
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed2.log",
          header(dead_pid(), NOW - 900) + "hkt: stopped by SIGTERM at step 750/1000: checkpoint "
          "written at step 750 (last.pt); the same command resumes it\n"
          + header(os.getpid(), NOW - 10)
          + "resuming from results/runs/listops/hkt/main/seed2/checkpoints/last.pt at step 750/1000\n")
    s = status_of(results)
    running = {j.name: j for j in s.jobs if j.state == "running"}
    assert s.speed == pytest.approx(0.8)
    assert running["listops/hkt/main/seed1"].remaining_s == pytest.approx(600 * 0.8 - 20)
    assert running["listops/hkt/main/seed2"].remaining_s == pytest.approx(600 * 0.25 * 0.8 - 10)
    assert running["listops/hkt/main/seed1"].detail == "running for 20 s"


def test_a_failed_job_shows_its_error_line_and_log(results):
    log = results / "logs" / "train" / "listops" / "hkt" / "main" / "seed2.log"
    write(log, header(dead_pid(), NOW - 100) + "resolved config ...\n"
          "hkt: error: training diverged: non-finite loss at step 37\n")
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed0.log",
          header(dead_pid(), NOW - 100) + "step 10/1000 | loss 2.0 | eta 8m00s\n")  # kill -9
    s = status_of(results)
    failed = {j.name: j.detail for j in s.jobs if j.state == "failed"}
    assert failed == {"listops/hkt/main/seed2": "hkt: error: training diverged: non-finite loss "
                                                "at step 37",
                      "listops/hkt/main/seed0": "ended without a result or an error line (killed?)"}
    text = format_status(s)
    assert f"(log: {log})" in text and "failed 2" in text


def test_a_job_stopped_by_a_signal_is_resumable_not_failed(results):
    """SIGTERM (a pause, a SLURM preemption) leaves a checkpoint: the job is counted from where
    the next run resumes it, and the hint is to run the same command, not to fix anything."""
    stop = ("hkt: stopped by SIGTERM at step 412/1000: checkpoint written at step 400 "
            "(results/runs/listops/hkt/main/seed1/checkpoints/last.pt); the same command resumes it")
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed1.log",
          header(dead_pid(), NOW - 300) + "step  400/1000 | acc 0.300 | eta 5m00s\n" + stop + "\n")
    write(results / "logs" / "train" / "listops" / "hkt" / "main" / "seed2.log",
          header(dead_pid(), NOW - 300) + "hkt: stopped by SIGINT at step 30/1000: kept the checkpoint "
          "of step 250 (last.pt); the same command resumes from there\n")
    write(results / "logs" / "prepare" / "listops.log", header(dead_pid(), NOW - 300, "prepare x")
          + "hkt: stopped by SIGTERM during `hkt prepare`: nothing half-written is left\n")
    write(results / "plan" / "sessions.json", json.dumps({"sessions": [  # the paused run
        {"started": NOW - 1200, "last_seen": NOW - 300, "host": HOST, "pid": dead_pid(),
         "commit": None, "estimate_s": 1200.0}]}))
    s = status_of(results)
    stopped = {j.name: j for j in s.jobs if j.state == "stopped"}
    assert set(stopped) == {"listops", "listops/hkt/main/seed1", "listops/hkt/main/seed2"}
    assert stopped["listops/hkt/main/seed1"].detail == stop
    assert stopped["listops/hkt/main/seed1"].remaining_s == pytest.approx(600 * 0.6)
    assert stopped["listops/hkt/main/seed2"].remaining_s == pytest.approx(600 * 0.75)
    assert stopped["listops"].remaining_s == 60  # prepare starts again
    # prepare 60 | seed0 600 then analyze 120; seed2 450 then seed1 360: 60 + 810 | aggregate 30
    assert s.remaining_s == pytest.approx(870 + 30)
    text = format_status(s)
    assert "waiting 3, failed 0, stopped 3" in text
    assert f"  train     listops/hkt/main/seed1  {stop}" in text
    assert "(stopped jobs are counted from where they resume: the same snakemake command " \
           "resumes them, training from its checkpoint)" in text
    assert "failed jobs are not counted" not in text
    assert "remaining: about 15 min on 2 cores" in text  # beside the wall time so far
    assert text.endswith("wall time so far: 15 min over 1 run of the workflow; with the "
                         "remaining, about 30 min, against 20 min planned at its first start (+50%)")


def test_finished(results, capsys):
    plan_file = results / "plan" / "suite.json"
    plan = json.loads(plan_file.read_text())
    for j in plan["jobs"]:
        write(results.parent / j["output"], json.dumps(record()) if j["rule"] == "train" else "{}")
    now = time.time()  # main() reads the clock itself; NOW (at import) can be minutes old here
    plan["started"] = now - 3600
    plan_file.write_text(json.dumps(plan))
    write(results / "plan" / "sessions.json", json.dumps({"sessions": [  # paused, then resumed
        {"started": now - 9000, "last_seen": now - 7200, "ended": now - 7200, "ok": False,
         "host": HOST, "pid": dead_pid(), "commit": "4de72a8" + "0" * 33, "estimate_s": 5000.0},
        {"started": now - 3600, "last_seen": now - 600, "host": HOST, "pid": dead_pid(),
         "commit": "4de72a8" + "0" * 33, "estimate_s": 5000.0}]}))
    assert main(["status", str(results)]) == 0
    out = capsys.readouterr().out
    assert "jobs: 6: done 6, running 0, waiting 0, failed 0" in out
    assert "finished: every job is done" in out and "remaining" not in out
    # 30 min, then 50 min until its last heartbeat (killed): 80 min against 83 planned
    assert "wall time: 80 min over 2 runs of the workflow, against 83 min planned at its " \
           "first start (-4%); commit 4de72a8" in out
    assert f"workflow: not running (its last run, pid {json.loads((results / '.workflow.lock').read_text())['pid']} on {HOST}, from /src/hkt, has ended)" in out
    # started: the suite's first run (the plan file holds the last run's start, 60 min ago)
    first = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now - 9000))
    assert f", started {first} (2.5 h ago) on " in out and "(60 min ago)" not in out


def test_a_job_on_another_host_runs_while_its_log_grows(results):
    log = results / "logs" / "analyze" / "listops" / "hkt" / "main" / "seed0.log"
    write(log, header(4242, NOW - 60, "analyze r").replace(f"host {HOST}", "host node17"))
    os.utime(log, (NOW - 10, NOW - 10))
    assert next(j for j in status_of(results).jobs if j.rule == "analyze").state == "running"
    os.utime(log, (NOW - 3600, NOW - 3600))  # silent for an hour: ended
    assert next(j for j in status_of(results).jobs if j.rule == "analyze").state == "failed"


def test_no_plan_is_explained(tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"hkt: error: no suite plan in {tmp_path / 'plan' / 'suite.json'}: the workflow " \
           "writes it when it starts" in err


def test_a_results_directory_that_does_not_exist_is_named_with_the_one_near_it(
        tmp_path, monkeypatch, capsys):
    """`hkt status results-smok`: the directory does not exist (not "no suite plan in it"), and
    results-smoke beside it is suggested (issue 73)."""
    (tmp_path / "results-smoke" / "plan").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert main(["status", "results-smok"]) == 2
    assert capsys.readouterr().err == (
        "hkt: error: results directory results-smok does not exist: give the results_dir of the "
        "suite (default: results); did you mean results-smoke?\n")
    assert main(["status", str(tmp_path / "results-smok")]) == 2
    assert capsys.readouterr().err.endswith(f"; did you mean {tmp_path / 'results-smoke'}?\n")
    assert main(["status", "elsewhere"]) == 2  # nothing near: no guess
    assert capsys.readouterr().err.endswith("(default: results)\n")


def test_schedule_takes_each_jobs_threads():
    jobs = [JobState("train", "a", "running", remaining_s=100, threads=2),
            JobState("train", "b", "waiting", remaining_s=50, threads=1),
            JobState("bench", "c", "waiting", remaining_s=10, threads=2)]
    assert schedule(jobs, 2) == 160  # a holds both cores; b after it; c after b


def test_status_imports_neither_torch_nor_mlflow(results):
    code = ("import sys\nfrom hkt.cli.main import main\n"
            f"main(['status', {str(results)!r}])\n"
            "assert 'torch' not in sys.modules and 'mlflow' not in sys.modules, 'heavy import'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "jobs: 6" in r.stdout


def test_other_rules_go_at_the_pace_their_finished_jobs_took():
    from hkt.suite.standing import scale_other_rules as _scale_other_rules

    jobs = [JobState("analyze", "a", "done", planned_s=120, elapsed_s=30),
            JobState("analyze", "b", "done", planned_s=120, elapsed_s=60),
            JobState("analyze", "c", "waiting", remaining_s=120, planned_s=120),
            JobState("analyze", "d", "running", remaining_s=100, planned_s=120, elapsed_s=20),
            JobState("bench", "e", "waiting", remaining_s=600, planned_s=600)]
    _scale_other_rules(jobs)
    # analyze took 0.25x and 0.5x its allowance: median 0.375 -> 45 s; 25 s left of d's; bench as planned
    assert [j.remaining_s for j in jobs[2:]] == [45, 25, 600]


def _train(n: int, seconds: float, state: str = "waiting") -> list[JobState]:
    return [JobState("train", f"t{i}", state, remaining_s=seconds) for i in range(n)]


def test_a_gpu_suite_runs_the_plans_training_jobs_at_once_not_one_per_core():
    """16 cores, one GPU of 9 slots: 16 jobs of 100 s run 9 then 7, as the plan packs them."""
    jobs = _train(16, 100)
    assert schedule(jobs, 16) == 100  # cores alone: all 16 at once
    assert schedule(jobs, 16, {"train": 9}) == 200
    gpu = {"gpus": 1, "per_gpu": 9, "commands": ["train", "analyze", "bench"]}
    assert schedule(jobs, 16, None, gpu) == 200


def test_training_and_analyses_share_the_gpus_slots_and_a_benchmark_takes_a_whole_gpu():
    gpu = {"gpus": 1, "per_gpu": 9, "commands": ["train", "analyze", "bench"]}
    slots = {"train": 9, "analyze": 9, "bench": 1}
    jobs = _train(9, 100) + [JobState("analyze", f"a{i}", "waiting", remaining_s=10)
                             for i in range(9)]
    assert schedule(jobs, 16, slots) == 100  # per rule only: analyses on the 7 idle cores
    assert schedule(jobs, 16, slots, gpu) == 110  # the GPU's 9 slots are the training jobs'
    bench = [*_train(1, 100, "running"), JobState("bench", "b", "waiting", remaining_s=50)]
    assert schedule(bench, 16, slots, gpu) == 150  # waits until the GPU is empty
    assert schedule(bench, 16, slots, {**gpu, "gpus": 2}) == 100  # the other GPU is free


def test_status_of_a_packed_gpu_suite_counts_its_slots(tmp_path, monkeypatch, capsys):
    """The paper suite on one GPU and 16 cores, planned as the workflow plans it at its start
    (its $HKT_GPU_SLOTS set): hkt status lays the training out 9 at once, as hkt plan does."""
    from hkt.config_compose import config_dir
    from hkt.suite.estimate import estimate, write_plan
    from hkt.gpu_slots import ENV_VAR
    from hkt.workflow.grid import Grid
    from hkt.workflow.suites import load_suite, merge
    from omegaconf import OmegaConf

    config = load_suite("paper").config
    grid = Grid(merge(config, {"node": {"gpus": 1}, "results_dir": "results"}), config_dir(),
                cpus=16)
    job_cfg = OmegaConf.create({"model": {"name": "m", "variant": "v"},
                                "task": {"max_length": 512, "num_classes": 10, "prepare": {}},
                                "train": {"batch_size": 4, "max_steps": 100, "eval_every": 0,
                                          "eval_batches": None, "test_batches": 1}})
    plan = estimate(grid, {j: job_cfg for j in grid.train_jobs()}, lambda cfg, shape: 1.0,
                    other_seconds={}, eval_cost=0.0, gpus=1,
                    sharing={"jobs": 9, "slowdown": 1.83})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_VAR, grid.gpu_env())
    path = write_plan(plan, grid, tmp_path / "results" / "plan" / "suite.json")
    doc = json.loads(path.read_text())
    assert doc["gpu_slots"] == {"gpus": 1, "per_gpu": 9, "commands": ["train", "analyze", "bench"]}
    assert doc["slots"]["train"] == 9
    s = suite_status(tmp_path / "results", settings([]), now=NOW)
    nine = -(-len(grid.train_jobs()) // 9) * plan.jobs[0].seconds  # rounds of 9 at once
    assert s.remaining_s >= nine  # no faster than 9 at once
    assert s.remaining_s == pytest.approx(plan.wall_seconds)  # the plan's own figure
    assert "1 GPU(s) x 9 slots (jobs_per_gpu), 9 training jobs at once" in format_status(s)
    del doc["gpu_slots"], doc["slots"]  # as before: threads on cores, 16 training jobs at once
    path.write_text(json.dumps(doc))
    assert suite_status(tmp_path / "results", settings([]), now=NOW).remaining_s < nine
