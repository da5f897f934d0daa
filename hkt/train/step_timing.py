"""Timing and peak memory of a training step as ``hkt train`` takes it: what ``hkt bench``,
``hkt doctor`` and the estimate (:mod:`hkt.suite.estimate`) all measure with. It is training's
own step, timed, so it sits in the training package (layer 3), below every command that uses it
(no command imports another command's module).

Peak CPU memory is malloc's in-use bytes (glibc ``mallinfo2``) sampled after every aten
operation; on CUDA, the allocator's peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils._python_dispatch import TorchDispatchMode

from hkt.train.optim import build_optimizer
from hkt.train.step import autocast_dtype, forward_backward

__all__ = ["peak_memory_bytes", "time_call", "TrainStep", "median", "StepTiming",
           "measure_training_step"]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _load_mallinfo2() -> Callable[[], int] | None:
    """Bytes currently allocated through malloc (heap + mmap), from glibc; None elsewhere."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2

    def in_use() -> int:
        info = fn()
        return int(info.uordblks + info.hblkhd)

    return in_use


_IN_USE = _load_mallinfo2()


class _PeakTracker(TorchDispatchMode):
    """Samples the process's allocated bytes after every aten op (CPU peak memory)."""

    def __init__(self, in_use: Callable[[], int]) -> None:
        super().__init__()
        self.in_use, self.base, self.peak = in_use, None, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.base is None:  # measured at the first op: entering the mode allocates too
            self.base = self.in_use()
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, self.in_use() - self.base)
        return out


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> float:
    """Peak memory allocated while ``fn`` runs, above what was allocated before it.

    CUDA: the caching allocator's peak. CPU: malloc's in-use bytes sampled after every aten
    operation (glibc's mallinfo2), which sees every tensor the operations keep alive, including
    those saved for backward; NaN where mallinfo2 is unavailable.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return float(torch.cuda.max_memory_allocated(device) - base)
    if _IN_USE is None:
        return float("nan")
    with _PeakTracker(_IN_USE) as tracker:
        fn()
    return float(tracker.peak)


def time_call(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds one call of ``fn`` takes (synchronising CUDA)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


class TrainStep:
    """A model's training step as ``hkt train`` takes it (the same forward/backward function,
    optimizer, precision and clipping from the composed training config), for timing.
    ``loss`` is the last step's loss (a device tensor: reading it synchronises)."""

    def __init__(self, model: torch.nn.Module, train_cfg: Any, device: torch.device, total_steps: int):
        self.model, self.device = model, device
        self.opt, _ = build_optimizer(model, train_cfg.optim, total_steps, device)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.amp = autocast_dtype(str(train_cfg.train.precision), device)
        self.grad_clip = train_cfg.optim.grad_clip
        self.loss: torch.Tensor | None = None
        model.train()

    def time(self, tokens: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> float:
        """Seconds for forward, loss, backward, clipping and the optimizer step."""
        def step() -> None:
            self.loss, _, _ = forward_backward(self.model, self.opt, self.params, tokens, mask,
                                               labels, amp=self.amp, grad_clip=self.grad_clip)
            self.opt.step()

        return time_call(step, self.device)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass(frozen=True)
class StepTiming:
    """One job's measured training step."""

    seq_len: int
    batch_size: int  # the batch the step ran with
    n_params: int
    ms_per_step: float  # median over the timed steps
    loss: float  # the last step's loss
    peak_bytes: float  # the step's peak above what was allocated before it (activations, grads)
    state_bytes: int  # parameters + optimizer state, alive across steps

    def bytes_needed(self, batch_size: int) -> float:
        """Memory a step of ``batch_size`` needs: state plus the peak scaled linearly in batch."""
        return self.state_bytes + self.peak_bytes * batch_size / self.batch_size


def measure_training_step(cfg: DictConfig, device: torch.device, *, steps: int, warmup: int,
                          batch_size: int | None = None, vocab_size: int,
                          seed: int = 0, peak: bool = True, length: int | None = None) -> StepTiming:
    """Time ``hkt train``'s step for the job ``cfg`` on a synthetic batch at the task's T.

    ``warmup`` untimed steps, then ``steps`` timed ones (median), then one more under the peak
    memory tracker (``peak`` False: not measured, NaN; a time-only caller saves a step).
    ``batch_size`` None = the config's batch; ``length`` None = T (a batch of ``length`` tokens
    stands for the task's real batches, which the loader pads to their longest member).
    """
    from hkt.models import build_model

    torch.manual_seed(seed)
    b, t = int(batch_size or cfg.train.batch_size), int(cfg.task.max_length)
    n = min(int(length or t), t)
    classes = int(cfg.task.num_classes)
    model = build_model(OmegaConf.to_container(cfg.model, resolve=True), vocab_size=vocab_size,
                        num_classes=classes, max_length=t).to(device)
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab_size, (b, n), generator=g).to(device)
    mask = torch.ones(b, n, dtype=torch.bool, device=device)
    labels = torch.randint(0, classes, (b,), generator=g).to(device)
    step = TrainStep(model, cfg, device, total_steps=warmup + steps + 1)
    for _ in range(warmup):
        step.time(tokens, mask, labels)
    times = sorted(step.time(tokens, mask, labels) for _ in range(steps))
    peak_bytes = (peak_memory_bytes(lambda: step.time(tokens, mask, labels), device) if peak
                  else float("nan"))
    state = sum(p.numel() * p.element_size() for p in model.parameters())
    state += sum(v.numel() * v.element_size() for s in step.opt.state.values()
                 for v in s.values() if torch.is_tensor(v))
    return StepTiming(seq_len=n, batch_size=b, n_params=sum(p.numel() for p in model.parameters()),
                      ms_per_step=1000 * median(times),
                      loss=float(step.loss.detach()), peak_bytes=peak_bytes, state_bytes=state)
