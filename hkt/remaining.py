"""The remaining wall time of a suite (``hkt status``): its unfinished jobs laid out on what the
workflow runs them on, packed as ``hkt plan`` packs them.

A job takes its threads of the suite's cores, one of its rule's slots (the plan's jobs of that
rule at once, ``plan/suite.json``'s ``slots``: the cores over the rule's threads or, where the
rule's jobs share GPUs, ``jobs_per_gpu`` per GPU; :func:`hkt.plan.estimate`) and, on a GPU suite
run locally, its GPU slots (``gpu_slots``: what ``$HKT_GPU_SLOTS`` said when the workflow
started; a training or analysis job takes one, a benchmark all of a GPU's), so that a 16-core
machine with one GPU runs 9 training jobs at once, not 16. The plan's times already count the
slowdown of jobs side by side on a GPU (config/plan.yaml ``gpu_sharing``). Torch-free.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from hkt.workflow.gpuslots import GPU_COMMANDS
from hkt.workflow.grid import RULE_ORDER

__all__ = ["gpu_takes", "schedule", "scale_other_rules"]


def gpu_takes(gpu_slots: Mapping[str, Any] | None) -> dict[str, int]:
    """The GPU slots one job of each rule takes, from the plan's ``gpu_slots`` (``gpus``,
    ``per_gpu``, ``commands``: the rules that claim; :func:`hkt.workflow.gpuslots.shared_out`)."""
    if not gpu_slots:
        return {}
    per_gpu = int(gpu_slots["per_gpu"])
    return {c: 1 if GPU_COMMANDS.get(c) == "share" else per_gpu for c in gpu_slots["commands"]}


def schedule(jobs: Sequence[Any], cores: int, slots: Mapping[str, int] | None = None,
             gpu_slots: Mapping[str, Any] | None = None) -> float:
    """Seconds until the last of ``jobs`` (:class:`hkt.status.JobState`) ends: running ones from
    now, waiting ones (and stopped ones, which the next run resumes) longest first within each
    rule, each at the earliest time its threads of ``cores``, a slot of its rule (``slots``, the
    plan's per rule; none: cores alone) and its GPU slots (``gpu_slots``) are free, after the
    data is prepared; the aggregate after everything. Dependencies within a task's chain (an
    analysis waits for its run) are not modelled: it leans short where analyses would wait."""
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


def scale_other_rules(jobs: Sequence[Any]) -> None:
    """The other rules' allowances (config/plan.yaml) at the pace their finished jobs took."""
    for rule in {j.rule for j in jobs} - {"train"}:
        took = [j.elapsed_s / j.planned_s for j in jobs
                if j.rule == rule and j.state == "done" and j.elapsed_s > 0 and j.planned_s > 0]
        if not took:
            continue
        pace = statistics.median(took)
        for j in jobs:
            if j.rule == rule and j.state in ("waiting", "stopped"):
                j.remaining_s = j.planned_s * pace
            elif j.rule == rule and j.state == "running":
                j.remaining_s = max(0.0, j.planned_s * pace - j.elapsed_s)
