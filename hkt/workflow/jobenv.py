"""The environment the workflow's jobs run in (torch-free: read when the Snakefile is parsed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["put_interpreter_first"]


def put_interpreter_first() -> str:
    """Put the ``bin/`` of the Python that runs Snakemake first on this process's PATH, which
    the jobs inherit: rules call ``hkt``, and `.venv/bin/snakemake` must find the venv's without
    an activated venv (the README's main command). Returns the new PATH."""
    here = str(Path(sys.executable).parent)
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != here]
    os.environ["PATH"] = os.pathsep.join([here, *rest])
    return os.environ["PATH"]
