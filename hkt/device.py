"""Which device a command runs on, and the one way records and benchmark tables name it."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path

import torch

from hkt.errors import ConfigError


def resolve_device(name: str, *, source: str = "--device") -> torch.device:
    """``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda`` or ``cuda:N``.

    ``source`` names where the choice came from, for the error when CUDA is asked for but absent.
    """
    name = str(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"{source} = {name!r}: not a device (use auto, cpu, cuda or cuda:N)") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{source} = {name!r}: no CUDA device is available (use auto or cpu)")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        n = torch.cuda.device_count()
        raise ConfigError(f"{source} = {name!r}: this machine has {n} CUDA device{'s' * (n != 1)} "
                          f"(cuda:0 to cuda:{n - 1})")
    return device


@lru_cache(maxsize=8)  # the CPU does not change while a process runs
def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str | None:
    """The processor's model name as the operating system gives it (Linux: ``/proc/cpuinfo``'s
    ``model name``, e.g. ``AMD EPYC 7B13``); None where it does not say.

    Records name it because a long CPU run is bit for bit reproducible only on the same CPU at
    the same thread count: two machines' runs must be told apart by their records."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return " ".join(value.split())
    model = platform.processor().strip()
    return model if model and model != platform.machine() else None


def describe_device(device: torch.device) -> str:
    """E.g. ``cuda:0 (NVIDIA H200)`` or ``cpu (AMD EPYC 7B13, x86_64, 2 cores, 2 threads)``
    (the model left out where the system does not name it)."""
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    parts = [cpu_model(), platform.machine(), f"{os.cpu_count()} cores",
             f"{torch.get_num_threads()} threads"]
    return f"cpu ({', '.join(p for p in parts if p)})"


def cuda_memory(device: torch.device) -> tuple[int, int, int] | None:
    """GPU memory of ``device`` in bytes: (in use by every process, the device's total, held by
    this process's allocator); None off CUDA, or where the driver cannot say."""
    if device.type != "cuda":
        return None
    try:
        free, total = torch.cuda.mem_get_info(device)
        return int(total - free), int(total), int(torch.cuda.memory_reserved(device))
    except Exception:  # noqa: BLE001 - a device in a bad state: the message says "unknown"
        return None
