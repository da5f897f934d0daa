"""Which device a command runs on, and the one way records and benchmark tables name it."""

from __future__ import annotations

import os
import platform

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


def describe_device(device: torch.device) -> str:
    """E.g. ``cuda:0 (NVIDIA H200)`` or ``cpu (x86_64, 2 cores, 2 threads)``."""
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    machine = platform.processor() or platform.machine()
    return f"cpu ({machine}, {os.cpu_count()} cores, {torch.get_num_threads()} threads)"


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
