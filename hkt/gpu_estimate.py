"""A suite's training time on a GPU, from step times published there (``hkt plan`` on a machine
without CUDA; issue 53).

``gpu_reference`` in config/plan.yaml holds, per model, the measured milliseconds per step of one
published GPU run and the overrides that compose that run. A job's step on that GPU is its
model's published step times the ratio of the job's step time to the published run's, both
timed on this machine the same way (:mod:`hkt.calibration`); the jobs share the GPU
``jobs_per_gpu`` at a time, as the published runs did. A GPU gains more on big shapes than a CPU,
so the ratio leans long; a model without a published step is left out, and named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hkt.calibration import Shape, shape_of
from hkt.workflow.sessions import duration

__all__ = ["gpu_training_seconds", "gpu_line"]

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
