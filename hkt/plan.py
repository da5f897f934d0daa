"""``hkt plan [--suite NAME] [KEY=VALUE ...]``: the plan of a suite on this machine, and how long it
would take. The suite (``auto``, a name in config/suites/ or a file) is made once
(:func:`hkt.workflow.suites.load_suite`) and its grid planned; the workflow hands its own.

Prints the device, the jobs per rule, and an estimated wall time. The estimate is measured, not
guessed, where it matters: a few training steps of every distinct shape of the suite (task
length, model and variant geometry, batch) are timed on this device, on batches of the task's
mean training length (``calibration.mean_length``: real batches are bucketed, not full-length), with
:func:`hkt.step_timing.measure_training_step` (``hkt train``'s step, as ``hkt doctor`` times it), at the threads each training
job gets. A job's time is its ``max_steps`` times that, plus its evaluations (validation every
``eval_every`` steps, the test set once; forward-only batches at ``eval_cost`` of a step).
The other rules (prepare, baselines, analyses, benchmark, aggregate) get fixed allowances per
job from ``config/plan.yaml``. Each rule's total is divided by the jobs that can run at once
(the cores over the rule's threads, or the GPUs' slots: ``jobs_per_gpu`` training jobs share a
GPU, each step slower by ``gpu_sharing`` in config/plan.yaml), and rules are added one after the
other: the workflow overlaps them somewhat, so the estimate leans long.

Without CUDA it also gives the time on a GPU from published step times (:func:`gpu_line`).

Calibrations (:mod:`hkt.calibration`) are cached per (device, torch version, shape) in
``RESULTS_DIR/plan/calibration.json``, so the workflow's start-up and a second ``hkt plan``
reuse them.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hkt.calibration import Shape, cached_timer, calibration_file, shape_of
from hkt.provenance import NO_SUITE
from hkt.workflow.grid import RULE_ORDER, suite_plan_file
from hkt.workflow.sessions import duration
from hkt.workflow.suites import Suite, load_suite

__all__ = ["JobEstimate", "Plan", "estimate", "gpu_training_seconds", "gpu_line",
           "shared_gpu_slowdown", "calibrated_plan", "format_plan", "other_jobs", "write_plan", "suite_plan_file", "job_counts", "log_advice",
           "workflow_plan", "make_plan", "add_arguments", "run"]


@dataclass
class JobEstimate:
    """One job of the suite: its estimate, and the files that tell its state (``hkt status``)."""

    rule: str
    name: str
    seconds: float
    output: str = ""     # a file the job writes last (its presence: done)
    log: str = ""        # its log (attempt headers, progress lines)
    threads: int = 1     # the cores it takes
    steps: int = 0       # training steps (train jobs)
    step_s: float = 0.0  # the calibrated seconds per step (train jobs)


@dataclass
class Plan:
    """A suite's jobs with their estimated seconds, and the slots each rule runs in."""

    suite: str
    profile: str
    device: str
    jobs: list[JobEstimate]
    slots: dict[str, int]                  # jobs of a rule that run at once
    calibrated: dict[str, float] = field(default_factory=dict)  # shape label -> ms/step (job batch)
    sharing: tuple[int, float] = (1, 1.0)  # training jobs side by side on one GPU, and their slowdown
    cached: int = 0                        # shapes whose timing came from the cache
    untimed: list[str] = field(default_factory=list)  # shapes over the calibration budget

    def priority(self, output: str) -> int:
        """A training job's Snakemake priority: its estimated seconds (longest first; 0 when
        ``output`` is no training job of the plan)."""
        return next((round(j.seconds) for j in self.jobs if j.rule == "train" and j.output == output),
                    0)

    def data_priority(self, outputs: Iterable[str]) -> int:
        """A task's ``prepare`` priority: the highest of the training jobs that wait on its data
        (``outputs``: their records), so the data of the longest jobs are ready first."""
        return max((self.priority(o) for o in outputs), default=0)

    def counts(self) -> Counter:
        return Counter(j.rule for j in self.jobs)

    def rule_wall(self, rule: str) -> float:
        """Seconds a rule takes: its total over its slots, at least its longest job."""
        times = [j.seconds for j in self.jobs if j.rule == rule]
        if not times:
            return 0.0
        return max(sum(times) / self.slots.get(rule, 1), max(times))

    @property
    def wall_seconds(self) -> float:
        return sum(self.rule_wall(r) for r in self.counts())

    def on_cores(self, cores: int, threads: Mapping[str, int]) -> "Plan":
        """The same jobs on a node of ``cores`` CPUs at the same speed per core: each rule's
        slots are ``cores`` over its ``threads`` (a CPU machine; GPUs are not rescaled)."""
        slots = {r: max(1, cores // max(1, int(threads.get(r, 1)))) for r in self.slots}
        return Plan(self.suite, self.profile, f"{cores} cores", self.jobs, slots, self.calibrated)


def _split_batches(cfg: Any, split: str, limit: Any) -> int:
    """Batches of one evaluation pass over ``split``: the split's size over the batch, or the
    ``limit`` (eval_batches / test_batches) when that is smaller."""
    from hkt.data.config import split_sizes

    size = split_sizes(cfg.task).get(split, 0)
    n = math.ceil(size / int(cfg.train.batch_size)) if size else 0
    if not n:  # the split's size is not in the config: the limit alone, if any
        return int(limit or 0)
    return n if limit is None else min(n, int(limit))


def job_seconds(cfg: Any, step_s: float, eval_cost: float) -> float:
    """A training job's seconds: its steps, its validations and one test pass."""
    tr = cfg.train
    steps = int(tr.max_steps)
    evals = math.ceil(steps / int(tr.eval_every)) if int(tr.eval_every) > 0 else 1
    val = _split_batches(cfg, "val", tr.get("eval_batches"))
    test = _split_batches(cfg, "test", tr.get("test_batches"))
    return step_s * (steps + eval_cost * (evals * val + test))


def shared_gpu_slowdown(jobs: int, sharing: Mapping[str, Any]) -> float:
    """How much slower each step is with ``jobs`` training jobs on one GPU than alone: linear
    from 1 (one job) to ``sharing.slowdown`` at ``sharing.jobs`` (config/plan.yaml)."""
    at, slow = int(sharing["jobs"]), float(sharing["slowdown"])
    return 1.0 + (slow - 1.0) * (max(1, jobs) - 1) / max(1, at - 1)


def _slots(grid: Any, rule: str, gpus: int) -> int:
    """Jobs of ``rule`` that run at once: the cores over its threads and, where its jobs need a
    GPU, the GPUs' slots (``jobs_per_gpu`` per GPU where they share one)."""
    res = grid.resources(rule)
    n = max(1, grid.cpus // int(res["threads"]))
    if gpus and int(res.get("gpu", 0) or 0) > 0:
        from hkt.workflow.gpuslots import GPU_COMMANDS

        share = GPU_COMMANDS.get(rule) == "share"
        n = min(n, gpus * grid.jobs_per_gpu if share else max(1, gpus // int(res["gpu"])))
    return n


def estimate(grid: Any, configs: Mapping[Any, Any], step_seconds: Callable[[Any, Shape], float],
             *, other_seconds: Mapping[str, float], eval_cost: float, gpus: int = 0,
             sharing: Mapping[str, Any] | None = None, suite: str = "?",
             device: str = "?") -> Plan:
    """The plan of ``grid`` (a :class:`~hkt.workflow.grid.Grid`). ``configs`` maps each training
    job to its composed config; ``step_seconds(cfg, shape)`` gives a training step's seconds at
    the job's batch, alone on its device (measured, or faked in tests); ``other_seconds`` the
    allowance per job of every other rule; ``gpus`` the GPUs the jobs share (0: a CPU machine);
    ``sharing`` the slowdown of training jobs side by side on one GPU (config/plan.yaml's
    ``gpu_sharing``; None: none)."""
    slots = {rule: _slots(grid, rule, gpus) for rule in RULE_ORDER}
    # training jobs side by side on each GPU: the slots filled, spread evenly over the GPUs
    on_gpu = gpus and int(grid.resources("train").get("gpu", 0) or 0) > 0
    side = math.ceil(min(slots["train"], len(grid.train_jobs())) / gpus) if on_gpu else 1
    slow = shared_gpu_slowdown(side, sharing) if sharing and side > 1 else 1.0
    jobs: list[JobEstimate] = []
    calibrated: dict[str, float] = {}
    shapes: dict[str, float] = {}
    for job in grid.train_jobs():
        cfg = configs[job]
        label = f"{job.task}/{job.model}/{job.variant}"
        shape = shape_of(cfg, int(cfg.train.batch_size), label)
        if shape.key not in shapes:
            shapes[shape.key] = step_seconds(cfg, shape) * slow
            calibrated[label] = 1000 * shapes[shape.key]
        jobs.append(JobEstimate("train", f"{label}/seed{job.seed}",
                                job_seconds(cfg, shapes[shape.key], eval_cost),
                                grid.record(job), grid.job_log("train", job),
                                int(grid.resources("train")["threads"]), int(cfg.train.max_steps),
                                shapes[shape.key]))
    for rule, name, output, log in other_jobs(grid):
        jobs.append(JobEstimate(rule, name, float(other_seconds.get(rule, 0.0)), output, log,
                                int(grid.resources(rule)["threads"])))
    return Plan(suite, grid.profile, device, jobs, slots, calibrated, (side, slow))


def other_jobs(grid: Any) -> list[tuple[str, str, str, str]]:
    """(rule, name, output, log) of every job but training, as the workflow's rules name them."""
    tasks = sorted({j.task for j in grid.train_jobs() + grid.external_jobs()})
    jobs = [("prepare", t, grid.data_files(t)[-1], grid.log("prepare", t)) for t in tasks]
    for rule, group in (("external", grid.external_jobs()), ("analyze", grid.analysis_jobs())):
        for j in group:
            output = grid.record(j) if rule == "external" else grid.analysis_file(j)
            jobs.append((rule, f"{j.task}/{j.model}/{j.variant}/seed{j.seed}", output,
                         grid.job_log(rule, j)))
    if grid.bench_enabled:
        jobs.append(("bench", "attention", f"{grid.results}/bench/attention.csv",
                     grid.log("bench", "attention")))
    jobs.append(("aggregate", "aggregate", f"{grid.results}/summary.md",
                 grid.log("aggregate", "aggregate")))
    return jobs


def write_plan(plan: Plan, grid: Any, path: str | Path) -> Path:
    """The plan as ``hkt status`` reads it (``RESULTS_DIR/plan/suite.json``): every job with its
    estimate and files, the cores the suite runs on, its jobs per rule at once (``slots``) and
    the GPU slots its local jobs claim (``gpu_slots``, None without), when and where it started."""
    import os
    import socket

    from hkt.fileio import atomic_write_text
    from hkt.workflow.gpuslots import shared_out

    doc = {"suite": plan.suite, "profile": plan.profile, "device": plan.device,
           "cores": grid.cpus, "started": time.time(), "host": socket.gethostname(),
           "pid": os.getpid(), "workdir": os.getcwd(), "results_dir": grid.results,
           "slots": plan.slots, "gpu_slots": shared_out(),
           "jobs": [vars(j) for j in plan.jobs]}
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    return Path(path)


def format_plan(plan: Plan) -> str:
    """The plan as the workflow and ``hkt plan`` print it."""
    counts = plan.counts()
    lines = [f"suite {plan.suite} (profile {plan.profile}) on {plan.device}",
             f"  jobs: {sum(counts.values())} ("
             + ", ".join(f"{r} {counts[r]}" for r in RULE_ORDER if counts.get(r)) + ")"]
    for label, ms in plan.calibrated.items():
        note = " (not timed: calibration budget spent; as its main shape)" \
            if label in plan.untimed else ""
        lines.append(f"  step {label:<28} {ms:8.0f} ms (at the job's batch){note}")
    side, slow = plan.sharing
    for rule in RULE_ORDER:
        if counts.get(rule):
            how = "measured" if rule == "train" else "allowance, config/plan.yaml"
            if rule == "train" and side > 1:
                how += (f"; {side} jobs share each GPU, each step {slow:.2f}x its time alone: "
                        "config/plan.yaml gpu_sharing")
            lines.append(f"  {rule:<9} {counts[rule]:3d} jobs, {plan.slots[rule]} at once: "
                         f"{duration(plan.rule_wall(rule))} ({how})")
    lines.append(f"  estimated wall time: {duration(plan.wall_seconds)}")
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
    from hkt.config import config_dir
    from hkt.workflow.sessions import duration, load_sessions, session_seconds

    where = config.get("published")
    every = load_sessions(config_dir().parent / where) if where else []
    sessions = [s for s in every if not s.get("adds")]  # the suite's own run, then runs added
    if not sessions:
        return ""
    wall = sum(session_seconds(s, now=0.0, host="") for s in sessions)
    first = float(sessions[0].get("estimate_s") or 0.0)
    against = f", {wall / first:.2f}x the {duration(first)} planned then" if first else ""
    added = [s for s in every if s.get("adds")]
    more = (f"; {len({r for s in added for r in s['adds']})} runs added later took "
            f"{duration(sum(session_seconds(s, now=0.0, host='') for s in added))}") if added else ""
    return (f"\npublished: {where}/ took {duration(wall)} over {len(sessions)} runs of the "
            f"workflow{against}{more} ({where}/plan/sessions.json)")


def log_advice(grid: Any) -> str:
    """Where each job's log is, and how to follow one."""
    return (f"logs: {grid.results}/logs/RULE/... (one per job; a training job's is "
            f"{grid.log('train', 'TASK/MODEL/VARIANT/seedS')}); follow one with "
            f"`tail -f {shlex.quote(grid.results)}/logs/train/<task>/<model>/main/seed0.log`")


def calibrated_plan(suite: Suite) -> Plan:
    """The plan of the workflow's suite with config/plan.yaml's settings (cached calibrations,
    else a short fresh one), as the workflow makes it once at its start."""
    from hkt.config import compose

    return make_plan(compose("plan", []), suite, log=lambda s: print(s, flush=True))


def workflow_plan(suite: Suite, *, plan: Plan | None) -> str:
    """What the workflow prints: the suite's jobs per rule and where the logs are and, given its
    calibrated ``plan`` (:func:`calibrated_plan`), the plan with its ETA, also written for
    ``hkt status``; without one (the workflow just read, or a dry run), how to get the ETA."""
    grid = suite.grid
    if plan is None:
        command = (f"`hkt plan --suite {suite.name}`" if suite.name != NO_SUITE else
                   "`hkt plan --suite FILE`, FILE your config file,")
        return (f"hkt plan: suite {suite.name}: jobs {job_counts(grid)}; the estimated "
                "wall time follows when jobs start (not on a dry run); to see it now: "
                f"{command} (a short calibration, cached for the "
                f"workflow's start){see_also(suite.config)}")
    write_plan(plan, grid, suite_plan_file(grid.results))
    return (f"hkt plan (the whole suite; jobs already done take no time):\n{format_plan(plan)}"
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
    parser.add_argument("--suite", help="auto (the workflow's choice), a name in config/suites/ "
                                        "or a file (default: config/plan.yaml's suite)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="overrides of config/plan.yaml, e.g. fresh=true calibration.steps.cpu=3")


# --- a suite's training time on a GPU, from step times published there (issue 53) -----------
# ``gpu_reference`` in config/plan.yaml holds, per model, the measured milliseconds per step of
# one published GPU run and the overrides that compose that run. A job's step on that GPU is its
# model's published step times the ratio of the job's step time to the published run's, both
# timed on this machine the same way (:mod:`hkt.calibration`); the jobs share the GPU
# ``jobs_per_gpu`` at a time, as the published runs did. A GPU gains more on big shapes than a
# CPU, so the ratio leans long; a model without a published step is left out, and named.

StepSeconds = Callable[[Any, Shape], float]   # (composed config, shape) -> seconds per step here
JobSeconds = Callable[[Any, float], float]    # (composed config, seconds per step) -> job seconds


def gpu_training_seconds(grid: Any, configs: Mapping[Any, Any], reference: Mapping[str, Any],
                         step_seconds: StepSeconds, job_seconds: JobSeconds
                         ) -> tuple[float, list[str]]:
    """The training jobs' wall time on the GPU of ``reference``, and the models it has no
    published step for (left out)."""
    from hkt.train.config import load_config

    models = reference.get("models") or {}
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
        total += job_seconds(cfg, float(ref["ms_per_step"]) / 1000 * mine / published[job.model])
        done += 1
    return total / max(1, min(done, int(grid.jobs_per_gpu))), missing


def gpu_line(reference: Mapping[str, Any], grid: Any, configs: Mapping[Any, Any],
             step_seconds: StepSeconds, job_seconds: JobSeconds) -> str:
    """The line ``hkt plan`` prints: the training time on the reference GPU and its sources;
    "" when none of the suite's models has a published step."""
    seconds, missing = gpu_training_seconds(grid, configs, reference, step_seconds, job_seconds)
    models = sorted({j.model for j in grid.train_jobs()} - set(missing))
    if not models:
        return ""
    sources = ", ".join(f"{m} {reference['models'][m]['ms_per_step']} ms/step "
                        f"({reference['models'][m]['source']})" for m in models)
    left = f"; not counted: {', '.join(missing)} (no published GPU step time)" if missing else ""
    return (f"  training on {reference['device']}: {duration(seconds)}, from published step "
            f"times ({sources}) scaled by the step times here{left}")


def gpu_line_of(cfg: Any, suite: Suite) -> str:
    """The line of :func:`gpu_line` ("" without ``gpu_reference``)."""
    from hkt.device import resolve_device
    from hkt.workflow.configs import job_configs

    reference = cfg.get("gpu_reference")
    if not reference:
        return ""
    device = resolve_device(str(cfg.device), source="config key 'device'")
    timer, _ = cached_timer(calibration_file(suite.grid.results), device, cfg.calibration,
                            int(suite.grid.resources("train")["threads"]),
                            on_measure=lambda label, ms: print(f"  timed {label}: {ms:.0f} ms/step"))
    return gpu_line(reference, suite.grid, job_configs(suite.grid), timer,
                    lambda job_cfg, step_s: job_seconds(job_cfg, step_s, float(cfg.eval_cost)))


def make_plan(cfg: Any, suite: Suite, *, log: Callable[[str], None] = lambda s: None) -> Plan:
    """The plan of ``suite`` with ``cfg`` (config/plan.yaml composed), timing what the cache
    lacks."""
    import torch

    from hkt.device import describe_device, resolve_device
    from hkt.workflow.configs import job_configs

    grid = suite.grid
    device = resolve_device(str(cfg.device), source="config key 'device'")
    threads = int(grid.resources("train")["threads"])
    kind = "cuda" if device.type == "cuda" else "cpu"
    timer, stats = cached_timer(calibration_file(grid.results), device, cfg.calibration, threads,
                               fresh=bool(cfg.fresh),
                               on_measure=lambda label, ms: log(f"  timed {label}: {ms:.0f} ms/step"))
    configs = job_configs(grid)  # every training job's composed config (hkt.workflow.configs)
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    at_once = max(1, grid.cpus // threads)
    scale = float((cfg.calibration.get("side_by_side") or {}).get(kind, 1.0)) \
        if kind == "cpu" and at_once > 1 else 1.0

    def step_seconds(job_cfg: Any, shape: Shape) -> float:  # as the job runs beside the others
        return timer(job_cfg, shape) * scale

    plan = estimate(grid, configs, step_seconds, eval_cost=float(cfg.eval_cost), gpus=gpus,
                    sharing=cfg.gpu_sharing,
                    other_seconds={r: float(v[kind]) for r, v in cfg.other_rules.items()},
                    suite=suite.name, device=describe_device(device))
    plan.cached, plan.untimed = stats["cached"], stats["untimed"]
    return plan


def run(args: argparse.Namespace) -> int:
    from hkt.config import compose

    overrides = list(args.overrides) + ([f"suite={args.suite}"] if args.suite else [])
    cfg = compose("plan", overrides)
    start = time.perf_counter()
    suite = load_suite(str(cfg.suite))  # once: auto's choice and the CUDA check too
    print(f"hkt plan of suite {suite.name} ({suite.reason})", flush=True)
    plan = make_plan(cfg, suite, log=lambda s: print(s, flush=True))
    print(format_plan(plan))
    if "cuda" not in plan.device:
        threads = {r: int(suite.grid.resources(r)["threads"]) for r in RULE_ORDER}
        for cores in cfg.get("scale_cores") or []:
            print(f"  on {cores} cores at this speed per core: "
                  f"{duration(plan.on_cores(int(cores), threads).wall_seconds)}")
    gpu = gpu_line_of(cfg, suite) if "cuda" not in plan.device else ""
    for line in (gpu, published_line(suite.config), see_also(suite.config)):
        if line:
            print(line.lstrip("\n"))
    print(f"hkt plan: {len(plan.calibrated)} shapes ({plan.cached} from the cache, "
          f"{len(plan.untimed)} not timed) in "
          f"{time.perf_counter() - start:.0f} s")
    return 0
