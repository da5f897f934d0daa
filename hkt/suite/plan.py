"""``hkt plan [--suite NAME] [KEY=VALUE ...]``: the plan of a suite on this machine, and how long it
would take. The suite (``auto``, a name in config/suites/ or a file) is made once
(:func:`hkt.workflow.suites.load_suite`) and its grid planned; the workflow hands its own.

Prints the device, the jobs per rule (and how many are done), the measured step time of every
distinct shape, what the work left is made of, and the estimated wall time, all from the one cost
model :mod:`hkt.suite.estimate` (which ``hkt doctor``, the workflow's start banner and ``hkt status``
count with too): jobs already done cost nothing, a training job with a checkpoint only its steps
left. Without CUDA it also gives the time on a GPU from published step times (:func:`gpu_line`).
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hkt.suite.calibration import Shape, cached_timer, calibration_file, shape_of
from hkt.suite.estimate import Plan, job_overhead, job_seconds, make_plan, write_plan
from hkt.provenance import NO_SUITE
from hkt.suite.busy import busy_line, plan_busy
from hkt.workflow.grid import RULE_ORDER, suite_plan_file
from hkt.workflow.sessions import duration
from hkt.workflow.suites import Suite, is_named_suite, load_suite

__all__ = ["gpu_training_seconds", "gpu_line", "calibrated_plan", "format_plan",
           "job_counts", "log_advice", "plan_command", "workflow_plan", "add_arguments", "run"]


def format_plan(plan: Plan) -> str:
    """The plan as the workflow and ``hkt plan`` print it: jobs per rule (done ones apart), every
    distinct shape's measured step, what the work left is made of, and the wall time."""
    counts, done = plan.counts(), plan.done()
    lines = [f"suite {plan.suite} (profile {plan.profile}) on {plan.device}",
             f"  jobs: {sum(counts.values())} ("
             + ", ".join(f"{r} {counts[r]}" for r in RULE_ORDER if counts.get(r)) + ")"
             + (f"; done already, costing nothing: {sum(done.values())}" if done else "")]
    for label, ms in plan.calibrated.items():
        lines.append(f"  step {label:<28} {ms:8.0f} ms (measured, at the job's batch)")
    for label in plan.untimed:
        lines.append(f"  step {label:<28} not timed (calibration.budget_s spent): its jobs are "
                     "not counted")
    side, slow = plan.sharing
    train = [j for j in plan.jobs if j.rule == "train" and not j.done and j.step_s]
    for rule in RULE_ORDER:
        if not counts.get(rule):
            continue
        left = counts[rule] - done.get(rule, 0)
        if not left:
            continue
        head = f"  {rule:<9} {left:3d} jobs to run, {plan.slots[rule]} at once: " \
               f"{duration(plan.rule_work(rule))} of work"
        if rule == "train":
            resumed = [j for j in train if j.done_steps]
            steps = sum(j.step_s * (j.steps - j.done_steps) for j in train)
            evals = sum(j.step_s * j.eval_steps * (1 - j.done_steps / max(1, j.steps)) for j in train)
            over = sum(j.overhead_s for j in train)
            how = (f" (steps {duration(steps)}, evaluation {duration(evals)}, start-up, data "
                   f"and tracking {duration(over)}"
                   + (f"; {len(resumed)} resume from a checkpoint" if resumed else "") + ")")
            if side > 1:
                how += (f"; {side} jobs share each GPU, each step {slow:.2f}x its time alone: "
                        "config/plan.yaml gpu_sharing")
            if plan.pace.train:
                how += f"; at {plan.pace.train:.2f}x the measured step, as the steps that ran went"
        else:
            how = " (measured per job, config/plan.yaml other_rules)"
            if plan.pace.rules.get(rule):
                how += f"; at {plan.pace.rules[rule]:.2f}x, as its finished jobs took"
        lines.append(head + how)
    bound = "at least " if plan.untimed else ""
    lines.append(f"  estimated wall time on this machine: {bound}{duration(plan.wall_seconds)} "
                 f"(jobs packed on {plan.cores} cores)")
    if plan.busy:
        lines.append(busy_line(plan.busy))
    return "\n".join(lines)


def job_counts(grid: Any) -> str:
    """The jobs per rule of a grid, without timing anything (what a dry run prints)."""
    counts = {"prepare": len({j.task for j in grid.train_jobs() + grid.external_jobs()}),
              "train": len(grid.train_jobs()), "external": len(grid.external_jobs()),
              "analyze": len(grid.analysis_jobs()), "bench": int(grid.bench_enabled),
              "aggregate": 1}
    return ", ".join(f"{r} {n}" for r, n in counts.items() if n)


def see_also(config: Mapping[str, Any]) -> str:
    """The suites that ``config``'s ``see_also`` points to, one line each ("" for none)."""
    return "".join(f"\n  another suite: {name}, {why}: `--config suite={name}`, "
                   f"`hkt plan --suite {name}`" for name, why in (config.get("see_also") or {}).items())


def published_line(config: Mapping[str, Any]) -> str:
    """What the suite's publication (its ``published`` directory) measured: the wall time over
    its runs of the workflow against the plan made at its first start ("" for none)."""
    from hkt.config_compose import config_dir
    from hkt.workflow.sessions import duration, load_sessions, session_seconds

    where = config.get("published")
    every = load_sessions(config_dir().parent / where) if where else []
    sessions = [s for s in every if not s.get("adds") and not s.get("redoes")]  # the suite's own run
    if not sessions:
        return ""
    wall = sum(session_seconds(s, now=0.0, host="") for s in sessions)
    first = float(sessions[0].get("estimate_s") or 0.0)
    against = f", {wall / first:.2f}x the {duration(first)} planned then" if first else ""
    added = [s for s in every if s.get("adds")]
    redone = [s for s in every if s.get("redoes")]  # published runs made again (publish --redo)
    more = "".join(
        f"; {len({r for s in those for r in s[key]})} runs {what} later took "
        f"{duration(sum(session_seconds(s, now=0.0, host='') for s in those))}"
        for those, key, what in ((added, "adds", "added"), (redone, "redoes", "made again")) if those)
    return (f"\npublished run (the publication's own, on the machine that made it): {where}/ "
            f"took {duration(wall)} over {len(sessions)} runs of the workflow{against}{more} "
            f"({where}/plan/sessions.json)")


def log_advice(grid: Any) -> str:
    """Where each job's log is, and how to follow one."""
    return (f"logs: {grid.results}/logs/RULE/... (one per job; a training job's is "
            f"{grid.log('train', 'TASK/MODEL/VARIANT/seedS')}); follow one with "
            f"`tail -f {shlex.quote(grid.results)}/logs/train/<task>/<model>/main/seed0.log`")


def calibrated_plan(suite: Suite) -> Plan:
    """The plan of the workflow's suite with config/plan.yaml's settings (cached calibrations,
    else a short fresh one), as the workflow makes it once at its start."""
    from hkt.config_compose import compose

    cfg = compose("plan", [])
    plan = make_plan(cfg, suite, log=lambda s: print(s, flush=True))
    plan.busy = plan_busy(plan, cfg.busy)
    return plan


def plan_command(suite: Suite, configfiles: Sequence[str | Path] = ()) -> str:
    """The ``hkt plan`` command that plans what the workflow read: the suite's name, then the
    ``--configfile`` files it was given, each a ``--suite`` merged in order; the files alone
    where the suite is theirs (a cut, or no ``config/suites/`` file of its name)."""
    from hkt.config_compose import config_dir

    named = is_named_suite(suite.name, config_dir())
    words = ([suite.name] if named or not configfiles else []) + [str(f) for f in configfiles]
    if not words or words == [NO_SUITE]:
        return "`hkt plan --suite FILE`, FILE your config file,"
    return "`hkt plan " + " ".join(f"--suite {shlex.quote(w)}" for w in words) + "`"


def workflow_plan(suite: Suite, *, plan: Plan | None, configfiles: Sequence[str | Path] = ()) -> str:
    """What the workflow prints: the suite's jobs per rule and where the logs are and, given its
    calibrated ``plan`` (:func:`calibrated_plan`), the plan with its ETA, also written for
    ``hkt status``; without one (the workflow just read, or a dry run), how to get the ETA
    (:func:`plan_command` of the ``--configfile`` files given)."""
    grid = suite.grid
    if plan is None:
        command = plan_command(suite, configfiles)
        return (f"hkt plan: suite {suite.name}: jobs {job_counts(grid)}; the estimated "
                "wall time follows when jobs start (not on a dry run); to see it now: "
                f"{command} (a short calibration, cached for the "
                f"workflow's start){see_also(suite.config)}")
    write_plan(plan, grid, suite_plan_file(grid.results))
    return (f"hkt plan (what is left of the suite: jobs done cost nothing, checkpointed ones "
            f"only their steps left):\n{format_plan(plan)}"
            f"{see_also(suite.config)}\n"
            f"{log_advice(grid)}\n"
            f"where it stands, any time: `hkt status {shlex.quote(grid.results)}` "
            "(--watch to follow it)\n"
            f"to stop it, from any terminal: `hkt stop {shlex.quote(grid.results)}` (every "
            "training job checkpoints; the same command resumes)")


# --------------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print a suite's device, jobs per rule and estimated wall time on this "
                          "machine, from a short measured calibration (settings: config/plan.yaml; "
                          "cached in RESULTS_DIR/plan/).")
    parser.add_argument("--suite", action="append",
                        help="auto (the workflow's choice), a name in config/suites/ or a file "
                             "(default: config/plan.yaml's suite); given again, a file merged "
                             "over it, in order, as Snakemake's --configfile (a cut: --suite "
                             "config/suites/cpu.yaml --suite config/cuts/cpu.yaml)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="overrides of config/plan.yaml, e.g. fresh=true calibration.steps.cpu=3")


# --- a suite's training time on a GPU, from step times published there (issue 53) -----------
# ``gpu_measured`` in config/plan.yaml holds, per model, the measured milliseconds per step of
# one published GPU run and the overrides that compose that run. A job's step on that GPU is its
# model's published step times the ratio of the job's step time to the published run's, both
# timed on this machine the same way (:mod:`hkt.suite.estimate`); the jobs share the GPU
# ``jobs_per_gpu`` at a time, as the published runs did. A GPU gains more on big shapes than a
# CPU, so the ratio leans long; a model without a published step is left out, and named.

StepSeconds = Callable[[Any, Shape], float]   # (composed config, shape) -> seconds per step here
JobSeconds = Callable[[Any, float], float]    # (composed config, seconds per step) -> job seconds


def gpu_training_seconds(grid: Any, configs: Mapping[Any, Any], measured: Mapping[str, Any],
                         step_seconds: StepSeconds, job_seconds: JobSeconds
                         ) -> tuple[float, list[str]]:
    """The training jobs' wall time on the GPU of ``measured``, and the models it has no
    published step for (left out)."""
    from hkt.train.run_config import load_config

    models = measured.get("models") or {}
    total, missing, done = 0.0, [], 0
    published: dict[str, float] = {}  # model -> the published run's step time here
    for job in grid.train_jobs():
        ref = models.get(job.model)
        if ref is None:
            if job.model not in missing:
                missing.append(job.model)
            continue
        if job.model not in published:
            ref_cfg = load_config(list(ref["overrides"]))
            published[job.model] = step_seconds(
                ref_cfg, shape_of(ref_cfg, int(ref_cfg.train.batch_size), f"published {job.model}"))
        cfg = configs[job]
        mine = step_seconds(cfg, shape_of(cfg, int(cfg.train.batch_size),
                                          f"{job.task}/{job.model}/{job.variant}"))
        if mine is None or not published[job.model]:  # not timed here (calibration budget)
            if job.model not in missing:
                missing.append(job.model)
            continue
        total += job_seconds(cfg, float(ref["ms_per_step"]) / 1000 * mine / published[job.model])
        done += 1
    return total / max(1, min(done, int(grid.jobs_per_gpu))), missing


def gpu_line(measured: Mapping[str, Any], grid: Any, configs: Mapping[Any, Any],
             step_seconds: StepSeconds, job_seconds: JobSeconds) -> str:
    """The line ``hkt plan`` prints: the training time on the GPU of ``measured`` and its sources;
    "" when none of the suite's models has a published step."""
    seconds, missing = gpu_training_seconds(grid, configs, measured, step_seconds, job_seconds)
    models = sorted({j.model for j in grid.train_jobs()} - set(missing))
    if not models:
        return ""
    sources = ", ".join(f"{m} {measured['models'][m]['ms_per_step']} ms/step "
                        f"({measured['models'][m]['source']})" for m in models)
    left = f"; not counted: {', '.join(missing)} (no published GPU step time)" if missing else ""
    return (f"  on another machine, {measured['device']}: the training jobs alone (not the other "
            f"rules) in {duration(seconds)}, from published step times ({sources}) scaled by the "
            f"step times here{left}")


def gpu_line_of(cfg: Any, suite: Suite) -> str:
    """The line of :func:`gpu_line` ("" without ``gpu_measured``)."""
    from hkt.device import resolve_device
    from hkt.workflow.job_configs import job_configs

    measured = cfg.get("gpu_measured")
    if not measured:
        return ""
    device = resolve_device(str(cfg.device), source="config key 'device'")
    timer, _ = cached_timer(calibration_file(suite.grid.results), device, cfg.calibration,
                            int(suite.grid.resources("train")["threads"]),
                            on_measure=_say_timed)
    return gpu_line(measured, suite.grid, job_configs(suite.grid), timer,
                    lambda job_cfg, step_s: job_seconds(job_cfg, step_s, float(cfg.eval_cost),
                                                        job_overhead(cfg, "cuda")))


def _say_timed(label: str, ms: float) -> None:
    """A step timed here for the GPU line: a published GPU run's (``published MODEL``), which
    scales that run's GPU step to the suite's jobs, or a suite shape the plan had not timed."""
    if label.startswith("published "):
        print(f"  timed here, the {label} GPU run's step at its sizes: {ms:.0f} ms/step (to scale "
              "its published GPU step time to this suite's jobs)")
    else:
        print(f"  timed {label}: {ms:.0f} ms/step")


def run(args: argparse.Namespace) -> int:
    from hkt.config_compose import compose

    overrides = list(args.overrides) + ([f"suite={args.suite[0]}"] if args.suite else [])
    cfg = compose("plan", overrides)
    start = time.perf_counter()
    suite = load_suite([str(cfg.suite), *(args.suite or [])[1:]])  # once: auto's choice and CUDA's
    print(f"hkt plan of suite {suite.name} ({suite.reason})", flush=True)
    plan = make_plan(cfg, suite, log=lambda s: print(s, flush=True))
    plan.busy = plan_busy(plan, cfg.busy)
    print(format_plan(plan))
    if "cuda" not in plan.device:
        threads = {r: int(suite.grid.resources(r)["threads"]) for r in RULE_ORDER}
        for cores in cfg.get("scale_cores") or []:
            print(f"  on another machine, {cores} cores at this one's speed per core: "
                  f"{duration(plan.on_cores(int(cores), threads).wall_seconds)} (config/plan.yaml "
                  "scale_cores)")
    gpu = gpu_line_of(cfg, suite) if "cuda" not in plan.device else ""
    for line in (gpu, published_line(suite.config), see_also(suite.config)):
        if line:
            print(line.lstrip("\n"))
    print(f"hkt plan: {len(plan.calibrated)} shapes ({plan.cached} from the cache, "
          f"{len(plan.untimed)} not timed) in "
          f"{time.perf_counter() - start:.0f} s")
    return 0
