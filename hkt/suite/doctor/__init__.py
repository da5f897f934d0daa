"""``hkt doctor [--suite NAME] [KEY=VALUE ...]``: check this machine against a suite before a
multi-hour run. The suite (``--suite`` as ``hkt plan`` takes it: ``auto``, a name or a file) is
made once (:func:`hkt.workflow.suites.load_suite`) and every check reads it.

One line per check, then a verdict; the exit status is 1 when any check fails. The checks:

* ``device``: the device, torch, CUDA and cuDNN versions, bf16 support and the suite's precision;
  fails when the suite asks for GPUs (``resources.train.gpu``) and none is visible.
* ``sdpa TASK``: which SDPA backend PyTorch picks for MHA's and HKT's calls at the task's shape
  (B, H, T, d), with and without a key mask, at the suite's precision, V padded where
  ``hkt/mixers/sdpa.py`` pads it. Any fused kernel (flash, memory-efficient, cuDNN) passes;
  the math fallback and a call no backend accepts fail (:func:`sdpa_verdict`). Where V is
  padded it says whether this torch needed that.
* ``hkt fused`` / ``hkt levels=1``: HKT's fused path at the suite's precision against the fp64
  materialised path, and HKT with one level against MHA with the same weights (outputs and input
  gradients, relative max error within the precision's tolerance).
* ``train TASK/MODEL``: a few training steps of every main job on a synthetic batch at the
  task's T, through the benchmarks' :class:`~hkt.bench.common.TrainStep` (``hkt train``'s step):
  finite loss, measured ms/step and peak memory.
* ``memory``: free memory against the largest job's need (parameters and optimizer state plus
  the step's measured peak, scaled to the profile's batch) times the training jobs that share a
  GPU (``jobs_per_gpu``; on a GPU) times a margin; when they do not fit, the jobs_per_gpu that does.
* ``estimate``: the suite's wall time on this machine, ``hkt plan``'s figure (the one cost
  model, :mod:`hkt.suite.estimate`: every shape's step timed at its task's mean length, start-up,
  evaluation and tracking, what is done already, the packing on cores and GPUs).
* ``mlflow``: the suite's tracking store or server is reachable and writable (one run is
  created, written, given an artifact, and deleted).

Every number (steps, batch, tolerances, margin) is in ``config/doctor.yaml``.
:func:`measure_training_step` is the timing other commands reuse (a suite's wall-time estimate).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from hkt.suite.doctor.context import Check, Context, job_name
from hkt.suite.doctor.equivalence import check_equivalence
from hkt.suite.doctor.sdpa import FUSED, check_sdpa, sdpa_verdict
from hkt.train.step_timing import StepTiming, measure_training_step  # noqa: F401  (StepTiming: re-exported)
from hkt.workflow.suites import AUTO, Suite, load_suite


__all__ = ["Check", "FUSED", "load_suite", "doctor_suite", "suite_jobs", "job_name", "sdpa_verdict", "run_checks",
           "add_arguments", "run"]

GIB = 2**30


# --------------------------------------------------------------------------------- the suite
def suite_jobs(suite: Suite) -> dict[Any, DictConfig]:
    """One composed config (its first seed) per distinct training job of the suite, keyed by
    its :class:`~hkt.workflow.grid.Job`: the jobs the workflow runs (the main grid, the LRA
    grid, the ablations), from the one job list, :meth:`hkt.workflow.grid.Grid.train_jobs`."""
    from hkt.workflow.job_configs import job_configs

    first: dict[tuple[str, str, str], Any] = {}
    for job in suite.grid.train_jobs():
        first.setdefault((job.task, job.model, job.variant), job)
    return job_configs(suite.grid, first.values())


def doctor_suite(cfg: DictConfig, files: Sequence[str] = ()) -> Suite:
    """The suite the doctor config names (``suite``: auto, a name or a file), ``files`` merged
    over it in order (:func:`~hkt.workflow.suites.load_suite`), ``suite_profile`` replacing its
    profile when set: made once per command."""
    profile = cfg.get("suite_profile")
    return load_suite([str(cfg.suite), *files],
                      overrides={"profile": str(profile)} if profile else None)


# --------------------------------------------------------------------------------- measuring
def free_memory_bytes(device: torch.device) -> float:
    """Free device memory (CUDA) or the kernel's MemAvailable (CPU)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()  # what this process cached is free for the job
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _gib(n: float) -> str:
    """Bytes as GiB, or MiB below one GiB."""
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


# --------------------------------------------------------------------------------- the checks
def _check_device(ctx: Context) -> Iterator[Check]:
    from hkt.device import describe_device
    from hkt.train.step import autocast_dtype

    dev = ctx.device
    parts = [describe_device(dev), f"torch {torch.__version__}",
             f"CUDA {torch.version.cuda or 'none'}"]
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        parts += [f"cuDNN {torch.backends.cudnn.version()}", f"sm{major}{minor}",
                  f"bf16 {'yes' if torch.cuda.is_bf16_supported() else 'no'}"]
    else:
        parts.append("bf16 autocast on CPU only (the suites train fp32 there)")
    precisions = sorted({str(c.train.precision) for c in ctx.configs.values()})
    ctx.amp = autocast_dtype(precisions[0], dev)
    parts.append(f"suite precision {ctx.precision}" + (
        "" if len(precisions) == 1 else f" (jobs differ in train.precision: {precisions}; "
                                        f"checking {precisions[0]})"))
    wants_gpu = int((ctx.suite.config.get("resources") or {}).get("train", {}).get("gpu", 0)
                    or 0) > 0
    ok = not (wants_gpu and dev.type != "cuda")
    if not ok:
        parts.append("but the suite asks a GPU per training job (resources.train.gpu) and none "
                     "is visible: run it on a GPU machine, or choose a CPU suite/profile")
    yield Check("device", ok, "; ".join(parts))


def _check_training(ctx: Context) -> Iterator[Check]:
    tc, kind = ctx.cfg.train, ctx.device.type
    batch = tc.batch_size.get(kind)
    ctx.timings = {}
    for job, cfg in ctx.configs.items():
        timing = measure_training_step(cfg, ctx.device, steps=int(tc.steps[kind]),
                                       warmup=int(tc.warmup[kind]),
                                       batch_size=None if batch is None else int(batch),
                                       vocab_size=int(tc.vocab_size), seed=int(tc.seed))
        ctx.timings[job] = timing
        ok = math.isfinite(timing.loss)
        yield Check(f"train {job_name(job)}", ok,
                    f"T={timing.seq_len}, batch {timing.batch_size}, {timing.n_params:,} params: "
                    f"loss {timing.loss:.3f}{'' if ok else ' (not finite)'}, "
                    f"{timing.ms_per_step:.0f} ms/step, step peak {_gib(timing.peak_bytes)}")


def _check_memory(ctx: Context) -> Iterator[Check]:
    if not ctx.timings:
        yield Check("memory", False, "no training step was measured (see the train checks)")
        return
    margin = float(ctx.cfg.memory.margin)
    needs = {job: t.bytes_needed(int(ctx.configs[job].train.batch_size))
             for job, t in ctx.timings.items()}
    job = max(needs, key=lambda j: needs[j])
    need, free = needs[job], free_memory_bytes(ctx.device)
    if not math.isfinite(need):
        yield Check("memory", False, "the step's peak memory could not be measured here")
        return
    batch = int(ctx.configs[job].train.batch_size)
    scaled = "" if batch == ctx.timings[job].batch_size else f" (extrapolated from batch {ctx.timings[job].batch_size})"
    # on a GPU, jobs_per_gpu training jobs share it: each may be the largest
    slots = ctx.suite.grid.gpu_slots("train") if ctx.device.type == "cuda" else None
    sharing = slots.per_gpu if slots is not None else 1
    total = need * sharing * margin
    line = (f"largest job {job_name(job)} at batch {batch} needs {_gib(need)}{scaled}; "
            + (f"x {sharing} jobs on a GPU (jobs_per_gpu) " if sharing > 1 else "")
            + f"x {margin:g} margin = {_gib(total)}; free {_gib(free)}")
    if total > free and sharing > 1:
        fits = int(free // (need * margin))
        line += (f": set jobs_per_gpu={fits} (--config jobs_per_gpu={fits})" if fits >= 1 else
                 ": not even one job fits")
    yield Check("memory", total <= free, line)


def _check_estimate(ctx: Context) -> Iterator[Check]:
    """The suite's remaining wall time here: ``hkt plan``'s figure, from the one cost model
    (:func:`hkt.suite.estimate.make_plan`: each shape's step timed at the task's mean length and cached
    in the results directory, start-up, data, evaluation and tracking, what is already done,
    packed on the cores and GPUs), so that the doctor, the plan, the workflow and ``hkt status``
    give one figure."""
    from hkt.config_compose import compose
    from hkt.suite.estimate import make_plan
    from hkt.workflow.sessions import duration

    plan = make_plan(compose("plan", []), ctx.suite, device=ctx.device)
    side, slow = plan.sharing
    packing = (f"{plan.slots['train']} training jobs at once"
               + (f", {side} per GPU, each step {slow:.2f}x its time alone" if side > 1 else ""))
    bound = "at least " if plan.untimed else ""
    untimed = (f"; {len(plan.untimed)} shapes not timed (calibration.budget_s of "
               "config/plan.yaml): their jobs are not counted") if plan.untimed else ""
    done = sum(plan.done().values())
    yield Check("estimate", True,
                f"the suite here: {bound or 'about '}{duration(plan.wall_seconds)} "
                f"({len(ctx.suite.grid.train_jobs())} training jobs, {packing}"
                + (f"; {done} jobs done already" if done else "")
                + f"{untimed}; as `hkt plan` and `hkt status` count it)")


def tracking_uri_of(suite: Suite) -> str:
    """The store the suite's runs log to (:func:`hkt.mlflow_store.tracking_uri`, as the workflow)."""
    from hkt.mlflow_store import tracking_uri

    return tracking_uri(suite.config.get("tracking_uri"), suite.grid.results)


def _check_mlflow(ctx: Context) -> Iterator[Check]:
    from hkt.mlflow_store import with_retry
    from hkt.train.tracking import Tracker

    mc = ctx.cfg.mlflow
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(int(mc.http_timeout_s))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(int(mc.http_retries))
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uri = tracking_uri_of(ctx.suite)
    tracker = Tracker(uri, str(mc.experiment), "hkt-doctor")
    run_id = tracker.start(tags={"hkt.doctor": "write check"})
    tracker.log_final({"doctor_write_check": 1.0}, 0)
    with tempfile.TemporaryDirectory() as tmp:
        note = Path(tmp) / "doctor.txt"
        note.write_text("hkt doctor write check\n")
        tracker.log_artifact(note)
    tracker.finish("FINISHED")
    with_retry(tracker.client.delete_run, run_id, what="deleting the doctor's run")
    yield Check("mlflow", True, f"{uri}: wrote and deleted a run (with an artifact) in "
                                f"experiment '{mc.experiment}'")


CHECKS: tuple[tuple[str, Callable[[Context], Iterator[Check]]], ...] = (
    ("device", _check_device), ("sdpa", check_sdpa), ("hkt fused", check_equivalence),
    ("train", _check_training), ("memory", _check_memory), ("estimate", _check_estimate),
    ("mlflow", _check_mlflow),
)


def _failure(name: str, exc: BaseException) -> Check:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    first = str(exc).splitlines()[0] if str(exc) else ""
    return Check(name, False, f"{type(exc).__name__}: {first} "
                              f"({Path(where.filename).name}:{where.lineno})")


def run_checks(cfg: DictConfig, suite: Suite, report: Callable[[Check], None]) -> list[Check]:
    """Run every check of ``suite`` for the doctor config ``cfg``, reporting each as it
    finishes. An exception inside a check is that check's failure; the others still run."""
    from hkt.device import resolve_device

    device = resolve_device(str(cfg.device), source="config key 'device'")
    ctx = Context(cfg, suite, device, configs=suite_jobs(suite))
    checks: list[Check] = []
    for name, check in CHECKS:
        try:
            for c in check(ctx):
                checks.append(c)
                report(c)
        except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check
            c = _failure(name, exc)
            checks.append(c)
            report(c)
    return checks


# --------------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Check this machine against a suite before running it: device and "
                          "versions, SDPA backends, HKT's fused path, a few training steps of "
                          "every main job, memory, MLflow. Settings: config/doctor.yaml.")
    parser.add_argument("--suite", action="append",
                        help=f"{AUTO} (the workflow's choice), a name in config/suites/ or a file "
                             "(default: config/doctor.yaml's suite); given again, a file merged "
                             "over it, in order, as Snakemake's --configfile")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="overrides of config/doctor.yaml, e.g. suite_profile=cpu train.steps.cpu=3")


def run(args: argparse.Namespace) -> int:
    from hkt.config_compose import compose

    cfg = compose("doctor", list(args.overrides) + ([f"suite={args.suite[0]}"] if args.suite else []))
    start = time.perf_counter()
    suite = doctor_suite(cfg, (args.suite or [])[1:])  # once: auto's choice and the CUDA check too
    print(f"hkt doctor: suite {suite.name} ({suite.reason}), profile {suite.grid.profile}",
          flush=True)

    def report(c: Check) -> None:
        print(f"  {'ok  ' if c.ok else 'FAIL'}  {c.name:<22} {c.detail}", flush=True)

    checks = run_checks(cfg, suite, report)
    failed = [c.name for c in checks if not c.ok]
    took = time.perf_counter() - start
    if failed:
        print(f"hkt doctor: {len(failed)} of {len(checks)} checks FAILED ({', '.join(failed)}) "
              f"in {took:.0f} s", flush=True)
        return 1
    print(f"hkt doctor: all {len(checks)} checks passed in {took:.0f} s", flush=True)
    return 0
