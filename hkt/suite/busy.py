"""Whether this machine is busy as a suite's plan is made, and what that does to its estimate.

The plan's total assumes the suite's jobs have the cores they ask for to themselves. Where other
processes keep some of them busy (the load average over the last minute above the cores the
suite leaves free, by more than config/plan.yaml ``busy.margin``), the suite's jobs share the
cores, each getting about ``cpus / (load + asked)`` of one: the *fair share*. The step times
were timed at this load already, by one process (slowed by ``(load + 1) / cpus`` where that
exceeds 1), so a step slows by the ratio of the two; the rest of a job (start-up, data,
tracking) and every other rule's job, constants measured on an idle machine, by the fair share
whole. Contention for caches and memory bandwidth adds to it: the range given runs to
``busy.spread`` times that. Issue 73: the smoke suite planned at 3 min took 5:19 beside one busy
process on 2 cores, 1.77x its plan, where the fair share says 1.5x.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from hkt.suite.estimate import Plan, pack, train_cost
from hkt.workflow.sessions import duration

__all__ = ["Busy", "plan_busy", "busy_line"]


@dataclass(frozen=True)
class Busy:
    """This machine's load when the plan was made, and the suite's wall time at that load."""

    load: float        # the load average over the last minute
    cpus: int          # the CPUs this process may use
    asked: int         # the cores the suite's jobs ask for at once
    low_s: float       # the wall time with every job at its fair share of the cores
    high_s: float      # low_s x config/plan.yaml busy.spread


def plan_busy(plan: Plan, settings: Mapping[str, float]) -> Busy | None:
    """The :class:`Busy` of ``plan`` at the load its start read (``plan.load``: a CPU plan on
    this machine), or None where the load leaves the suite's cores free, the plan read none, or
    nothing is left to run. ``settings``: config/plan.yaml ``busy``."""
    left = [j for j in plan.jobs if not j.done]
    if plan.load is None or not left:
        return None
    load, cpus = plan.load
    per_rule = {j.rule: 0 for j in left}
    for j in left:
        per_rule[j.rule] += j.threads
    asked = max(1, min(cpus, plan.cores, max(per_rule.values())))
    if load <= cpus - asked + float(settings["margin"]):
        return None
    share = (load + asked) / cpus
    timed = max(1.0, (load + 1) / cpus)  # the calibration: one process beside the load
    scaled = []
    for j in plan.jobs:
        factor = share
        if j.rule == "train" and (cost := train_cost(j)) > 0:
            rest = min(1.0, j.overhead_s / cost)
            factor = rest * share + (1 - rest) * share / timed
        scaled.append(replace(j, seconds=j.seconds * factor))
    low = pack(scaled, plan.cores, plan.slots, plan.gpu_slots)
    return Busy(load, cpus, asked, low, low * float(settings["spread"]))


def busy_line(busy: Busy) -> str:
    """The line the plan prints under its total where the machine is busy."""
    return (f"  this machine is busy: load average {busy.load:.2f} over the last minute on "
            f"{busy.cpus} cores, where the suite's jobs ask for {busy.asked} at once; sharing "
            f"them, about {duration(busy.low_s)} to {duration(busy.high_s)} while the load "
            "stays (the total above is for the cores free; config/plan.yaml busy)")
