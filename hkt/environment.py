"""The software environment a result came from: every installed distribution and its version,
the Python version and the platform, with a short digest that names the whole set.

Training runs, baselines and analyses store :func:`environment` as ``environment.json`` (an
MLflow artifact and a file beside the run record) and its :func:`digest` as the MLflow tag and
record field ``env_digest``; ``hkt aggregate`` warns when runs of one summary differ in it.

The digest covers what decides the software's behaviour: the distributions and versions, the
Python implementation and version, and the operating system and machine architecture. The full
platform string (kernel release, libc) is recorded but not digested, so that nodes of one
cluster that differ only in their kernel patch level share a digest.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from hkt.provenance import PROJECT

__all__ = ["ENV_FILE", "DIGEST_TAG", "environment", "digest",
           "third_party_digest", "save", "load", "package_differences"]

ENV_FILE = "environment.json"
DIGEST_TAG = "env_digest"  # the MLflow tag and the run-record field
DIGEST_CHARS = 12
_DIGESTED = ("python_implementation", "python_version", "system", "machine", "packages")


def canonical_name(name: str) -> str:
    """A distribution's name as PyPI compares them (PEP 503): ``PyYAML`` -> ``pyyaml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages() -> dict[str, str]:
    """``{canonical name: version}`` of every installed distribution, sorted by name.

    When a name is installed twice on the path, the first one found (the one imported) counts."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical_name(name), dist.version)
    return dict(sorted(found.items()))


@lru_cache(maxsize=1)
def _cached() -> str:
    env = {
        "python_implementation": platform.python_implementation(),
        "python_version": platform.python_version(),
        "system": platform.system(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "packages": installed_packages(),
    }
    env["digest"] = digest(env)
    return json.dumps(env)


def environment() -> dict[str, Any]:
    """This process's environment (read once per process; a fresh dict each call)."""
    return json.loads(_cached())


def digest(env: dict[str, Any] | None = None) -> str:
    """Short SHA-256 of an environment's digested fields (this process's by default)."""
    if env is None:
        return environment()["digest"]
    data = {k: env.get(k) for k in _DIGESTED}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:DIGEST_CHARS]


def third_party_digest(env: dict[str, Any]) -> str:
    """The digest of ``env`` with this project's own distribution left out: what runs made
    before and after a release of ``hkt-bench`` share when nothing else changed (the release's
    code differs, and their ``git_commit`` says so). ``scripts/publish_results.py`` compares
    environments by it; the recorded ``env_digest`` stays :func:`digest`."""
    # this project's own distribution: its code is named by a run's git_commit, so a release (a
    # version bump) is no other software environment where runs are compared for publishing
    packages = {k: v for k, v in (env.get("packages") or {}).items() if k != PROJECT}
    return digest({**env, "packages": packages})


def save(directory: str | Path) -> str:
    """Write this environment to ``directory/environment.json``; return its digest."""
    from hkt.fileio import atomic_write_text

    env = environment()
    path = Path(directory) / ENV_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(env, indent=2) + "\n")
    return env["digest"]


def load(path: str | Path) -> dict[str, Any] | None:
    """An ``environment.json`` (or a directory holding one); None when absent or unreadable."""
    path = Path(path)
    if path.is_dir():
        path = path / ENV_FILE
    try:
        env = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return env if isinstance(env, dict) and isinstance(env.get("packages"), dict) else None


def package_differences(envs: dict[str, dict[str, Any]]) -> list[tuple[str, list[str | None]]]:
    """Rows ``(name, [version in each env])`` for what differs between environments.

    ``envs`` maps a label (the digest) to an environment; the Python version, the platform
    and every package installed in some but not all of them, or at different versions, give a
    row (None: not installed there), sorted by name with Python and the platform first."""
    labels = list(envs)
    rows: list[tuple[str, list[str | None]]] = []
    for key, name in (("python_version", "(python)"), ("system", "(system)"),
                      ("machine", "(machine)")):
        values = [envs[lb].get(key) for lb in labels]
        if len(set(values)) > 1:
            rows.append((name, values))
    names = sorted(set().union(*(envs[lb].get("packages", {}) for lb in labels)))
    for name in names:
        values = [envs[lb].get("packages", {}).get(name) for lb in labels]
        if len(set(values)) > 1:
            rows.append((name, values))
    return rows
