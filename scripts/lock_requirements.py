#!/usr/bin/env python3
"""Regenerate the hashed requirement locks in requirements/ from pyproject.toml.

    python scripts/lock_requirements.py            # needs uv (pip install uv) on PATH, and PyPI
    python scripts/lock_requirements.py --check    # exit 1 if the locks are stale (no network)

Two locks, both universal (every platform, Python >= 3.11) and fully pinned with hashes,
written by ``uv pip compile --universal --generate-hashes``:

- ``requirements/lock.txt``: the package's dependencies (what ``bootstrap.sh`` installs);
- ``requirements/lock-dev.txt``: the same plus the ``dev`` extra (test tools, slurm executor).

torch stays outside the locks, so that any build (CPU, CUDA, conda) can be installed beside
them: the resolution includes the torch release pinned in ``requirements/torch.txt`` (so its
own dependencies — sympy, networkx, jinja2, filelock, fsspec, … — are locked at versions it
accepts), then torch and its CUDA-only dependencies (nvidia-*, cuda-*, triton, which torch
itself pins exactly) are left out of the files, except those an extra asks for by name: the
dev extra's triton (the tile kernel's tests) stays in ``lock-dev.txt``, at the release the
pinned torch's CUDA builds require. Each lock's first line records a digest of
the inputs (the dependency lists of pyproject.toml and the torch pin), which
``tests/test_lock_requirements.py`` recomputes: editing the dependencies without re-locking fails the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
TORCH_PIN = ROOT / "requirements" / "torch.txt"
LOCKS = {"lock.txt": [], "lock-dev.txt": ["dev"]}  # file -> extras
DIGEST_PREFIX = "# inputs-sha256: "
# torch's dependencies that only its CUDA builds need (pinned exactly by torch itself)
CUDA_ONLY = re.compile(r"^(nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+|triton)==", re.MULTILINE)


def torch_requirement(path: Path = TORCH_PIN) -> str:
    """The torch release the locks are resolved against (bootstrap's default torch)."""
    lines = [ln.strip() for ln in path.read_text("utf-8").splitlines()]
    reqs = [ln for ln in lines if ln and not ln.startswith("#")]
    if len(reqs) != 1 or not reqs[0].startswith("torch=="):
        raise SystemExit(f"error: {path} must hold exactly one line 'torch==VERSION'")
    return reqs[0]


def inputs_digest(pyproject: Path = PYPROJECT, torch_pin: Path = TORCH_PIN) -> str:
    """SHA-256 over what the locks are resolved from: requires-python, the dependencies, the
    optional dependencies and the torch pin (formatting and comments of the files don't count)."""
    project = tomllib.loads(pyproject.read_text("utf-8"))["project"]
    inputs = {
        "requires-python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "torch": torch_requirement(torch_pin),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def recorded_digest(lock: Path) -> str | None:
    """The inputs digest in a lock's first line (None when the file or the line is missing)."""
    if not lock.exists():
        return None
    first = lock.read_text("utf-8").split("\n", 1)[0]
    return first[len(DIGEST_PREFIX):].strip() if first.startswith(DIGEST_PREFIX) else None


def stale_locks(root: Path = ROOT) -> list[str]:
    """Names of the locks whose recorded digest differs from the current inputs."""
    want = inputs_digest(root / "pyproject.toml", root / "requirements" / "torch.txt")
    return [name for name in LOCKS if recorded_digest(root / "requirements" / name) != want]


def _compile(uv: str, extras: list[str], torch: str, out: Path, no_emit: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        pin = Path(tmp) / "torch.txt"
        pin.write_text(torch + "\n")
        cmd = [uv, "pip", "compile", str(PYPROJECT), "--universal", "--python-version", "3.11",
               "--generate-hashes", "--no-header", "--quiet", "-o", str(out)]
        cmd += [a for e in extras for a in ("--extra", e)]
        # a pinned torch as a *requirement* (not only a constraint) puts its deps in the resolution
        cmd += [str(pin)]
        cmd += [a for name in no_emit for a in ("--no-emit-package", name)]
        subprocess.run(cmd, check=True, cwd=ROOT)
        return out.read_text("utf-8")


def requested(extras: list[str], pyproject: Path = PYPROJECT) -> set[str]:
    """Names the extras ``extras`` of pyproject.toml ask for directly (lowercase)."""
    optional = tomllib.loads(pyproject.read_text("utf-8"))["project"].get("optional-dependencies", {})
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for e in extras for r in optional[e]}


def write_locks(uv: str) -> None:
    torch = torch_requirement()
    digest = inputs_digest()
    for name, extras in LOCKS.items():
        out = ROOT / "requirements" / name
        first = _compile(uv, extras, torch, out, ["torch"])
        found = set(CUDA_ONLY.findall(first))
        kept = found & requested(extras)
        cuda = sorted(found - kept)
        body = _compile(uv, extras, torch, out, ["torch", *cuda])
        header = (f"{DIGEST_PREFIX}{digest}\n"
                  "# Generated by `python scripts/lock_requirements.py` (uv pip compile --universal "
                  "--generate-hashes); do not edit.\n"
                  f"# Resolved with {torch}; torch and its CUDA-only dependencies are installed "
                  "separately (scripts/bootstrap.sh, HKT_TORCH)"
                  + (f", but for {', '.join(sorted(kept))}, which an extra asks for" if kept else "")
                  + ".\n")
        out.write_text(header + body, "utf-8")
        print(f"wrote {out.relative_to(ROOT)} ({body.count('==')} pins)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true",
                    help="only check that the locks match pyproject.toml (no network)")
    ap.add_argument("--uv", default=shutil.which("uv"), help="the uv executable")
    args = ap.parse_args(argv)
    if args.check:
        stale = stale_locks()
        for name in stale:
            print(f"error: requirements/{name} is stale: pyproject.toml's dependencies or "
                  "requirements/torch.txt changed; run `python scripts/lock_requirements.py`", file=sys.stderr)
        return 1 if stale else 0
    if not args.uv:
        print("error: uv not found; `pip install uv` (or pass --uv PATH)", file=sys.stderr)
        return 2
    write_locks(args.uv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
