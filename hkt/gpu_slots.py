"""GPUs shared by several jobs of a local workflow: each job claims slots of one GPU and runs on
that GPU alone (``CUDA_VISIBLE_DEVICES``).

Snakemake's local executor counts slots (the global resource ``gpu_slots`` = GPUs × jobs per
GPU; a training or analysis job takes one, a benchmark all of its GPU's) but gives no job a
device. The claim here does: where ``$HKT_GPU_SLOTS`` (``DIR:GPUS:PER_GPU:COMMANDS``, set by
the workflow for its local jobs) says where the slots are and which of ``hkt train``,
``hkt analyze`` and ``hkt bench`` ask for a GPU in this suite, those take file locks (``fcntl.flock``) on the GPU with the most free slots before
they start, and the operating system releases them when the process ends, however it ends
(``kill -9`` too), so a slot is never left taken. Claimers take turns under one lock file, so
two jobs never pick the same slot; when no GPU has the slots free (Snakemake's count keeps that
rare), the claimer waits for them, keeping its turn. On a cluster each job gets a GPU of its
own (``resources.RULE.gpu``): the workflow sets no ``$HKT_GPU_SLOTS`` there.

A shared piece (layer 0, beside the other root modules): the workflow's grid (layer 5) sets the
slots up and ``hkt train``'s loop (layer 3) holds its claim, so it sits below both.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hkt.errors import ConfigError

__all__ = ["ENV_VAR", "RESOURCE", "GPU_COMMANDS", "Slots", "Claim", "claim", "claimed",
           "for_command", "visible_device", "held", "shared_out"]

ENV_VAR = "HKT_GPU_SLOTS"
RESOURCE = "gpu_slots"  # the Snakemake resource that counts them
# The commands (and the workflow rules of the same names) that run on a GPU, and whether their
# jobs share it (one slot each) or have it to themselves (a benchmark's timings must not share).
GPU_COMMANDS = {"train": "share", "analyze": "share", "bench": "whole"}
_TURN = "claim.lock"


@dataclass(frozen=True)
class Slots:
    """Where the slot locks are, how many GPUs with how many slots each, and how many slots one
    job takes (1: it shares the GPU; ``per_gpu``: it has the GPU to itself)."""

    directory: Path
    gpus: int
    per_gpu: int
    take: int = 1

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.per_gpu < 1 or not 1 <= self.take <= self.per_gpu:
            raise ConfigError(f"GPU slots in {self.directory}: {self.gpus} GPUs x {self.per_gpu} "
                              f"slots, taking {self.take}: want at least one "
                              "GPU and one slot per GPU, and a job taking 1 to all of a GPU's slots")

    @property
    def total(self) -> int:
        return self.gpus * self.per_gpu

    def env(self, commands: Sequence[str]) -> str:
        """The value of ``$HKT_GPU_SLOTS`` for jobs of ``commands`` (those that claim):
        ``DIR:GPUS:PER_GPU:COMMAND,COMMAND``."""
        return f"{self.directory}:{self.gpus}:{self.per_gpu}:{','.join(commands)}"

    def taking(self, command: str) -> "Slots":
        """The slots a job of ``command`` (a key of :data:`GPU_COMMANDS`) takes."""
        take = 1 if GPU_COMMANDS[command] == "share" else self.per_gpu
        return Slots(self.directory, self.gpus, self.per_gpu, take)

    @classmethod
    def parse(cls, text: str) -> tuple["Slots", tuple[str, ...]]:
        """The slots and the claiming commands of ``DIR:GPUS:PER_GPU:COMMANDS`` (:meth:`env`)."""
        parts = text.rsplit(":", 3)
        try:
            directory, gpus, per_gpu = parts[0], int(parts[1]), int(parts[2])
            commands = tuple(c for c in parts[3].split(",") if c)
        except (ValueError, IndexError):
            raise ConfigError(f"${ENV_VAR}={text!r}: want DIR:GPUS:PER_GPU:COMMANDS, e.g. "
                              "results/.gpu-slots:1:9:train,analyze (the workflow sets it for "
                              "its local jobs); unset it to run without GPU slots") from None
        unknown = sorted(set(commands) - set(GPU_COMMANDS))
        if unknown:
            raise ConfigError(f"${ENV_VAR}={text!r}: {', '.join(unknown)} claim no GPU slots "
                              f"(commands that can: {', '.join(GPU_COMMANDS)})")
        return cls(Path(directory), gpus, per_gpu), commands

    def path(self, gpu: int, slot: int) -> Path:
        return self.directory / f"gpu{gpu}.slot{slot}.lock"


def for_command(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> Slots | None:
    """The slots the ``hkt`` command ``argv`` claims: none unless ``$HKT_GPU_SLOTS`` is set and
    names the command (its rule asks for a GPU)."""
    value = environ.get(ENV_VAR)
    if not value or not argv:
        return None
    slots, commands = Slots.parse(value)
    return slots.taking(argv[0]) if argv[0] in commands else None


def shared_out(environ: Mapping[str, str] = os.environ) -> dict[str, object] | None:
    """The GPU slots a workflow shares out to its local jobs (its ``$HKT_GPU_SLOTS``, set before
    it writes its plan), as ``plan/suite.json`` holds them for ``hkt status``: ``gpus``,
    ``per_gpu`` and the ``commands`` (rules) that claim; None where it shares none."""
    value = environ.get(ENV_VAR)
    if not value:
        return None
    slots, commands = Slots.parse(value)
    return {"gpus": slots.gpus, "per_gpu": slots.per_gpu, "commands": list(commands)}


@dataclass
class Claim:
    """The slots a job holds (their open, locked files) on GPU ``gpu`` (among the visible ones),
    of ``layout``; ``held_at_start``: the slots of that GPU held, its own included, the moment
    it got them, and ``held_most``: the most seen since (:meth:`sample`); what the run record
    says of how many jobs shared the GPU."""

    gpu: int
    slots: list[int]
    files: list[IO[bytes]]
    layout: Slots | None = None
    held_at_start: int = 0
    held_most: int = 0

    def held_now(self) -> int | None:
        """The slots of this claim's GPU held now, its own included; None when a claimer has
        the turn (probing then could make it see a free slot as taken)."""
        if self.layout is None:
            return None
        turn = _lock(self.layout.directory / _TURN, wait=False)
        if turn is None:
            return None
        try:
            return len(self.slots) + _held_by_others(self.layout, self.gpu, set(self.slots))
        finally:
            turn.close()

    def sample(self) -> None:
        """Count the slots held now into :attr:`held_most` (a training run does at each of its
        sync points)."""
        now = self.held_now()
        if now is not None:
            self.held_most = max(self.held_most, now)

    def release(self) -> None:
        for f in self.files:
            f.close()  # closing the file releases its lock
        self.files = []


def _lock(path: Path, *, wait: bool) -> IO[bytes] | None:
    f = open(path, "ab")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        f.close()
        return None
    except BaseException:
        f.close()
        raise
    return f


def claim(slots: Slots, *, say: Callable[[str], None] = lambda s: None) -> Claim:
    """Take ``slots.take`` slots of one GPU: the GPU with the most free slots (the lowest index
    among equals), so that jobs spread evenly; wait for them if no GPU has enough free."""
    slots.directory.mkdir(parents=True, exist_ok=True)
    turn = _lock(slots.directory / _TURN, wait=True)
    probed: list[tuple[int, int, IO[bytes]]] = []  # (gpu, slot, its locked file): free ones
    mine: list[tuple[int, IO[bytes]]] = []
    try:
        for g in range(slots.gpus):
            for s in range(slots.per_gpu):
                f = _lock(slots.path(g, s), wait=False)
                if f is not None:
                    probed.append((g, s, f))
        free = {g: [(s, f) for gg, s, f in probed if gg == g] for g in range(slots.gpus)}
        gpu = max(range(slots.gpus), key=lambda g: (len(free[g]), -g))
        mine = free[gpu][:slots.take]
        kept = {id(f) for _, f in mine}
        for _, _, f in probed:  # what is not kept goes back
            if id(f) not in kept:
                f.close()
        if len(mine) < slots.take:
            say(f"waiting for {slots.take - len(mine)} more slot(s) of GPU {gpu} "
                f"({slots.per_gpu} per GPU; every one is taken)")
            have = {s for s, _ in mine}
            for s in (s for s in range(slots.per_gpu) if s not in have):
                if len(mine) == slots.take:
                    break
                mine.append((s, _lock(slots.path(gpu, s), wait=True)))
        held = len(mine) + _held_by_others(slots, gpu, {s for s, _ in mine})  # still our turn
        return Claim(gpu, sorted(s for s, _ in mine), [f for _, f in mine], slots, held, held)
    except BaseException:  # a signal while waiting: let go of everything taken so far
        for _, _, f in probed:
            f.close()
        for _, f in mine:
            f.close()
        raise
    finally:
        turn.close()


def _held_by_others(slots: Slots, gpu: int, mine: set[int]) -> int:
    """The slots of ``gpu`` other than ``mine`` that are locked now (probed while holding the
    turn lock, so that no claimer sees a probed slot as taken)."""
    held = 0
    for s in (s for s in range(slots.per_gpu) if s not in mine):
        f = _lock(slots.path(gpu, s), wait=False)
        if f is None:
            held += 1
        else:
            f.close()
    return held


_HELD: list[Claim] = []  # the claim this process holds (at most one: :func:`claimed`)


def held() -> Claim | None:
    """The GPU claim this process holds now (None outside :func:`claimed`, or without slots):
    how the training run learns which slot of which GPU it shares, for its record."""
    return _HELD[-1] if _HELD else None


def visible_device(gpu: int, environ: Mapping[str, str] = os.environ) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the ``gpu``-th GPU this process may use (the machine's
    index, or the ``gpu``-th entry of an inherited ``CUDA_VISIBLE_DEVICES``)."""
    inherited = [d.strip() for d in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return inherited[gpu] if gpu < len(inherited) else str(gpu)


@contextmanager
def claimed(slots: Slots | None, *, say: Callable[[str], None] = print) -> Iterator[Claim | None]:
    """Hold a claim for the duration, with ``CUDA_VISIBLE_DEVICES`` naming its GPU (set before
    anything initialises CUDA, and as it was again afterwards); nothing without ``slots``."""
    if slots is None:
        yield None
        return
    c = claim(slots, say=say)
    device = visible_device(c.gpu)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    what = "the whole GPU" if slots.take == slots.per_gpu else \
        f"slot {', '.join(str(s + 1) for s in c.slots)} of {slots.per_gpu}"
    say(f"hkt: on GPU {c.gpu} of {slots.gpus} ({what}; CUDA_VISIBLE_DEVICES={device})")
    _HELD.append(c)
    try:
        yield c
    finally:
        _HELD.remove(c)
        c.release()
        # as it was: a process that goes on (a test, a notebook) must not keep the claim's GPU
        # view, which its later subprocesses would inherit
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
