"""Which torch `scripts/bootstrap.sh` installs (issue 64): HKT_TORCH when set; else the pinned
release (requirements/torch.txt), from PyPI where `nvidia-smi -L` lists a GPU (PyPI's Linux wheel
is the CUDA build) and from PyTorch's CPU index where it lists none, so that a machine without a
GPU gets no multi-GB CUDA torch unless asked; one line says which and why. Run with
``--which-torch``, which says it and installs nothing."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = next(ln.strip() for ln in (ROOT / "requirements" / "torch.txt").read_text().splitlines()
           if ln.startswith("torch=="))

pytestmark = pytest.mark.skipif(platform.system() != "Linux",
                                reason="the CPU index is chosen on Linux only (PyPI's wheel elsewhere)")


def which_torch(tmp_path: Path, nvidia_smi: str | None, **env: str) -> str:
    """bootstrap's choice with a fake `nvidia-smi` (a shell body) first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n{nvidia_smi or 'exit 127'}\n")
    fake.chmod(0o755)
    e = {k: v for k, v in os.environ.items() if k not in ("HKT_TORCH", "HKT_WHEELHOUSE")}
    e.update(env, PATH=f"{bin_dir}{os.pathsep}{e.get('PATH', '')}")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "bootstrap.sh"), "--which-torch"],
                       capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert line.startswith("bootstrap: torch: ")
    return line


def test_without_a_gpu_the_cpu_build_is_chosen(tmp_path):
    # nvidia-smi absent (127) or present without a driver (NVIDIA-SMI has failed ...: exit 9)
    for body in (None, "echo 'NVIDIA-SMI has failed because it could not communicate'; exit 9"):
        line = which_torch(tmp_path, body)
        assert f"torch: {PIN} --index-url https://download.pytorch.org/whl/cpu (no NVIDIA GPU" in line


def test_with_a_gpu_pypis_cuda_build_and_hkt_torch_wins(tmp_path):
    gpu = "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'"
    assert which_torch(tmp_path, gpu) == f"bootstrap: torch: {PIN} (nvidia-smi lists a GPU: the CUDA build)"
    spec = "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
    assert which_torch(tmp_path, None, HKT_TORCH=spec) == f"bootstrap: torch: {spec} (HKT_TORCH)"
    assert which_torch(tmp_path, None, HKT_WHEELHOUSE=str(tmp_path)).startswith(
        f"bootstrap: torch: {PIN} (the wheelhouse's")
