"""Where a grid's jobs run: the resources each rule asks for, clamped to the node
(:class:`hkt.workflow.node.Node`), and the GPU slots local jobs claim
(:mod:`hkt.gpu_slots`). A base of :class:`hkt.workflow.grid.Grid`, kept apart so the
grid reads as jobs, paths and arguments; its methods use the grid's ``config``, ``node``,
``results`` and ``cpus``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hkt.gpu_slots import GPU_COMMANDS, RESOURCE, Slots
from hkt.workflow.node import Node

__all__ = ["GPU_SLOTS_DIR", "Placement"]

GPU_SLOTS_DIR = ".gpu-slots"  # under results_dir: the slot locks of hkt/gpu_slots.py


class Placement:
    """Resources and GPU slots of a grid's rules (see :mod:`hkt.workflow.rule_resources`)."""

    config: Mapping[str, Any]
    node: Node
    results: str

    @property
    def cpus(self) -> int:
        """The node's CPUs (what the plan divides the cores by)."""
        return self.node.cpus

    def resources(self, rule: str) -> dict[str, int]:
        """``resources.RULE`` of the config clamped to the node (:meth:`Node.resources`)."""
        return self.node.resources(self._asked(rule))

    def _asked(self, rule: str) -> Mapping[str, Any]:
        return (self.config.get("resources") or {}).get(rule) or {}

    def check_cluster_node(self) -> None:
        """On a cluster, refuse GPU rules that no GPU in view could run (:meth:`Node.check_gpus`)."""
        self.node.check_gpus({r: self._asked(r) for r in self.config.get("resources") or {}})

    @property
    def jobs_per_gpu(self) -> int:
        """How many training jobs share one GPU on a local machine (``jobs_per_gpu``)."""
        return int(self.config.get("jobs_per_gpu") or 1)

    def gpu_layout(self) -> Slots | None:
        """The node's GPU slots (``jobs_per_gpu`` on each GPU), or None without GPUs."""
        if self.node.gpus < 1:
            return None
        return Slots(Path(self.results) / GPU_SLOTS_DIR, self.node.gpus, self.jobs_per_gpu)

    def gpu_env(self) -> str | None:
        """``$HKT_GPU_SLOTS`` for local jobs: the node's slots and the commands whose rules ask
        for a GPU (None when none does, or the node has no GPU)."""
        layout = self.gpu_layout()
        commands = [c for c in GPU_COMMANDS if self.gpu_slots(c) is not None]
        return layout.env(commands) if layout is not None and commands else None

    def gpu_packing(self, cores: int | None = None) -> str | None:
        """What a local run on ``cores`` (default: the node's CPUs) does with the GPUs, in a
        line (None when no training job uses one)."""
        slots = self.gpu_slots("train")
        if slots is None:
            return None
        cores = int(cores or self.cpus)
        at_once = min(slots.total, max(1, cores // int(self.resources("train")["threads"])))
        return (f"GPUs: {slots.gpus}, {slots.per_gpu} training jobs on each (jobs_per_gpu): up "
                f"to {at_once} at once, each on one GPU (Snakemake resource {RESOURCE} = "
                f"{slots.total})")

    def gpu_slots(self, rule: str) -> Slots | None:
        """The GPU slots a local job of ``rule`` claims: one of its GPU's ``jobs_per_gpu`` where
        its jobs share a GPU, all of them otherwise (:data:`~hkt.gpu_slots.GPU_COMMANDS`);
        None where the rule asks no GPU or the node has none."""
        layout = self.gpu_layout()
        if layout is None or int(self.resources(rule).get("gpu", 0) or 0) < 1:
            return None
        return layout.taking(rule)

    def clamps(self) -> list[str]:
        """One line per resource the config asks for above the node, naming it and its limit."""
        return self.node.clamps({r: self._asked(r) for r in self.config.get("resources") or {}})
