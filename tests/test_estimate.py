"""The one cost model (hkt/suite/estimate.py): `hkt plan`, `hkt doctor`, the workflow's start banner
and `hkt status` give one figure for one results directory; a restart counts the jobs done and
the steps checkpointed; every distinct shape is costed by its own measurement; a training job's
cost has its start-up, data, tracking and evaluation terms. Step times are faked (nothing is
timed), results directories are small fakes of records, checkpoints and logs."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest
import torch

from hkt.config_compose import compose
from hkt.suite.estimate import JobEstimate, estimate, make_plan, train_cost
from hkt.workflow.job_configs import job_configs as COMPOSE
from hkt.workflow.sessions import duration
from hkt.workflow.suites import load_suite

STEPS: dict[str, float] = {}  # shape label -> seconds per step, distinct per shape
COMPOSED: dict = {}  # Job -> its composed config, once for the module (Hydra is slow)


def cached_job_configs(grid, jobs=None):
    wanted = list(grid.train_jobs() if jobs is None else jobs)
    missing = [j for j in wanted if j not in COMPOSED]
    if missing:
        COMPOSED.update(COMPOSE(grid, missing))
    return {j: COMPOSED[j] for j in wanted}


def fake_step(cfg, shape) -> float:
    """A distinct step time per shape label (0.1 s, 0.2 s, ... in the order first asked)."""
    return STEPS.setdefault(shape.label, 0.1 * (len(STEPS) + 1))


@pytest.fixture
def smoke(tmp_path, monkeypatch):
    """The smoke suite in ``tmp_path/results`` (its own relative results_dir), with the
    calibration faked."""
    STEPS.clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("hkt.suite.estimate.cached_timer", lambda *a, **k: (
        fake_step, {"cached": 0, "untimed": []}))
    monkeypatch.setattr("hkt.workflow.job_configs.job_configs", cached_job_configs)
    return load_suite("smoke")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def checkpoint(record: Path, step: int, samples_per_s: float | None = None) -> None:
    """What a stopped training job leaves: checkpoints/last.pt and the history.csv beside it."""
    write(record.parent / "checkpoints" / "last.pt", "not read: the step is history.csv's")
    rate = "" if samples_per_s is None else str(samples_per_s)
    rows = "".join(f"{s},1.0,0.5,0.001,{rate},," + "\n" for s in (step // 2, step))
    write(record.parent / "history.csv", "step,train_loss,train_acc,lr,samples_per_s,val_loss,val_acc\n"
          + rows)


def loadable_record() -> dict:
    """A finished run's record that loads (one that does not is no finished run: it is redone),
    without a measured pace."""
    from test_report_aggregate import make_record

    return make_record(ms_per_step=None)


def half_done(suite) -> tuple[list, list]:
    """The suite's first training job finished (its record), its second checkpointed half-way,
    its first task's data prepared; returns (train jobs, their records)."""
    grid = suite.grid
    jobs = grid.train_jobs()
    records = [Path(grid.record(j)) for j in jobs]
    write(records[0], json.dumps(loadable_record()))
    checkpoint(records[1], 6)
    write(Path(grid.data_files(jobs[0].task)[-1]), "{}")
    return jobs, records


def test_plan_doctor_banner_and_status_print_one_figure(smoke, capsys):
    """One results directory, part done: `hkt plan`'s total, the doctor's estimate, the
    workflow's start banner and `hkt status`'s remaining time are one number."""
    from hkt.suite import plan as plan_command
    from hkt.suite.doctor import _check_estimate
    from hkt.suite.doctor.context import Context
    from hkt.suite.standing import settings, suite_status
    from hkt.suite.status import format_status

    half_done(smoke)
    plan = make_plan(compose("plan", ["device=cpu"]), smoke)
    figure = duration(plan.wall_seconds)
    assert plan.wall_seconds > 0 and sum(plan.done().values()) == 2  # a run and a prepare

    plan_command.run(argparse.Namespace(suite=["smoke"], overrides=["device=cpu"]))  # --suite smoke
    assert f"estimated wall time on this machine: {figure} (jobs packed on" in capsys.readouterr().out

    (doctor,) = _check_estimate(Context(compose("doctor", []), smoke, torch.device("cpu")))
    assert doctor.detail.startswith(f"the suite here: about {figure} (")

    banner = plan_command.workflow_plan(smoke, plan=plan_command.calibrated_plan(smoke))
    assert f"estimated wall time on this machine: {figure} (jobs packed on" in banner

    status = suite_status(Path("results"), settings([]), now=time.time())
    assert status.remaining_s == pytest.approx(plan.wall_seconds)
    assert f"remaining: about {figure} on " in format_status(status)


def test_a_restart_counts_finished_jobs_and_checkpointed_steps(smoke):
    """A finished job costs nothing; a checkpointed one its overhead and the steps after its
    checkpoint (with their share of the validations); the plan and status count the same."""
    from hkt.suite.estimate import write_plan
    from hkt.suite.standing import settings, suite_status

    jobs, records = half_done(smoke)
    fresh = make_plan(compose("plan", ["device=cpu"]), load_suite(
        "smoke", overrides={"results_dir": "elsewhere"}))
    plan = make_plan(compose("plan", ["device=cpu"]), smoke)
    by_output = {j.output: j for j in plan.jobs}
    done, resumed = by_output[str(records[0])], by_output[str(records[1])]
    assert done.done and done.seconds == 0
    assert resumed.done_steps == 6 and resumed.steps == 12
    whole = resumed.overhead_s + resumed.step_s * (resumed.steps + resumed.eval_steps)
    assert resumed.cost_s == pytest.approx(whole)
    assert resumed.seconds == pytest.approx(resumed.overhead_s + (whole - resumed.overhead_s) / 2)
    assert plan.wall_seconds < fresh.wall_seconds
    write_plan(plan, smoke.grid, Path("results/plan/suite.json"))
    status = suite_status(Path("results"), settings([]), now=time.time())
    state = {(s.rule, s.name): s for s in status.jobs}
    assert state["train", done.name].state == "done"
    assert state["train", resumed.name].remaining_s == pytest.approx(resumed.seconds)
    # the job goes on to step 9 after the plan was written: status counts from there
    checkpoint(records[1], 9)
    later = {(s.rule, s.name): s
             for s in suite_status(Path("results"), settings([]), now=time.time()).jobs}
    assert later["train", resumed.name].remaining_s == pytest.approx(
        resumed.overhead_s + (whole - resumed.overhead_s) / 4)


def test_steps_that_ran_are_measured_steps(smoke):
    """Steps logged in a checkpoint's history.csv give the pace: status never says that no
    training step has run after they did, and plan and status scale the rest by it."""
    from hkt.suite.estimate import write_plan
    from hkt.suite.standing import settings, suite_status
    from hkt.suite.status import format_status

    jobs, records = half_done(smoke)
    plan0 = make_plan(compose("plan", ["device=cpu"]), smoke)
    step_s = next(j for j in plan0.jobs if j.output == str(records[1])).step_s
    batch = next(j for j in plan0.jobs if j.output == str(records[1])).batch
    checkpoint(records[1], 6, samples_per_s=batch / (2 * step_s))  # steps at twice the plan's time
    plan = make_plan(compose("plan", ["device=cpu"]), smoke)
    assert plan.pace.train == pytest.approx(2.0)
    write_plan(plan, smoke.grid, Path("results/plan/suite.json"))
    status = suite_status(Path("results"), settings([]), now=time.time())
    assert status.speed == pytest.approx(2.0)
    text = format_status(status)
    assert "training steps take 2.00x the plan's time" in text and "no training step" not in text
    assert status.remaining_s == pytest.approx(plan.wall_seconds)


def test_each_distinct_shape_is_costed_by_its_own_measurement(smoke):
    """Every (task, model, variant) shape of the smoke suite (the ablations included) is timed,
    once, and each training job costs its own shape's step: levels4 is not costed as main."""
    grid = smoke.grid
    asked: list[str] = []

    def step(cfg, shape):
        asked.append(shape.label)
        return fake_step(cfg, shape)

    plan = estimate(grid, cached_job_configs(grid), step, other_seconds={}, eval_cost=0.0)
    labels = {f"{j.task}/{j.model}/{j.variant}" for j in grid.train_jobs()}
    assert sorted(asked) == sorted(labels)  # each shape once
    for j in plan.jobs:
        if j.rule == "train":
            assert j.step_s == pytest.approx(STEPS[j.name.rsplit("/", 1)[0]]), j.name
    assert plan.calibrated["listops/hkt/levels4"] != plan.calibrated["listops/hkt/main"]


def test_a_training_jobs_cost_has_start_up_data_tracking_and_evaluation_terms():
    """config/plan.yaml names each overhead term per device type, and the cost adds them to the
    steps and their evaluations."""
    cfg = compose("plan", [])
    terms = set(cfg.job_overhead)
    assert terms == {"startup_s", "data_s", "tracking_s"}
    for term in terms:
        assert float(cfg.job_overhead[term].cpu) > 0 and float(cfg.job_overhead[term].cuda) > 0
    assert float(cfg.eval_cost) > 0
    job = JobEstimate("train", "t", 0.0, steps=100, step_s=0.5, overhead_s=30.0, eval_steps=20.0)
    assert train_cost(job) == pytest.approx(30 + 0.5 * 120)
    assert train_cost(job, 75) == pytest.approx(30 + 0.5 * 120 / 4)
    assert train_cost(vars(job), 100) == pytest.approx(30)  # suite.json's dict reads the same
    for profile in ("smoke", "cpu", "paper"):  # every rule costs something, on every profile
        rules = cfg.other_rules.get(profile) or cfg.other_rules.default
        assert set(rules) == {"prepare", "external", "analyze", "bench", "aggregate"}


def test_a_baseline_added_to_a_finished_suite_costs_itself_and_the_aggregate(smoke):
    """Every output there but one new external baseline's record: the plan and status count that
    job and the aggregate that reads it (its summary exists, but the workflow makes it again)."""
    from hkt.suite.estimate import write_plan
    from hkt.suite.standing import settings, suite_status

    first = make_plan(compose("plan", ["device=cpu"]), smoke)
    added = next(j for j in first.jobs if j.rule == "external")
    for j in first.jobs:
        if j is not added:
            write(Path(j.output), json.dumps(loadable_record()))
    plan = make_plan(compose("plan", ["device=cpu"]), smoke)
    left = {(j.rule, j.name) for j in plan.jobs if not j.done}
    assert left == {("external", added.name), ("aggregate", "aggregate")}
    assert plan.wall_seconds == pytest.approx(added.cost_s + next(
        j.cost_s for j in plan.jobs if j.rule == "aggregate"))
    write_plan(plan, smoke.grid, Path("results/plan/suite.json"))
    status = suite_status(Path("results"), settings([]), now=time.time())
    assert {(j.rule, j.name) for j in status.jobs if j.state != "done"} == left
    assert status.remaining_s == pytest.approx(plan.wall_seconds)


def test_a_checkpointed_job_resumes_before_any_fresh_one(smoke):
    """After `hkt stop` (issue 64): the workflow's priority puts every training job with a
    checkpoint before every job that starts from nothing, however long those are; among fresh
    jobs the longest still goes first."""
    jobs, records = half_done(smoke)
    plan = make_plan(compose("plan", ["device=cpu"]), smoke)
    by_output = {j.output: j for j in plan.jobs}
    resumed = plan.priority(str(records[1]))
    fresh = [str(r) for r in records[2:]]
    assert by_output[str(records[1])].done_steps == 6
    assert max(by_output[r].seconds for r in fresh) > by_output[str(records[1])].seconds
    assert resumed > max(plan.priority(r) for r in fresh)
    longest = max(fresh, key=lambda r: by_output[r].seconds)
    assert plan.priority(longest) == max(plan.priority(r) for r in fresh)
    assert plan.priority(str(records[0])) == 0  # done
