"""What the benchmarks share: peak-memory measurement, timing, the training step as ``hkt train``
takes it, and writing their tables."""

from __future__ import annotations

import argparse
import csv
import ctypes
import ctypes.util
import io
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from hkt.fileio import atomic_write_text
from hkt.report.writers import markdown
from hkt.train.optim import build_optimizer
from hkt.train.step import autocast_dtype, forward_backward


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


def add_run_arguments(parser: argparse.ArgumentParser, *, steps: int, warmup: int) -> None:
    """The options every training-step benchmark takes: steps, device, threads, seed, output."""
    parser.add_argument("--steps", type=int, default=steps, help=f"timed training steps (default {steps})")
    parser.add_argument("--warmup", type=int, default=warmup, help=f"untimed steps first (default {warmup})")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/bench"),
                        help="output directory (default results/bench)")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (None: unchanged), restoring the count afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def number(v: object) -> str:
    """A measured number for a benchmark table: three significant digits, whole numbers from
    100 on, "–" for NaN (not measurable here)."""
    if isinstance(v, float):
        return "–" if v != v else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def markdown_numbers(header: list[str], rows: list[list[object]], align: str | None = None) -> str:
    """A Markdown table of measurements (the one table writer, :func:`hkt.report.writers.markdown`)."""
    return markdown(header, [[number(v) for v in row] for row in rows], align)


def csv_text(rows: Iterable[dict[str, Any]], columns: Iterable[str]) -> str:
    """Rows as CSV with the given columns (others dropped); full precision (tables round)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_outputs(out_dir: Path, stem: str, csv_text: str, markdown: str) -> tuple[Path, Path]:
    """``{stem}.csv`` and ``{stem}.md`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    atomic_write_text(csv_path, csv_text)
    atomic_write_text(md_path, markdown.rstrip("\n") + "\n")
    return csv_path, md_path
