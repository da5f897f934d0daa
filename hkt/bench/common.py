"""What the benchmarks share: peak-memory measurement, timing, and writing tables."""

from __future__ import annotations

import ctypes
import ctypes.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode


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


def timed_train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, tokens: torch.Tensor,
                     mask: torch.Tensor, labels: torch.Tensor, device: torch.device) -> float:
    """Seconds for one training step as ``hkt train`` takes it: forward, cross-entropy,
    backward, gradient clipping (norm 1) and the optimizer step."""

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(tokens, mask).float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return time_call(step, device)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return "–" if v != v else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_outputs(out_dir: Path, stem: str, csv_text: str, markdown: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    csv_path.write_text(csv_text)
    md_path.write_text(markdown + "\n")
    return csv_path, md_path
