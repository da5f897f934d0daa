"""Where a result came from: the code's git state, for run records of every kind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import hkt


def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding the hkt package; (None, None) outside git.

    Dirty means tracked files differ from the commit; untracked files do not count."""
    root = Path(hkt.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=root, capture_output=True, text=True, timeout=30)
        return commit.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
