"""`hkt plan`: the arithmetic of the estimate (with a fake step time), its output, and a real
calibration of the smoke suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from hkt.suite.estimate import JobEstimate, Plan, estimate, train_cost
from hkt.suite.plan import format_plan
from hkt.workflow.grid import Grid
from hkt.provenance import NO_SUITE
from hkt.workflow.suites import load_suite, merge

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())

SUITE = {
    "suite": "tiny", "seeds": [0, 1],
    "main": {"tasks": ["listops"], "models": ["mha", "hkt"]},
    "ablation": {"enabled": True, "task": "listops", "seeds": None, "include": ["levels1"]},
    "external": {**{name: {"enabled": False} for name in CONFIG["external"]},
                 "ngram": {"enabled": True, "seeds": [0]}},
    "analyze": {"enabled": True, "models": ["hkt"], "variants": ["main"]},
    "bench": {"enabled": True},
    "resources": {"train": {"threads": 2}, "analyze": {"threads": 1}, "prepare": {"threads": 4},
                  "external": {"threads": 1}, "bench": {"threads": 4}, "aggregate": {"threads": 1}},
}
OTHER = {"prepare": 100.0, "external": 10.0, "analyze": 30.0, "bench": 7.0, "aggregate": 5.0}


def fake_config(job) -> OmegaConf:
    """A composed config's fields that the estimate reads: 10 steps, validation every 5 steps on
    2 batches, a test set of 3 batches (split sizes at batch 4)."""
    return OmegaConf.create({
        "model": {"name": job.model, "variant": job.variant},
        "task": {"max_length": 512, "num_classes": 10,
                 "prepare": {"splits": {"val": 400, "test": 12}}},
        "train": {"batch_size": 4, "max_steps": 10, "eval_every": 5, "eval_batches": 2,
                  "test_batches": None},
    })


def test_estimate_counts_jobs_times_steps_and_divides_by_the_slots():
    grid = Grid(merge(CONFIG, SUITE), CONFIG_DIR, cpus=4)
    configs = {j: fake_config(j) for j in grid.train_jobs()}
    timed = []

    def step_seconds(cfg, shape):
        timed.append(shape.label)
        return 2.0 if cfg.model.name == "hkt" else 1.0

    plan = estimate(grid, configs, step_seconds, other_seconds=OTHER, eval_cost=0.5)
    # jobs: mha, hkt main x 2 seeds, levels1 x 2 seeds; one prepare, one ngram, hkt main analysed
    assert dict(plan.counts()) == {"train": 6, "prepare": 1, "external": 1, "analyze": 2,
                                   "bench": 1, "aggregate": 1}
    assert sorted(timed) == ["listops/hkt/levels1", "listops/hkt/main", "listops/mha/main"]
    # a job: step x (10 steps + 0.5 x (2 validations x 2 batches + 3 test batches)) = step x 13.5
    train = {j.name: j.seconds for j in plan.jobs if j.rule == "train"}
    assert train["listops/mha/main/seed0"] == pytest.approx(13.5)
    assert train["listops/hkt/levels1/seed1"] == pytest.approx(27.0)
    # 4 cores: train (2 threads) 2 at once, analyze (1 thread) 4, prepare/bench (4 threads) 1
    assert plan.slots["train"] == 2 and plan.slots["analyze"] == 4 and plan.slots["bench"] == 1
    assert plan.rule_work("train") == pytest.approx(2 * 13.5 + 4 * 27.0)
    # packed on 4 cores: prepare (4 threads) 0-100; the four 27 s jobs two at a time, 100-154,
    # the two 13.5 s ones 154-167.5; the ngram (1 thread) and both analyses (1 each) from 167.5,
    # 197.5 the last; the benchmark (4 threads) 197.5-204.5; the aggregate 5 s after it all
    assert plan.wall_seconds == pytest.approx(209.5)


def test_a_downloaded_tasks_evaluations_are_counted_from_its_official_split_sizes():
    """IMDB and CIFAR-10 state no ``splits``: their validation carve and official test set count
    (once they were taken as empty, and the CPU suite's plan left out a third of their time)."""
    from hkt.train.run_config import compose_train
    from hkt.data.task_config import split_sizes
    from hkt.suite.estimate import job_seconds

    assert split_sizes(compose_train(["task=imdb"]).task) == {"train": 22500, "val": 2500,
                                                                  "test": 25000}
    assert split_sizes(compose_train(["task=cifar10"]).task) == {"train": 45000, "val": 5000,
                                                                     "test": 10000}
    assert split_sizes({"prepare": {}}) == {}
    cfg = compose_train(["task=imdb", "profile=cpu"])
    # 1000 steps; 4 validations of ceil(2500 / 32) = 79 batches; 782 test batches; eval_cost 0.5
    assert job_seconds(cfg, 1.0, 0.5) == pytest.approx(1000 + 0.5 * (4 * 79 + 782))
    cfg = compose_train(["task=cifar10", "profile=cpu", "train.eval_batches=10"])
    assert job_seconds(cfg, 2.0, 0.5) == pytest.approx(2 * (1000 + 0.5 * (4 * 10 + 313)))
    # a job's start-up, data and tracking come on top, once per job
    assert job_seconds(cfg, 2.0, 0.5, 25.0) == pytest.approx(25 + 2 * (1000 + 0.5 * (4 * 10 + 313)))


def test_longest_jobs_first_and_the_estimate_on_more_cores():
    grid = Grid(merge(CONFIG, SUITE), CONFIG_DIR, cpus=4)
    configs = {j: fake_config(j) for j in grid.train_jobs()}
    plan = estimate(grid, configs, lambda cfg, shape: 2.0 if cfg.model.name == "hkt" else 1.0,
                    other_seconds=OTHER, eval_cost=0.5)
    hkt, mha = (next(j for j in grid.train_jobs() if j.model == m) for m in ("hkt", "mha"))
    # the workflow's priority: the job's estimated seconds, so HKT (27 s) starts before MHA (13.5)
    assert plan.priority(grid.record(hkt)) == 27 > plan.priority(grid.record(mha)) == 14
    assert plan.priority("not/a/training/job.json") == 0
    # a task's data are prepared in the order of its longest training job
    assert plan.data_priority([grid.record(j) for j in grid.train_jobs()]) == 27
    assert plan.data_priority([grid.record(mha)]) == 14 and plan.data_priority([]) == 0
    threads = {r: int(grid.resources(r)["threads"]) for r in plan.slots}
    eight = plan.on_cores(8, threads)
    assert eight.slots["train"] == 4 and eight.slots["bench"] == 2 and eight.jobs == plan.jobs
    assert eight.wall_seconds < plan.wall_seconds


def test_a_step_is_timed_at_the_given_length(tmp_path):
    """The calibration times real-length batches (the task's mean, not T): the step's batch is
    that long, and never longer than T."""
    import torch

    from hkt.train.run_config import compose_train
    from hkt.train.step_timing import measure_training_step

    cfg = compose_train(["task=listops", "model=mha", "profile=smoke", "seed=0"])
    full = measure_training_step(cfg, torch.device("cpu"), steps=1, warmup=0, batch_size=2,
                                 vocab_size=16, peak=False)
    short = measure_training_step(cfg, torch.device("cpu"), steps=1, warmup=0, batch_size=2,
                                  vocab_size=16, peak=False, length=100)
    assert (full.seq_len, short.seq_len) == (int(cfg.task.max_length), 100)
    assert measure_training_step(cfg, torch.device("cpu"), steps=1, warmup=0, batch_size=2,
                                 vocab_size=16, peak=False, length=10_000).seq_len == full.seq_len


def test_gpus_limit_the_training_slots():
    suite = merge(SUITE, {"resources": {"train": {"threads": 1, "gpu": 1}}, "jobs_per_gpu": 1,
                          "node": {"gpus": 2}})  # a node with GPUs, whatever this machine has
    grid = Grid(merge(CONFIG, suite), CONFIG_DIR, cpus=16)
    configs = {j: fake_config(j) for j in grid.train_jobs()}
    plan = estimate(grid, configs, lambda cfg, shape: 1.0, other_seconds=OTHER, eval_cost=0.5,
                    gpus=2)
    assert plan.slots["train"] == 2 and plan.slots["external"] == 16
    assert plan.sharing == (1, 1.0)


def test_the_paper_suite_packs_training_jobs_on_one_gpu_with_the_h200s_slowdown():
    """One GPU, 16 cores: config.yaml's jobs_per_gpu (9) training jobs at once, each step slower
    by config/plan.yaml's gpu_sharing (the H200's 9 jobs: 1.83x); the benchmark has the GPU to
    itself. The packed suite's training is several times shorter than one job at a time."""
    from hkt.config_compose import compose
    from hkt.suite.estimate import shared_gpu_slowdown

    sharing = compose("plan", []).gpu_sharing
    assert (shared_gpu_slowdown(1, sharing), shared_gpu_slowdown(9, sharing)) == (1.0, 1.83)
    assert shared_gpu_slowdown(5, sharing) == pytest.approx(1.415)
    config = load_suite("paper").config
    packed = Grid(merge(config, {"node": {"gpus": 1}}), CONFIG_DIR, cpus=16)
    alone = Grid(merge(config, {"node": {"gpus": 1}, "jobs_per_gpu": 1}), CONFIG_DIR, cpus=16)
    plans = [estimate(g, {j: fake_config(j) for j in g.train_jobs()}, lambda cfg, shape: 1.0,
                      other_seconds={}, eval_cost=0.5, gpus=1, sharing=sharing)
             for g in (packed, alone)]
    assert [p.slots["train"] for p in plans] == [9, 1]
    assert [p.sharing for p in plans] == [(9, 1.83), (1, 1.0)]
    assert plans[0].slots["analyze"] == 16 // 4 and plans[0].slots["bench"] == 1  # 4 threads each
    # training alone (the other rules cost nothing here): n jobs of 13.5 s one at a time, against
    # ceil(n / 9) rounds of 9 at once, each step 1.83x slower
    n = len(packed.train_jobs())
    assert plans[1].wall_seconds == pytest.approx(n * 13.5)
    assert plans[0].wall_seconds == pytest.approx(-(-n // 9) * 13.5 * 1.83)
    assert "9 jobs share each GPU, each step 1.83x its time alone" in format_plan(plans[0])


def test_format_names_the_device_rules_and_total():
    plan = Plan("cpu", "cpu", "cpu (x86_64, 2 cores)",
                [JobEstimate("train", "a", 3600.0, steps=100, step_s=30.0, overhead_s=600.0),
                 JobEstimate("train", "b", 3600.0, steps=100, step_s=30.0, overhead_s=600.0),
                 JobEstimate("train", "c", 0.0, done=True),
                 JobEstimate("aggregate", "d", 60.0)],
                {"train": 2, "aggregate": 1}, 2, {"listops/hkt/main": 1234.0})
    text = format_plan(plan)
    assert text.splitlines()[0] == "suite cpu (profile cpu) on cpu (x86_64, 2 cores)"
    assert "jobs: 4 (train 3, aggregate 1); done already, costing nothing: 1" in text
    assert ("train       2 jobs to run, 2 at once: 2.0 h of work (steps 1.7 h, evaluation "
            "0 s, start-up, data and tracking 20 min)") in text
    assert "step listops/hkt/main" in text and "1234 ms" in text
    assert text.endswith("estimated wall time on this machine: 61 min (jobs packed on 2 cores)")


BUSY = {"margin": 0.5, "spread": 1.2}  # config/plan.yaml busy, as it is


def _two_jobs(overhead_s: float, load: float, cpus: int = 2) -> Plan:
    """Two 600 s training jobs (``overhead_s`` of it outside the steps), 2 at once on 2 cores,
    planned at ``load`` on a machine of ``cpus``."""
    jobs = [JobEstimate("train", n, 600.0, steps=10, step_s=(600.0 - overhead_s) / 10,
                        overhead_s=overhead_s) for n in "ab"]
    return Plan("smoke", "smoke", "cpu", jobs, {"train": 2}, 2, load=(load, cpus))


def test_a_busy_machine_is_said_and_its_wall_time_given_at_the_load():
    """Load 1 on 2 cores where the suite asks for both: each job gets 2/3 of a core, 1.5x the
    idle total for what was measured idle (the overheads); the steps, timed at that load by one
    process on the free core, the same (issue 73)."""
    from hkt.suite.busy import busy_line, plan_busy

    assert plan_busy(_two_jobs(600.0, load=0.4), BUSY) is None  # within the margin: idle
    plan = _two_jobs(600.0, load=1.0)
    assert plan.wall_seconds == pytest.approx(600.0)
    busy = plan_busy(plan, BUSY)
    assert (busy.asked, busy.low_s, busy.high_s) == (2, pytest.approx(900.0), pytest.approx(1080.0))
    plan.busy = busy
    assert format_plan(plan).endswith(
        "estimated wall time on this machine: 10 min (jobs packed on 2 cores)\n"
        "  this machine is busy: load average 1.00 over the last minute on 2 cores, where the "
        "suite's jobs ask for 2 at once; sharing them, about 15 min to 18 min while the load "
        "stays (the total above is for the cores free; config/plan.yaml busy)")
    # on 8 cores the same load leaves the suite's 2 free: not busy
    assert plan_busy(_two_jobs(600.0, load=1.0, cpus=8), BUSY) is None


def test_under_load_a_step_timed_at_that_load_slows_by_the_ratio_only():
    """Load 4 on 2 cores: the calibration's one process ran at 2/5 of a core, the suite's two
    jobs get 2/6: steps 1.2x, the idle-measured overheads 3x."""
    from hkt.suite.busy import plan_busy

    assert plan_busy(_two_jobs(0.0, load=4.0), BUSY).low_s == pytest.approx(720.0)
    assert plan_busy(_two_jobs(600.0, load=4.0), BUSY).low_s == pytest.approx(1800.0)


def test_a_shape_left_untimed_is_named_and_the_total_is_a_lower_bound():
    """Where the calibration budget stops the timing, a shape is not costed as another: its jobs
    count nothing, the shape is named, and the wall time reads "at least"."""
    grid = Grid(merge(CONFIG, SUITE), CONFIG_DIR, cpus=4)
    plan = estimate(grid, {j: fake_config(j) for j in grid.train_jobs()},
                    lambda cfg, shape: None if shape.label.endswith("levels1") else 1.0,
                    other_seconds=OTHER, eval_cost=0.5, overhead_s=5.0)
    plan.untimed = ["listops/hkt/levels1"]
    assert {j.name for j in plan.jobs if j.rule == "train" and j.seconds == 0} == {
        "listops/hkt/levels1/seed0", "listops/hkt/levels1/seed1"}
    # not even its overhead, here and as `hkt status` reads the plan file
    untimed = [j for j in plan.jobs if j.name.startswith("listops/hkt/levels1/")]
    assert all(j.cost_s == 0 and train_cost(json.loads(json.dumps(vars(j))), 0) == 0 for j in untimed)
    assert all(j.seconds > 5.0 for j in plan.jobs if j.rule == "train" and j not in untimed)
    assert "listops/hkt/levels1" not in plan.calibrated
    text = format_plan(plan)
    assert "step listops/hkt/levels1" in text and "not timed (calibration.budget_s spent)" in text
    assert "estimated wall time on this machine: at least " in text


def hkt_plan(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HKT_CONFIG_DIR": str(CONFIG_DIR)}
    env.pop("HKT_SUITE", None)
    return subprocess.run([sys.executable, "-m", "hkt.cli.main", "plan", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_plan_of_the_smoke_suite_calibrates_once_then_reads_the_cache(tmp_path):
    r = hkt_plan("--suite", "smoke", "device=cpu", "calibration.budget_s.cpu=600", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "suite smoke (profile smoke) on cpu" in r.stdout
    from hkt.workflow.suites import load_suite

    trained = len(load_suite("smoke").grid.train_jobs())  # tasks x models + ablations
    assert "jobs: " in r.stdout and f"train     {trained:3d} jobs to run" in r.stdout
    assert "estimated wall time on this machine:" in r.stdout
    assert "on another machine, 8 cores at this one's speed per core: " in r.stdout
    assert "(0 from the cache, 0 not timed)" in r.stdout and "timed listops/hkt/levels1" in r.stdout
    assert (tmp_path / "results" / "plan" / "calibration.json").is_file()
    again = hkt_plan("--suite", "smoke", "device=cpu", cwd=tmp_path)
    assert again.returncode == 0 and "timed " not in again.stdout
    n = r.stdout.split("hkt plan: ")[1].split(" shapes")[0]
    assert f"{n} shapes ({n} from the cache, 0 not timed)" in again.stdout


def test_unknown_suite_is_an_error(tmp_path):
    r = hkt_plan("--suite", "nosuch", cwd=tmp_path)
    assert r.returncode == 2 and "hkt: error: suite 'nosuch' has no config/suites/nosuch.yaml" in r.stderr


def test_the_plan_of_each_cpu_suite_points_to_the_other():
    from hkt.suite.plan import see_also, workflow_plan

    for suite, other in (("cpu", "quick"), ("quick", "cpu")):
        text = workflow_plan(load_suite(suite), plan=None)
        assert text.startswith(f"hkt plan: suite {suite}: jobs ")
        assert f"to see it now: `hkt plan --suite {suite}`" in text
        assert f"another suite: {other}, " in text
        assert f"`--config suite={other}`, `hkt plan --suite {other}`" in text
    assert see_also(load_suite("smoke").config) == ""
    # config files that name no suite: the one stand-in, and how to plan such a file
    text = workflow_plan(load_suite(NO_SUITE), plan=None)
    assert text.startswith("hkt plan: suite none: jobs ") and "`hkt plan --suite FILE`" in text


def test_the_plan_is_of_the_suite_it_is_given(tmp_path, monkeypatch):
    """make_plan plans the Suite it is handed (its Grid, name and profile), resolving nothing."""
    import hkt.suite.estimate as estimate_module
    import hkt.suite.plan as plan_module
    from hkt.config_compose import compose

    suite = load_suite("smoke", overrides={"results_dir": str(tmp_path)})
    monkeypatch.setattr(plan_module, "load_suite", None)  # no second resolution
    monkeypatch.setattr(estimate_module, "cached_timer", lambda *a, **k: (
        lambda cfg, shape: 0.01, {"cached": 0, "untimed": []}))
    plan = estimate_module.make_plan(compose("plan", ["device=cpu"]), suite)
    assert (plan.suite, plan.profile) == ("smoke", "smoke")
    assert plan.counts()["train"] == len(suite.grid.train_jobs())
    assert {j.output for j in plan.jobs if j.rule == "train"} == {
        suite.grid.record(j) for j in suite.grid.train_jobs()}


def test_the_plan_sets_a_suites_published_wall_time_beside_its_estimate():
    from hkt.suite.plan import published_line

    if not (ROOT / "docs" / "results" / "cpu" / "plan" / "sessions.json").is_file():
        pytest.skip("docs/results/cpu/ holds no published sessions")
    line = published_line({"published": "docs/results/cpu"})
    assert "docs/results/cpu/ took 9.7 h over 9 runs of the workflow, 0.95x the 10.3 h planned" in line
    assert published_line({}) == "" and published_line({"published": "docs/results/none"}) == ""


def test_runs_added_to_a_publication_are_reported_apart_from_its_planned_run(tmp_path):
    """A publication grown by `publish_results.py --add` keeps its plan-vs-wall ratio of the
    suite's own run; the added runs' sessions (whose estimate was the whole suite's) come apart."""
    import json

    from hkt.suite.plan import published_line

    (tmp_path / "plan").mkdir()
    own = {"started": 0.0, "ended": 3600.0, "last_seen": 3600.0, "host": "h", "pid": 1,
           "estimate_s": 3000.0, "ok": True}
    added = {"started": 9000.0, "ended": 9900.0, "last_seen": 9900.0, "host": "h", "pid": 2,
             "estimate_s": 7000.0, "ok": True, "adds": ["listops/s4d/main/seed0",
                                                        "listops/s4d/main/seed1"]}
    (tmp_path / "plan" / "sessions.json").write_text(json.dumps({"sessions": [own, added]}))
    line = published_line({"published": str(tmp_path)})
    assert line.startswith("\npublished run (the publication's own, on the machine that made it): ")
    assert "took 60 min over 1 runs of the workflow, 1.20x the 50 min planned then" in line
    assert "; 2 runs added later took 15 min" in line
    again = {**{k: v for k, v in added.items() if k != "adds"}, "started": 20000.0,
             "ended": 21800.0, "last_seen": 21800.0, "pid": 3,
             "redoes": added["adds"]}  # publish_results.py --redo: runs made again
    (tmp_path / "plan" / "sessions.json").write_text(json.dumps({"sessions": [own, again]}))
    line = published_line({"published": str(tmp_path)})
    assert "took 60 min over 1 runs of the workflow, 1.20x the 50 min planned then" in line
    assert "; 2 runs made again later took 30 min" in line and "runs added" not in line


# --------------------------------------------------------------- the GPU line (issue 53)
def _s4_recipe():
    from hkt.config_compose import compose
    from hkt.suite.plan import job_seconds
    from hkt.workflow.job_configs import job_configs

    cfg = compose("plan", [])
    suite = load_suite("s4_recipe")
    return (cfg, suite, job_configs(suite.grid),
            lambda job_cfg, step_s: job_seconds(job_cfg, step_s, float(cfg.eval_cost)))


def test_the_gpu_time_is_the_published_step_scaled_by_the_step_times_here():
    """s4_recipe on a CPU: its one job's steps at S4D's published H200 step (config/plan.yaml
    gpu_measured), times its step here over the published run's step here, plus evaluations."""
    from hkt.suite.plan import gpu_training_seconds

    cfg, suite, configs, seconds_of = _s4_recipe()
    measured = OmegaConf.to_container(cfg.gpu_measured)
    assert measured["models"]["s4d"]["ms_per_step"] == 50  # docs/results/s5_recipe: 20 steps/s
    # fake step times here: the recipe's 6 x 256 at batch 32 twice the published 8 x 128's
    times = {"published s4d": 4.0, "listops/s4d/main": 8.0}
    seconds, missing = gpu_training_seconds(suite.grid, configs, measured,
                                            lambda c, shape: times[shape.label], seconds_of)
    (job,) = suite.grid.train_jobs()
    assert missing == [] and seconds == pytest.approx(seconds_of(configs[job], 0.050 * 8.0 / 4.0))
    assert configs[job].train.max_steps * 0.1 < seconds < configs[job].train.max_steps * 0.11
    # a model without a published GPU step is left out, and named
    measured["models"].pop("s4d")
    assert gpu_training_seconds(suite.grid, configs, measured, lambda c, s: 1.0, seconds_of) == \
        (0.0, ["s4d"])


def test_the_gpu_line_names_its_sources():
    from hkt.suite.plan import gpu_line

    cfg, suite, configs, seconds_of = _s4_recipe()
    measured = OmegaConf.to_container(cfg.gpu_measured)
    line = gpu_line(measured, suite.grid, configs, lambda c, shape: 1.0, seconds_of)
    assert line.startswith("  on another machine, one H200: the training jobs alone (not the other "
                           "rules) in ")
    assert line.endswith("from published step times (s4d 50 ms/step "
                         "(docs/results/s5_recipe/README.md)) scaled by the step times here")
    measured["models"].pop("s4d")
    assert gpu_line(measured, suite.grid, configs, lambda c, shape: 1.0, seconds_of) == ""
