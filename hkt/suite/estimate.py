"""The one cost model of a suite: what each job costs on this machine, what is already done, and
how the jobs pack onto its cores and GPUs. ``hkt plan``, ``hkt doctor``, the workflow's start
banner and ``hkt status`` all count with it, so for one results directory on one machine they
give one figure.

A training job costs (:func:`train_cost`)

    overhead + step x (steps left + eval_cost x (validation batches left + test batches))

* ``overhead``: the seconds a job spends outside its steps and evaluation passes: the process
  and its imports, opening the prepared data, and MLflow tracking (run start, parameters, final
  metrics, the model artifact). ``config/plan.yaml`` ``job_overhead``, measured per device type.
* ``step``: the measured seconds of one training step of the job's own shape (composed model, T,
  batch; :class:`~hkt.suite.calibration.Shape`), timed once on this device with
  :func:`hkt.train.step_timing.measure_training_step` at the task's mean training length and
  cached per device, torch version and shape in ``RESULTS_DIR/plan/calibration.json``
  (:mod:`hkt.suite.calibration`, :func:`~hkt.suite.calibration.cached_timer`). Every distinct shape is timed: no
  shape is costed as another. Where ``calibration.budget_s`` stops the timing, the shapes left are
  named, their jobs counted as nothing and the total is a lower bound, said so wherever it is
  printed.
* ``eval_cost``: a forward-only batch as a fraction of a training step (validation every
  ``eval_every`` steps, the test set once).

Every other rule (prepare, external baselines, analyses, the benchmark, the aggregate) costs what
such a job was measured to take (``config/plan.yaml`` ``other_rules``, per profile; an external
baseline per baseline).

What is done costs nothing: a job whose output exists is done, and a training job with a
checkpoint (``checkpoints/last.pt``, its ``history.csv`` written with it) costs only its steps
after the checkpoint, plus its overhead (:func:`checkpointed_step`).

The jobs are packed by :func:`pack` (list scheduling): each takes its threads of the cores, a slot
of its rule (the cores over its threads or, where the rule's jobs share GPUs, ``jobs_per_gpu`` per
GPU) and its GPU slots, longest first within each rule, after the data is prepared; the aggregate
last. What is left goes at the pace of what ran where asked (``hkt status``): the measured pace is
:mod:`hkt.suite.pace`'s. Imports neither torch nor mlflow at module level (``hkt status`` reads it).

This module holds a job's cost, the packing and the plan; the calibration (:mod:`hkt.suite.calibration`)
and the measured pace (:mod:`hkt.suite.pace`) sit beside it.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hkt.fileio import atomic_write_text
from hkt.run_record import HISTORY_NAME
from hkt.gpu_slots import GPU_COMMANDS
# make_plan reads cached_timer from this module: a test fakes the calibration by replacing
# hkt.suite.estimate.cached_timer
from hkt.suite.calibration import Shape, cached_timer, calibration_file, shape_of
from hkt.suite.pace import Pace, log_tail_bytes, measured_pace
from hkt.workflow.grid import RULE_ORDER

__all__ = ["settle_done", "JobEstimate", "Plan", "train_cost", "job_seconds", "eval_batches",
           "checkpointed_step", "other_cost", "other_jobs", "estimate", "shared_gpu_slowdown",
           "gpu_takes", "pack", "make_plan", "write_plan", "job_overhead", "other_costs"]


# --------------------------------------------------------------------------- a job's cost
@dataclass
class JobEstimate:
    """One job of the suite: what it still costs, why, and the files that tell its state."""

    rule: str
    name: str
    seconds: float       # what the job still costs (0: done)
    output: str = ""     # a file the job writes last (its presence: done)
    log: str = ""        # its log (attempt headers, progress lines)
    threads: int = 1     # the cores it takes
    steps: int = 0       # training steps of the whole job (train jobs)
    step_s: float = 0.0  # the calibrated seconds per step (train jobs; 0: not timed)
    overhead_s: float = 0.0  # start-up, data loading and tracking (train jobs)
    eval_steps: float = 0.0  # its evaluation passes, in training steps (train jobs, whole job)
    done_steps: int = 0  # steps already checkpointed when planned (train jobs)
    batch: int = 0       # its batch (train jobs: a logged samples/s gives its step time)
    done: bool = False   # its output exists
    cost_s: float = 0.0  # the whole job's cost, from nothing, at the calibrated pace

    @property
    def state(self) -> str:  # what :func:`pack` reads
        return "done" if self.done else "waiting"

    @property
    def remaining_s(self) -> float:
        return 0.0 if self.done else self.seconds


def eval_batches(cfg: Any) -> tuple[int, int, int]:
    """A training job's validations, batches per validation and test batches."""
    from hkt.data.task_config import split_sizes

    tr = cfg.train

    def batches(split: str, limit: Any) -> int:
        size = split_sizes(cfg.task).get(split, 0)
        n = math.ceil(size / int(tr.batch_size)) if size else 0
        if not n:  # the split's size is not in the config: the limit alone, if any
            return int(limit or 0)
        return n if limit is None else min(n, int(limit))

    steps = int(tr.max_steps)
    evals = math.ceil(steps / int(tr.eval_every)) if int(tr.eval_every) > 0 else 1
    return evals, batches("val", tr.get("eval_batches")), batches("test", tr.get("test_batches"))


def job_seconds(cfg: Any, step_s: float, eval_cost: float, overhead_s: float = 0.0) -> float:
    """A whole training job's seconds from its composed config: its overhead, its steps, its
    validations and one test pass."""
    evals, val, test = eval_batches(cfg)
    return overhead_s + step_s * (int(cfg.train.max_steps) + eval_cost * (evals * val + test))


def train_cost(job: Mapping[str, Any] | JobEstimate, done_steps: int | None = None) -> float:
    """The seconds a training job still costs after ``done_steps`` (None: those it was planned
    with): its overhead, its steps left and their share of the validations, its test pass; a
    shape the calibration left out (no ``step_s``) costs nothing, as the plan says. Reads a
    :class:`JobEstimate` or its dict in ``plan/suite.json`` (``hkt status``)."""
    j = vars(job) if isinstance(job, JobEstimate) else job
    step = float(j.get("step_s") or 0.0)
    if not step:
        return 0.0
    steps = int(j.get("steps") or 0)
    done = int(j.get("done_steps") or 0) if done_steps is None else int(done_steps)
    left = max(0.0, 1.0 - done / steps) if steps else 1.0
    return float(j.get("overhead_s") or 0.0) + step * (steps + float(j.get("eval_steps") or 0.0)) * left


def checkpointed_step(record: str | Path) -> int:
    """The step a training job resumes at: that of its run directory's last checkpoint (the last
    row of the ``history.csv`` written with ``checkpoints/last.pt``), 0 without one. Torch-free."""
    run_dir = Path(record).parent
    if not (run_dir / "checkpoints" / "last.pt").is_file():
        return 0
    try:
        with open(run_dir / HISTORY_NAME, encoding="utf-8") as fh:
            lines = [ln for ln in fh.read().splitlines()[1:] if ln.strip()]
        return int(lines[-1].split(",")[0]) if lines else 0
    except (OSError, ValueError):
        return 0


def other_cost(costs: Mapping[str, Any], rule: str, name: str) -> float:
    """What a job of another rule costs: ``costs[rule]``, a number or, per model (an external
    baseline's name, the second part of ``name``), a mapping with a ``default``."""
    c = costs.get(rule, 0.0)
    if isinstance(c, Mapping):
        parts = name.split("/")
        model = parts[1] if len(parts) > 1 else name
        c = c.get(model, c.get("default", 0.0))
    return float(c or 0.0)


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


def settle_done(rules: Sequence[str], names: Sequence[str], done: Sequence[bool]) -> list[bool]:
    """Which jobs are done once the workflow's dependencies are counted, not only their outputs:
    an analysis whose run is not done reruns after it, and the aggregate (which reads every
    record) reruns after any job that is not done (a baseline or a model added to a finished
    suite)."""
    out = list(done)
    trained = {n for r, n, d in zip(rules, names, done) if r == "train" and d}
    for i, (rule, name) in enumerate(zip(rules, names)):
        if rule == "analyze" and name not in trained:
            out[i] = False
    if not all(d for r, d in zip(rules, out) if r != "aggregate"):
        out = [False if r == "aggregate" else d for r, d in zip(rules, out)]
    return out




# --------------------------------------------------------------------------- packing
def gpu_takes(gpu_slots: Mapping[str, Any] | None) -> dict[str, int]:
    """The GPU slots one job of each rule takes, from the plan's ``gpu_slots`` (``gpus``,
    ``per_gpu``, ``commands``: the rules that claim; :func:`hkt.gpu_slots.shared_out`)."""
    if not gpu_slots:
        return {}
    per_gpu = int(gpu_slots["per_gpu"])
    return {c: 1 if GPU_COMMANDS.get(c) == "share" else per_gpu for c in gpu_slots["commands"]}


def pack(jobs: Sequence[Any], cores: int, slots: Mapping[str, int] | None = None,
         gpu_slots: Mapping[str, Any] | None = None) -> float:
    """Seconds until the last of ``jobs`` ends (each with ``rule``, ``state``, ``remaining_s``,
    ``threads``): running ones from now, waiting ones (and stopped ones, which the next run
    resumes) longest first within each rule, each at the earliest time its threads of ``cores``,
    a slot of its rule (``slots``; none: cores alone) and its GPU slots (``gpu_slots``) are free,
    after the data is prepared; the aggregate after everything. Dependencies within a task's
    chain (an analysis waits for its run) are not modelled: it leans short where analyses wait."""
    pools: dict[str, list[float]] = {"cores": [0.0] * max(1, cores)}
    for rule, n in (slots or {}).items():
        pools[f"rule:{rule}"] = [0.0] * max(1, int(n))
    takes = gpu_takes(gpu_slots)
    if takes:
        pools["gpu"] = [0.0] * max(1, int(gpu_slots["gpus"]) * int(gpu_slots["per_gpu"]))
    order = {r: i for i, r in enumerate(RULE_ORDER)}
    running = [j for j in jobs if j.state == "running"]
    waiting = sorted((j for j in jobs if j.state in ("waiting", "stopped")
                      and j.rule != "aggregate"),
                     key=lambda j: (order.get(j.rule, len(order)), -j.remaining_s))
    prepared = 0.0  # every other rule needs the data: it starts after the last prepare job
    for j in [*running, *waiting]:
        need = {"cores": max(1, j.threads), f"rule:{j.rule}": 1, "gpu": takes.get(j.rule, 0)}
        need = {p: min(n, len(pools[p])) for p, n in need.items() if p in pools and n > 0}
        for p in need:
            pools[p].sort()
        start = 0.0 if j.state == "running" else max(
            [pools[p][n - 1] for p, n in need.items()]
            + [prepared if j.rule != "prepare" else 0.0])
        for p, n in need.items():
            for i in range(n):
                pools[p][i] = max(pools[p][i], start + j.remaining_s)
        if j.rule == "prepare":
            prepared = max(prepared, start + j.remaining_s)
    end = max(max(p) for p in pools.values())
    last = [j.remaining_s for j in jobs if j.state == "waiting" and j.rule == "aggregate"]
    return end + sum(last)


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
        share = GPU_COMMANDS.get(rule) == "share"
        n = min(n, gpus * grid.jobs_per_gpu if share else max(1, gpus // int(res["gpu"])))
    return n


# --------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """A suite's jobs with what each still costs, and what they run on."""

    suite: str
    profile: str
    device: str
    jobs: list[JobEstimate]
    slots: dict[str, int]                  # jobs of a rule that run at once
    cores: int = 1
    calibrated: dict[str, float] = field(default_factory=dict)  # shape label -> ms/step (job batch)
    sharing: tuple[int, float] = (1, 1.0)  # training jobs side by side on one GPU, and their slowdown
    cached: int = 0                        # shapes whose timing came from the cache
    untimed: list[str] = field(default_factory=list)  # shapes over the calibration budget
    gpu_slots: dict[str, Any] | None = None  # the GPU slots the workflow's jobs claim
    pace: Pace = field(default_factory=Pace)  # what ran, against the cost model
    # this machine's 1-minute load average and CPUs at the plan's start, before its calibration
    # (a CPU plan of jobs on this machine; else None), and what it means (hkt.suite.busy)
    load: tuple[float, int] | None = None
    busy: Any = None

    def priority(self, output: str) -> int:
        """A training job's Snakemake priority: its estimated seconds (longest first; 0 when
        ``output`` is no training job of the plan), and above every job that starts from nothing
        where it resumes from a checkpoint: after `hkt stop`, the runs that were under way finish
        first (their checkpoints hold work; a fresh job can wait)."""
        train = [j for j in self.jobs if j.rule == "train"]
        job = next((j for j in train if j.output == output), None)
        if job is None:
            return 0
        if job.done_steps and not job.done:
            return round(job.seconds) + 1 + max(round(j.seconds) for j in train)
        return round(job.seconds)

    def data_priority(self, outputs: Iterable[str]) -> int:
        """A task's ``prepare`` priority: the highest of the training jobs that wait on its data
        (``outputs``: their records), so the data of the longest jobs are ready first."""
        return max((self.priority(o) for o in outputs), default=0)

    def counts(self) -> Counter:
        return Counter(j.rule for j in self.jobs)

    def done(self) -> Counter:
        return Counter(j.rule for j in self.jobs if j.done)

    def rule_work(self, rule: str) -> float:
        """Seconds of work left in a rule, its jobs one after the other."""
        return sum(j.remaining_s for j in self.jobs if j.rule == rule)

    @property
    def wall_seconds(self) -> float:
        """The remaining wall time: the jobs not done, packed (:func:`pack`)."""
        return pack(self.jobs, self.cores, self.slots, self.gpu_slots)

    def on_cores(self, cores: int, threads: Mapping[str, int]) -> "Plan":
        """The same jobs on a node of ``cores`` CPUs at the same speed per core: each rule's
        slots are ``cores`` over its ``threads`` (a CPU machine; GPUs are not rescaled)."""
        slots = {r: max(1, cores // max(1, int(threads.get(r, 1)))) for r in self.slots}
        return Plan(self.suite, self.profile, f"{cores} cores", self.jobs, slots, cores,
                    self.calibrated, pace=self.pace)


def estimate(grid: Any, configs: Mapping[Any, Any],
             step_seconds: Callable[[Any, Shape], float | None], *,
             other_seconds: Mapping[str, Any], eval_cost: float, overhead_s: float = 0.0,
             gpus: int = 0, sharing: Mapping[str, Any] | None = None, suite: str = "?",
             device: str = "?", gpu_slots: Mapping[str, Any] | None = None,
             tail_bytes: int = 0) -> Plan:
    """The plan of ``grid`` (a :class:`~hkt.workflow.grid.Grid`), counting what its results
    directory already holds. ``configs`` maps each training job to its composed config;
    ``step_seconds(cfg, shape)`` gives a training step's seconds at the job's batch, alone on its
    device (measured, or faked in tests; None: not timed); ``other_seconds`` what a job of every
    other rule costs (:func:`other_cost`); ``overhead_s`` a training job's start-up, data and
    tracking; ``gpus`` the GPUs the jobs share (0: a CPU machine); ``sharing`` the slowdown of
    training jobs side by side on one GPU (config/plan.yaml's ``gpu_sharing``; None: none);
    ``tail_bytes`` > 0: what is left goes at the pace of what ran (:func:`measured_pace`, reading
    that much of each log), as ``hkt status`` counts it."""
    slots = {rule: _slots(grid, rule, gpus) for rule in RULE_ORDER}
    # training jobs side by side on each GPU: the slots filled, spread evenly over the GPUs
    on_gpu = gpus and int(grid.resources("train").get("gpu", 0) or 0) > 0
    side = math.ceil(min(slots["train"], len(grid.train_jobs())) / gpus) if on_gpu else 1
    slow = shared_gpu_slowdown(side, sharing) if sharing and side > 1 else 1.0
    jobs: list[JobEstimate] = []
    calibrated: dict[str, float] = {}
    shapes: dict[str, float | None] = {}
    threads = int(grid.resources("train")["threads"])
    for job in grid.train_jobs():
        cfg = configs[job]
        label = f"{job.task}/{job.model}/{job.variant}"
        record = grid.record(job)
        done = Path(record).exists()
        shape = shape_of(cfg, int(cfg.train.batch_size), label)
        if shape.key not in shapes:  # each distinct shape timed once, by its own measurement
            s = step_seconds(cfg, shape)
            shapes[shape.key] = None if s is None else s * slow
            if s is not None:
                calibrated[label] = 1000 * s * slow
        step = shapes.get(shape.key)
        evals, val, test = eval_batches(cfg)
        est = JobEstimate("train", f"{label}/seed{job.seed}", 0.0, record, grid.job_log("train", job),
                          threads, int(cfg.train.max_steps), step or 0.0, overhead_s,
                          eval_cost * (evals * val + test),
                          0 if done else checkpointed_step(record), int(cfg.train.batch_size), done)
        est.cost_s = train_cost(est, 0)
        est.seconds = 0.0 if done else train_cost(est)
        jobs.append(est)
    for rule, name, output, log in other_jobs(grid):
        cost = other_cost(other_seconds, rule, name)
        done = Path(output).exists()
        jobs.append(JobEstimate(rule, name, 0.0 if done else cost, output, log,
                                int(grid.resources(rule)["threads"]), done=done, cost_s=cost))
    settled = settle_done([j.rule for j in jobs], [j.name for j in jobs], [j.done for j in jobs])
    for j, d in zip(jobs, settled):
        if j.done and not d:  # its output exists, but the workflow runs it again
            j.done, j.seconds = False, j.cost_s
    pace = measured_pace([vars(j) for j in jobs], [j.done for j in jobs], tail_bytes) \
        if tail_bytes else Pace()
    for j in jobs:  # what is left, at the pace of what ran
        j.seconds *= (pace.train or 1.0) if j.rule == "train" else pace.rules.get(j.rule, 1.0)
    return Plan(suite, grid.profile, device, jobs, slots, grid.cpus, calibrated, (side, slow),
                gpu_slots=dict(gpu_slots) if gpu_slots else None, pace=pace)


def job_overhead(cfg: Any, kind: str) -> float:
    """A training job's seconds outside its steps and evaluations (config/plan.yaml)."""
    return sum(float(v[kind]) for v in cfg.job_overhead.values())


def other_costs(cfg: Any, profile: str, kind: str) -> dict[str, Any]:
    """What a job of each other rule costs for ``profile`` on ``kind`` (config/plan.yaml's
    ``other_rules``: the profile's entry, else ``default``)."""
    from omegaconf import OmegaConf

    rules = cfg.other_rules.get(profile) or cfg.other_rules.default
    return {r: (OmegaConf.to_container(v[kind]) if OmegaConf.is_config(v[kind]) else v[kind])
            for r, v in rules.items()}


def make_plan(cfg: Any, suite: Any, *, log: Callable[[str], None] = lambda s: None,
              device: Any = None) -> Plan:
    """The plan of ``suite`` (a :class:`~hkt.workflow.suites.Suite`) with ``cfg``
    (config/plan.yaml composed), timing what the cache lacks: what ``hkt plan``, ``hkt doctor``
    and the workflow's start banner all print. ``device``: a resolved torch device (None: the
    config's ``device``)."""
    import torch

    from hkt.device import describe_device, resolve_device
    from hkt.workflow.job_configs import job_configs
    from hkt.gpu_slots import ENV_VAR, shared_out
    from hkt.workflow.node import load_average

    grid = suite.grid
    start = load_average()  # before the calibration, which adds to it
    if device is None:
        device = resolve_device(str(cfg.device), source="config key 'device'")
    threads = int(grid.resources("train")["threads"])
    kind = "cuda" if device.type == "cuda" else "cpu"
    timer, stats = cached_timer(calibration_file(grid.results), device, cfg.calibration, threads,
                               fresh=bool(cfg.fresh),
                               on_measure=lambda label, ms: log(f"  timed {label}: {ms:.0f} ms/step"))
    configs = job_configs(grid)  # every training job's composed config (hkt.workflow.job_configs)
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    at_once = max(1, grid.cpus // threads)
    scale = float((cfg.calibration.get("side_by_side") or {}).get(kind, 1.0)) \
        if kind == "cpu" and at_once > 1 else 1.0

    def step_seconds(job_cfg: Any, shape: Shape) -> float | None:  # beside the other jobs
        s = timer(job_cfg, shape)
        return None if s is None else s * scale

    plan = estimate(grid, configs, step_seconds, eval_cost=float(cfg.eval_cost),
                    overhead_s=job_overhead(cfg, kind), gpus=gpus, sharing=cfg.gpu_sharing,
                    other_seconds=other_costs(cfg, str(grid.profile), kind),
                    suite=suite.name, device=describe_device(device),
                    gpu_slots=shared_out() or (shared_out({ENV_VAR: grid.gpu_env() or ""})
                                               if gpus else None),  # as a local run shares them
                    tail_bytes=log_tail_bytes())
    plan.cached, plan.untimed = stats["cached"], stats["untimed"]
    if kind == "cpu" and "cpus" not in grid.node.given:  # its jobs run on this machine's CPUs
        plan.load = start
    return plan


def write_plan(plan: Plan, grid: Any, path: str | Path) -> Path:
    """The plan as ``hkt status`` reads it (``RESULTS_DIR/plan/suite.json``): every job with its
    cost and files, the cores the suite runs on, its jobs per rule at once (``slots``) and the
    GPU slots its local jobs claim (``gpu_slots``, None without), when and where it started."""
    import os
    import socket

    from hkt.gpu_slots import shared_out

    if plan.gpu_slots is None:  # the GPU slots the workflow's jobs claim, counted from now on
        plan.gpu_slots = shared_out()
    doc = {"suite": plan.suite, "profile": plan.profile, "device": plan.device,
           "cores": plan.cores, "started": time.time(), "host": socket.gethostname(),
           "pid": os.getpid(), "workdir": os.getcwd(), "results_dir": grid.results,
           "slots": plan.slots, "gpu_slots": plan.gpu_slots, "untimed": plan.untimed,
           "estimate_s": plan.wall_seconds,
           "jobs": [vars(j) for j in plan.jobs]}
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    return Path(path)
