"""The hashed requirement locks in requirements/: current with pyproject.toml, fully pinned and
hashed, without torch, and compatible with the torch release they were resolved against."""

from __future__ import annotations

import re
import shutil
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent


lock = load_script("lock_requirements")


def requirements(path: Path) -> list[tuple[Requirement, list[str]]]:
    """(requirement, hashes) of each entry of a requirements file (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", path.read_text("utf-8"))
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        hashes = re.findall(r"--hash=(sha256:[0-9a-f]{64})", line)
        out.append((Requirement(re.sub(r"\s*--hash=\S+", "", line)), hashes))
    return out


def test_locks_match_pyproject():
    """Editing pyproject.toml's dependencies without `python scripts/lock_requirements.py` fails here."""
    assert lock.stale_locks() == [], "run `python scripts/lock_requirements.py` (needs uv and PyPI)"


def test_a_dependency_change_makes_the_locks_stale(tmp_path):
    (tmp_path / "requirements").mkdir()
    for name in (*lock.LOCKS, "torch.txt"):
        shutil.copy(ROOT / "requirements" / name, tmp_path / "requirements" / name)
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    (tmp_path / "pyproject.toml").write_text(text + "\n# a comment changes nothing\n")
    assert lock.stale_locks(tmp_path) == []
    (tmp_path / "pyproject.toml").write_text(text.replace('"polars>=1.0"', '"polars>=1.1"'))
    assert lock.stale_locks(tmp_path) == list(lock.LOCKS)
    assert lock.main(["--check"]) == 0


@pytest.mark.parametrize("name", list(lock.LOCKS))
def test_every_entry_is_pinned_and_hashed_and_torch_is_outside(name):
    entries = requirements(ROOT / "requirements" / name)
    assert len(entries) > 50
    for req, hashes in entries:
        assert re.fullmatch(r"==[^,*]+", str(req.specifier)), f"{req} is not pinned"
        assert hashes, f"{req.name} has no hash"
    names = {req.name for req, _ in entries}
    assert "torch" not in names and not any(n.startswith("nvidia-") for n in names)
    # triton, a CUDA-only dependency of torch, only where the dev extra asks for it (impl="tile")
    assert ("triton" in names) == (name == "lock-dev.txt")
    assert {"mlflow", "snakemake", "polars", "sympy", "networkx"} <= names  # torch's deps too


def _pins(name: str, **marker_env: str) -> dict[str, str]:
    """``{name: version}`` of a lock's entries for this interpreter (or ``marker_env``'s)."""
    env = dict(default_environment(), **marker_env)
    return {canonicalize_name(req.name): str(req.specifier)[2:] for req, _ in requirements(ROOT / "requirements" / name)
            if req.marker is None or req.marker.evaluate(env)}


def test_dev_lock_extends_the_runtime_lock():
    runtime, dev = _pins("lock.txt"), _pins("lock-dev.txt")
    assert {k: dev.get(k) for k in runtime} == runtime
    assert {"pytest", "pytest-timeout", "pytest-xdist", "snakemake-executor-plugin-slurm"} <= set(dev) - set(runtime)


def test_locked_versions_satisfy_the_pinned_torch():
    """The locks hold torch's own dependencies at versions the pinned torch accepts."""
    pinned = lock.torch_requirement().split("==", 1)[1]
    try:
        installed = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    if installed.split("+", 1)[0] != pinned:
        pytest.skip(f"torch {installed} installed, the locks are resolved against {pinned}")
    pins, env = _pins("lock.txt"), default_environment()
    for text in metadata.requires("torch") or []:
        req = Requirement(text)
        req.name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate(dict(env, extra="")):
            continue
        if req.name.startswith(("nvidia-", "cuda-")) or req.name == "triton":
            continue  # CUDA builds only; torch pins these itself
        assert req.name in pins, f"torch needs {req.name}, which the lock lacks"
        assert req.specifier.contains(pins[req.name], prereleases=True), (
            f"torch needs {req}, the lock pins {pins[req.name]}")


def test_conda_environment_pins_the_locked_versions():
    """environment.yml pins each direct dependency (and torch) to the locked version."""
    import yaml

    env = yaml.safe_load((ROOT / "environment.yml").read_text("utf-8"))
    conda = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and " =" in dep:
            name, version = dep.split(" =", 1)
            conda[name] = version.split()[0]
    pip = dict(d.split("==", 1) for dep in env["dependencies"] if isinstance(dep, dict)
               for d in dep["pip"] if "==" in d)
    assert env["dependencies"][0] == "python=3.11"
    locked = _pins("lock-dev.txt", python_version="3.11", python_full_version="3.11.0")
    assert conda.pop("pytorch") == lock.torch_requirement().split("==", 1)[1]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    direct = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    dev = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["dev"]}
    assert set(conda) == direct - {"torch"} and set(pip) == dev
    for name, version in {**conda, **pip}.items():
        assert locked.get(name) == version, f"environment.yml pins {name} {version}, the lock {locked.get(name)}"


def test_every_package_the_library_imports_is_a_declared_dependency():
    """A package that hkt/ imports but pyproject.toml does not name arrives only while another
    dependency happens to pull it in (filelock through torch, pillow through matplotlib)."""
    import ast
    import sys

    imported = set()
    for path in (ROOT / "hkt").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"hkt"}
    dists = metadata.packages_distributions()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    # an optional feature's package, imported only where the feature runs and declared in an
    # extra: triton for impl="tile" (hkt/mixers/tile_attention.py says what is missing without it)
    declared |= {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["dev"]
                 if Requirement(r).name == "triton"}
    undeclared = {m: dists.get(m) for m in third_party
                  if not {canonicalize_name(d) for d in dists.get(m, [m])} & declared}
    assert not undeclared, f"imported by hkt/ but not in pyproject.toml's dependencies: {undeclared}"
