"""What every check of ``hkt doctor`` shares: its report line (:class:`Check`), what it is given
(:class:`Context`: the doctor's config, the suite, the device, the jobs' configs and timings),
and a job's name in the report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig

from hkt.train.step_timing import StepTiming
from hkt.workflow.suites import Suite

__all__ = ["Check", "Context", "job_name"]


@dataclass
class Check:
    """One line of the report."""

    name: str
    ok: bool
    detail: str


@dataclass
class Context:
    cfg: DictConfig
    suite: Suite  # made once by the command (hkt.workflow.suites)
    device: torch.device
    amp: torch.dtype | None = None
    configs: dict[Any, DictConfig] | None = None  # per training job (hkt.workflow.grid.Job)
    timings: dict[Any, StepTiming] | None = None

    @property
    def precision(self) -> str:
        return "bf16" if self.amp is torch.bfloat16 else "fp32"

    @property
    def dtype(self) -> torch.dtype:
        return self.amp or torch.float32


def job_name(job: Any) -> str:
    return f"{job.task}/{job.model}/{job.variant}"
