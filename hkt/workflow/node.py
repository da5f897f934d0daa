"""The node a suite's jobs run on, and the resources each rule asks for clamped to it.

``resources.RULE`` (config/config.yaml) is the one place resources are set; ``node`` says the
size of the machine a job runs on (null = this one: its CPUs, memory and NVIDIA GPUs). A job
asking for more than its node has would never be scheduled (SLURM keeps it PENDING), so the
asks are clamped, and each clamp is said before the workflow starts. Torch-free: a dry run stays
fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hkt.errors import GridError

__all__ = ["Node", "available_cpus", "load_average", "machine_memory_mb", "machine_gpus"]


def available_cpus() -> int:
    """The CPUs this process may use (its affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> tuple[float, int] | None:
    """This machine's load average over the last minute and the CPUs this process may use;
    None where the system does not say (no ``os.getloadavg``)."""
    try:
        return os.getloadavg()[0], available_cpus()
    except (AttributeError, OSError):
        return None


def machine_memory_mb() -> int:
    """This machine's memory in MB (MemTotal; what `slurmd -C` reports as RealMemory)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20


def machine_gpus() -> int:
    """The NVIDIA GPUs this process may use: CUDA_VISIBLE_DEVICES if set, else the driver's
    count (/proc/driver/nvidia/gpus); without importing torch, so that a dry run stays fast."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [d.strip() for d in visible.split(",") if d.strip()]
        return 0 if not ids or ids[0].startswith("-") else len(ids)
    gpus = Path("/proc/driver/nvidia/gpus")
    return len(list(gpus.iterdir())) if gpus.is_dir() else 0


@dataclass(frozen=True)
class Node:
    """The size of the node jobs run on; ``given``: the keys config ``node`` set (gpus 0 is a
    node without GPUs, not "unknown")."""

    cpus: int
    mem_mb: int
    gpus: int
    given: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, node: Mapping[str, Any], *, cpus: int | None = None) -> "Node":
        """Config ``node`` (a key left null: this machine's); ``cpus`` replaces the CPU count."""
        return cls(int(cpus or node.get("cpus") or available_cpus()),
                   int(node.get("mem_mb") or machine_memory_mb()),
                   int(machine_gpus() if node.get("gpus") is None else node["gpus"]),
                   frozenset(k for k in ("cpus", "mem_mb", "gpus") if node.get(k) is not None))

    def resources(self, asked: Mapping[str, Any]) -> dict[str, int]:
        """A rule's ``resources`` with ``threads``, ``mem_mb`` and ``gpu`` clamped to the node
        (the documented behaviour, config/README.md; :meth:`clamps` says what changed)."""
        res = dict(asked)
        res["threads"] = max(1, min(int(res.get("threads", 1)), self.cpus))
        for key, limit in (("mem_mb", self.mem_mb), ("gpu", self.gpus)):
            if key in res:
                res[key] = min(int(res[key]), limit)
        return res

    def check_gpus(self, asked: Mapping[str, Mapping[str, Any]]) -> None:
        """On a cluster, refuse to turn GPU jobs into CPU jobs by accident: a rule asks for GPUs,
        the machine running Snakemake (a login node) has none, and config ``node.gpus`` does not
        say what the compute nodes have. Raises :class:`ConfigError` naming the rules."""
        if "gpus" in self.given or self.gpus > 0:
            return
        asking = sorted(r for r, res in asked.items() if int(res.get("gpu", 0)) > 0)
        if asking:
            raise GridError(
                f"resources.{{{','.join(asking)}}}.gpu ask for GPUs, this machine has none and "
                "config `node.gpus` is not set: give the compute node's size (a config file "
                "with node: {cpus: 32, mem_mb: 256000, gpus: 4}; `sinfo -o \"%P %c %m %G\"`), "
                "or node: {gpus: 0} to run every job on CPUs")

    def clamps(self, asked: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """One line per resource asked for above the node, naming it and its limit."""
        limits = {"threads": (self.cpus, "CPUs"), "mem_mb": (self.mem_mb, "MB"),
                  "gpu": (self.gpus, "GPUs")}
        lines = []
        for rule in sorted(asked):
            given = self.resources(asked[rule])
            for key, (limit, unit) in limits.items():
                if key in asked[rule] and int(asked[rule][key]) > given[key]:
                    lines.append(f"resources.{rule}.{key}: {asked[rule][key]} asked, the node has "
                                 f"{limit} {unit}: {given[key]} used (config `node` sets the node)")
        return lines
