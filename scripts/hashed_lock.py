"""The hashed locks of requirements/ as scripts/wheelhouse.py reads them: each requirement, its
marker and its allowed SHA-256 hashes; the marker variables of a target CPython on manylinux
x86-64; and what a distribution file's name says (name, version, wheel tags).

Stdlib only, plus ``packaging`` (pip's own copy where it is not installed): it runs under the
bare interpreter that creates the virtual environment.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

try:  # the bare interpreter that makes the venv may lack packaging, never pip's copy of it
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.tags import compatible_tags, cpython_tags, sys_tags
    from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
    from packaging.version import Version
except ImportError:  # pragma: no cover - depends on the interpreter
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.tags import compatible_tags, cpython_tags, sys_tags
    from pip._vendor.packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
    from pip._vendor.packaging.version import Version

# what scripts/wheelhouse.py takes from here, packaging's names among them
__all__ = ["Locked", "Requirement", "Version", "WheelhouseError", "canonicalize_name", "dist_of",
           "read_lock", "sha256", "sys_tags", "tags_for", "target_env"]


class WheelhouseError(Exception):
    """A wheelhouse that cannot serve this install; the message is the one line users see."""



# ------------------------------------------------------------------------------------ the lock
@dataclass(frozen=True)
class Locked:
    """One requirement of a hashed lock: ``name==version ; marker`` and its allowed hashes."""

    name: str          # canonical (PEP 503) name
    version: str
    marker: str | None
    hashes: frozenset[str]
    line: str          # the requirement as written, without hashes

    def applies(self, env: dict[str, str] | None = None) -> bool:
        """Whether the marker holds in ``env`` (None: the running interpreter)."""
        return self.marker is None or Marker(self.marker).evaluate(env)

    def as_requirement(self) -> str:
        """The line for a pip requirements file: pinned, hashed, without its marker (already
        evaluated for the target)."""
        return " \\\n    ".join([f"{self.name}=={self.version}",
                                *(f"--hash=sha256:{h}" for h in sorted(self.hashes))])


def read_lock(path: Path) -> list[Locked]:
    """The requirements of a lock written by scripts/lock.py (continuation lines joined)."""
    entries, buf = [], ""
    for raw in path.read_text("utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        buf += " " + line.rstrip("\\").strip()
        if line.endswith("\\"):
            continue
        req, hashes = buf.strip(), set()
        for h in re.findall(r"--hash=sha256:([0-9a-f]{64})", req):
            hashes.add(h)
        spec = re.sub(r"\s*--hash=\S+", "", req).strip()
        buf = ""
        parsed = Requirement(spec)
        pins = [s for s in parsed.specifier if s.operator == "=="]
        if len(pins) != 1 or not hashes:
            raise WheelhouseError(f"error: {path}: '{spec}' is not pinned with hashes; "
                                  "regenerate the lock (python scripts/lock.py)")
        entries.append(Locked(canonicalize_name(parsed.name), pins[0].version,
                              str(parsed.marker) if parsed.marker else None, frozenset(hashes), spec))
    return entries


def target_env(python: str) -> dict[str, str]:
    """Marker variables of CPython ``python`` (e.g. "3.12") on manylinux x86-64."""
    return {"python_version": python, "python_full_version": f"{python}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": f"{python}.0", "os_name": "posix", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "platform_release": "",
            "platform_version": "", "extra": ""}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dist_of(filename: str) -> tuple[str, Version, frozenset | None]:
    """(canonical name, version, wheel tags or None for an sdist) of a distribution file."""
    if filename.endswith(".whl"):
        name, version, _build, tags = parse_wheel_filename(filename)
        return canonicalize_name(name), version, frozenset(tags)
    name, version = parse_sdist_filename(filename)
    return canonicalize_name(name), version, None


def tags_for(python: str, platforms: list[str]) -> frozenset:
    """The wheel tags CPython ``python`` accepts on ``platforms`` (enough to tell Pythons apart)."""
    version = tuple(int(x) for x in python.split("."))
    return frozenset([*cpython_tags(version, platforms=platforms),
                      *compatible_tags(version, platforms=[*platforms, "any"])])

