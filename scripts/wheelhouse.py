#!/usr/bin/env python3
"""Make a wheelhouse of the locked environment, and check one before an offline install.

    python scripts/wheelhouse.py build DIR                 # the lock + torch, for every Python of
                                                           # requirements/wheelhouse.toml, manylinux x86-64
    python scripts/wheelhouse.py build DIR --dev --python 3.12 --no-torch --omit numpy scipy
    python scripts/wheelhouse.py check DIR --requirements-out REQS   # what bootstrap.sh runs
    python scripts/wheelhouse.py split DIR --max-mib 56    # parts for a size-limited copy

A wheelhouse is a folder of wheels (and the sdists of the few locked packages PyPI has no wheel
of) plus ``wheelhouse.json``, its manifest: the lock it was made from (its SHA-256), the Pythons
and platforms it serves, the packages it leaves to an installed Python (``--omit``), torch's
files per Python, and the SHA-256 of every file in it. ``build`` needs PyPI; ``check`` and
``scripts/bootstrap.sh`` (``HKT_WHEELHOUSE=DIR``) need no network: docs/offline-install.md.

Hashes: every locked requirement is downloaded with pip's ``--require-hashes`` against the
lock's own hashes, and installed the same way. Files the lock does not pin (torch and its
CUDA-only dependencies, the build backend of this package and of the sdists) are pinned by the
manifest's hashes, taken at download; ``check`` refuses a wheelhouse any of whose files differs
from its manifest, lacks a locked requirement for this Python, or was made from another lock,
in one line naming the problem and the command that mends it.

Stdlib only, plus ``packaging`` (pip's own copy where it is not installed): it runs under the
bare interpreter that creates the virtual environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
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

# --- the hashed locks: each requirement, its marker and hashes; a target's markers; what a
# distribution file's name says -------------------------------------------------------------


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
    """The requirements of a lock written by scripts/lock_requirements.py (continuation lines joined)."""
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
                                  "regenerate the lock (python scripts/lock_requirements.py)")
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


ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "requirements" / "wheelhouse.toml"
MANIFEST = "wheelhouse.json"
LOCKS = {False: ROOT / "requirements" / "lock.txt", True: ROOT / "requirements" / "lock-dev.txt"}
SDIST_SUFFIXES = (".tar.gz", ".zip")
REBUILD = "python scripts/wheelhouse.py build"


# ----------------------------------------------------------------------------------- settings
def settings(path: Path = SETTINGS) -> dict:
    """requirements/wheelhouse.toml: default Pythons, platform tags and build requirements."""
    return tomllib.loads(path.read_text("utf-8"))


def pip_target(python: str, platforms: list[str]) -> list[str]:
    """pip download options that pick files for CPython ``python`` on ``platforms``."""
    abi = "cp" + python.replace(".", "")
    return ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
            "--abi", "none", *(a for p in platforms for a in ("--platform", p))]


def _pip(what: str, args: list[str], extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "-q", *args, *extra]
    done = subprocess.run(cmd)
    if done.returncode:
        raise WheelhouseError(f"error: pip could not download {what} (exit {done.returncode}): "
                              "see pip's message above")


def _requires(wheel: Path) -> list[Requirement]:
    """Requires-Dist of a wheel (its METADATA), parsed."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8")
    return [Requirement(ln.split(":", 1)[1].strip()) for ln in text.splitlines()
            if ln.startswith("Requires-Dist:")]


def build(out: Path, *, dev: bool, pythons: list[str], torch: str | None, omit: list[str],
          pip_args: list[str], lock: Path | None = None, conf: dict | None = None) -> dict:
    """Download the lock (and torch) into ``out`` for each of ``pythons``; write the manifest."""
    conf = conf or settings()
    lock = lock or LOCKS[dev]
    entries = read_lock(lock)
    omit_names = sorted({canonicalize_name(n) for n in omit})
    unknown = sorted(set(omit_names) - {e.name for e in entries})
    if unknown:
        raise WheelhouseError(f"error: --omit {' '.join(unknown)}: not in {lock.name}; "
                              "name packages of the lock")
    locked_names = {e.name for e in entries}
    out.mkdir(parents=True, exist_ok=True)
    torch_files: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for py in pythons:
            env = target_env(py)
            wanted = [e for e in entries if e.applies(env) and e.name not in omit_names]
            reqs = Path(tmp) / f"lock-{py}.txt"
            reqs.write_text("\n".join(e.as_requirement() for e in wanted) + "\n", "utf-8")
            target = pip_target(py, conf["platforms"])
            # --no-deps: the lock is complete, and pip would evaluate the dependencies' markers
            # for this interpreter, not the target; --prefer-binary: sdists only where PyPI has
            # no wheel for the target (pip allows them with --no-deps)
            _pip(f"{lock.name} for Python {py}", [*target, "--no-deps", "--prefer-binary",
                                                  "--require-hashes", "-d", str(out), "-r", str(reqs)],
                 pip_args)
            if torch:
                _pip(f"'{torch}' for Python {py}",
                     [*target, "--no-deps", "--only-binary=:all:", "-d", str(out), *torch.split()],
                     pip_args)
                torch_name = Requirement(torch.split()[0]).name
                wheel = next(p for p in sorted(out.iterdir())
                             if p.name.endswith(".whl") and dist_of(p.name)[0] == torch_name
                             and dist_of(p.name)[2] & tags_for(py, conf["platforms"]))
                # torch's own dependencies outside the lock (CUDA builds: nvidia-*, triton),
                # which torch pins exactly
                extra = [str(r) for r in _requires(wheel)
                         if canonicalize_name(r.name) not in locked_names
                         and (r.marker is None or r.marker.evaluate(env))]
                extra = [re.sub(r"\s*;.*$", "", r) for r in extra]
                if extra:
                    _pip(f"torch's dependencies for Python {py}",
                         [*target, "--no-deps", "--only-binary=:all:", "-d", str(out), *extra],
                         pip_args)
                torch_files[py] = [wheel.name, *sorted(
                    p.name for p in out.iterdir() if p.name.endswith(".whl")
                    and any(dist_of(p.name)[0] == canonicalize_name(Requirement(r).name)
                            for r in extra) and dist_of(p.name)[2] & tags_for(py, conf["platforms"]))]
        # this package's build backend, and that of any sdist, for an offline build: with their
        # own dependencies (wheel needs packaging), since pip's isolated build environment sees
        # neither the lock nor the installed Python
        backends = list(conf["build_requires"])
        if backends:
            _pip("the build backends", ["--only-binary=:all:", "-d", str(out), *backends], pip_args)
    files = {p.name: sha256(p) for p in sorted(out.iterdir())
             if p.name.endswith((".whl", *SDIST_SUFFIXES))}
    manifest = {"lock": lock.name, "lock_sha256": sha256(lock), "python": pythons,
                "platforms": conf["platforms"], "omit": omit_names, "torch": torch,
                "torch_files": torch_files, "build_requires": backends, "files": files}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", "utf-8")
    return manifest


# -------------------------------------------------------------------------------------- check
def load_manifest(house: Path) -> dict:
    path = house / MANIFEST
    if not house.is_dir():
        raise WheelhouseError(f"error: wheelhouse {house} does not exist; make one with "
                              f"`{REBUILD} {house}` (docs/offline-install.md)")
    if not path.is_file():
        raise WheelhouseError(f"error: {path} is missing: {house} was not made by "
                              f"`{REBUILD}`; make it with that command (docs/offline-install.md)")
    try:
        return json.loads(path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise WheelhouseError(f"error: {path} is not valid JSON ({err}); rebuild the "
                              f"wheelhouse: {REBUILD} {house}") from None


def check(house: Path, lock: Path, *, system_site: bool = False, only: list[str] = ()) -> list[Locked]:
    """The locked requirements this interpreter installs from ``house``; raises a one-line
    :class:`WheelhouseError` unless every one is there with a locked hash, every file matches
    the manifest, and the manifest was made from ``lock``. ``only``: just these packages (a
    part of a split wheelhouse that serves a first step)."""
    manifest = load_manifest(house)
    opt = " --dev" if lock.name.endswith("-dev.txt") else ""
    if manifest.get("lock_sha256") != sha256(lock):
        raise WheelhouseError(
            f"error: wheelhouse {house} was made from another {manifest.get('lock', 'lock')} than "
            f"{lock.relative_to(ROOT) if lock.is_relative_to(ROOT) else lock}; rebuild it: "
            f"{REBUILD} {house}{opt}")
    files = manifest.get("files", {})
    altered = [name for name, digest in sorted(files.items())
               if (house / name).is_file() and sha256(house / name) != digest]
    gone = [name for name in sorted(files) if not (house / name).is_file()]
    if altered:
        raise WheelhouseError(
            f"error: {house / altered[0]} differs from the wheelhouse manifest's SHA-256"
            + (f" (and {len(altered) - 1} more file(s))" if len(altered) > 1 else "")
            + f": damaged or replaced; download it again: {REBUILD} {house}{opt}")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    tags = set(sys_tags())
    omitted = set(manifest.get("omit", []))
    by_dist: dict[tuple[str, Version], list[str]] = {}
    for name in sorted(files):
        if name in gone:
            continue
        dist, version, wtags = dist_of(name)
        if wtags is None or wtags & tags:
            by_dist.setdefault((dist, version), []).append(name)
    wanted = [e for e in read_lock(lock) if e.applies()]
    if only:
        names = {canonicalize_name(n) for n in only}
        if unknown := sorted(names - {e.name for e in wanted}):
            raise WheelhouseError(f"error: --only {' '.join(unknown)}: not in {lock.name} for this Python")
        wanted = [e for e in wanted if e.name in names]
        omitted = set()
    missing, foreign = [], []
    for e in wanted:
        if e.name in omitted:
            continue
        names = by_dist.get((e.name, Version(e.version)), [])
        if not names:
            missing.append(f"{e.name}=={e.version}")
        elif not any(files[n] in e.hashes for n in names):
            foreign.append(names[0])
    if foreign:
        raise WheelhouseError(
            f"error: {house / foreign[0]} is not the locked release: its SHA-256 is none of "
            f"{lock.name}'s hashes" + (f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else "")
            + f"; rebuild the wheelhouse: {REBUILD} {house}{opt}")
    if missing:
        served = ", ".join(manifest.get("python", [])) or "none"
        raise WheelhouseError(
            f"error: wheelhouse {house} lacks {len(missing)} locked requirement(s) for Python "
            f"{here} on this platform: {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}"
            f" (it serves Python {served}); rebuild it: {REBUILD} {house}{opt} --python {here}")
    if omitted:
        if not system_site:
            raise WheelhouseError(
                f"error: wheelhouse {house} leaves {', '.join(sorted(omitted))} to the installed "
                "Python (built with --omit): set HKT_SYSTEM_SITE=1 so that the venv sees them")
        from importlib.metadata import PackageNotFoundError, version
        absent = []
        for name in sorted(omitted):
            try:
                version(name)
            except PackageNotFoundError:
                absent.append(name)
        if absent:
            raise WheelhouseError(
                f"error: wheelhouse {house} leaves {', '.join(absent)} to the installed Python "
                f"({sys.executable}), which lacks it: rebuild the wheelhouse without "
                f"--omit {' '.join(absent)}")
    return [e for e in wanted if e.name not in omitted]


def torch_requirements(house: Path, spec: str) -> str | None:
    """A hashed requirements file's text for torch (and its CUDA-only dependencies) from the
    wheelhouse, for this Python; None when the wheelhouse holds no torch for it. Raises when
    its torch does not satisfy ``spec`` (HKT_TORCH)."""
    manifest = load_manifest(house)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    names = manifest.get("torch_files", {}).get(here)
    if not names:
        return None
    req, have = Requirement(spec.split()[0]), dist_of(names[0])[1]
    if not req.specifier.contains(have, prereleases=True):
        raise WheelhouseError(f"error: wheelhouse {house} holds torch {have}, not '{req}' (HKT_TORCH): "
                              f"rebuild it with --torch '{req}', or set HKT_TORCH to match")
    lines = []
    for name in names:
        dist, version, _ = dist_of(name)
        lines.append(f"{dist}=={version} --hash=sha256:{manifest['files'][name]}")
    return "\n".join(lines) + "\n"


def torch_installed(spec: str) -> bool:
    """Whether the running interpreter has a torch that satisfies ``spec`` (e.g. torch==2.13.0;
    pip options after the requirement are ignored)."""
    from importlib.metadata import PackageNotFoundError, version
    req = Requirement(spec.split()[0])
    try:
        have = version(req.name)
    except PackageNotFoundError:
        return False
    return req.specifier.contains(have, prereleases=True)


# -------------------------------------------------------------------------------------- split
def split(house: Path, max_mib: float, first: list[str] = ()) -> list[Path]:
    """Copy ``house`` into parts ``house-1``, ``house-2``, … of at most ``max_mib`` MiB each (the
    files of the distributions ``first`` in part 1, then the largest files first, each into the
    first part it fits), each with the whole manifest: for a transport that limits what one copy
    may carry. Copying every part into one folder gives the wheelhouse back, which ``check``
    verifies file by file."""
    import shutil

    manifest = load_manifest(house)
    limit = max_mib * 2**20
    sizes = {name: (house / name).stat().st_size for name in manifest["files"]}
    too_big = [n for n, size in sizes.items() if size > limit]
    if too_big:
        raise WheelhouseError(f"error: {too_big[0]} alone is {sizes[too_big[0]] / 2**20:.1f} MiB, "
                              f"over --max-mib {max_mib:g}")
    wanted = {canonicalize_name(n) for n in first}
    leading = [n for n in sizes if dist_of(n)[0] in wanted]
    if absent := sorted(wanted - {dist_of(n)[0] for n in leading}):
        raise WheelhouseError(f"error: --first {' '.join(absent)}: not in wheelhouse {house}")
    if sum(sizes[n] for n in leading) > limit:
        raise WheelhouseError(f"error: the --first files are over --max-mib {max_mib:g} together")
    parts: list[list[str]] = [leading] if leading else []
    room: list[float] = [limit - sum(sizes[n] for n in leading)] if leading else []
    for name in sorted(set(sizes) - set(leading), key=lambda n: (-sizes[n], n)):
        i = next((i for i, left in enumerate(room) if sizes[name] <= left), None)
        if i is None:
            parts.append([])
            room.append(limit)
            i = len(parts) - 1
        parts[i].append(name)
        room[i] -= sizes[name]
    out = []
    for i, names in enumerate(parts, 1):
        dest = house.with_name(f"{house.name}-{i}")
        if dest.exists():
            raise WheelhouseError(f"error: {dest} exists; remove it first")
        dest.mkdir()
        for name in [*names, MANIFEST]:
            shutil.copy2(house / name, dest / name)
        out.append(dest)
    return out


# ---------------------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download the lock (and torch) into a wheelhouse (needs PyPI)")
    b.add_argument("dir", type=Path)
    b.add_argument("--dev", action="store_true", help="requirements/lock-dev.txt (test tools too)")
    b.add_argument("--python", nargs="+", metavar="X.Y",
                   help="CPython versions to serve (default: requirements/wheelhouse.toml's)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--torch", metavar="SPEC", help="torch to include, pip arguments allowed (default: "
                   "requirements/torch.txt's line), e.g. 'torch==2.13.0 --index-url URL'")
    g.add_argument("--no-torch", action="store_true", help="leave torch out (the target has one)")
    b.add_argument("--omit", nargs="+", default=[], metavar="NAME",
                   help="locked packages the target's Python already has (HKT_SYSTEM_SITE=1)")
    b.add_argument("--pip-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for every pip download (e.g. --index-url=URL)")
    c = sub.add_parser("check", help="check a wheelhouse for this interpreter (no network)")
    c.add_argument("dir", type=Path)
    c.add_argument("--lock", type=Path, default=LOCKS[False])
    c.add_argument("--system-site", action="store_true", help="the venv sees this Python's packages")
    c.add_argument("--requirements-out", type=Path, help="write the hashed requirements to install")
    c.add_argument("--only", nargs="+", default=[], metavar="NAME", help="check just these packages")
    t = sub.add_parser("torch", help="how to get torch: 'installed', or write its hashed requirements")
    t.add_argument("dir", type=Path)
    t.add_argument("spec")
    t.add_argument("--requirements-out", type=Path, required=True)
    p = sub.add_parser("split", help="copy the wheelhouse into parts of at most --max-mib each")
    p.add_argument("dir", type=Path)
    p.add_argument("--max-mib", type=float, required=True, help="largest part, MiB")
    p.add_argument("--first", nargs="+", default=[], metavar="NAME",
                   help="packages whose files go into part 1 (what a first step needs)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            conf = settings()
            torch = None if args.no_torch else (args.torch or _torch_pin())
            manifest = build(args.dir, dev=args.dev, pythons=args.python or conf["python"],
                             torch=torch, omit=args.omit, pip_args=args.pip_arg, conf=conf)
            size = sum((args.dir / n).stat().st_size for n in manifest["files"])
            print(f"wheelhouse {args.dir}: {len(manifest['files'])} files, {size / 2**20:.1f} MiB, "
                  f"Python {', '.join(manifest['python'])}")
        elif args.cmd == "check":
            wanted = check(args.dir, args.lock.resolve(), system_site=args.system_site, only=args.only)
            if args.requirements_out:
                args.requirements_out.write_text(
                    "\n".join(e.as_requirement() for e in wanted) + "\n", "utf-8")
        elif args.cmd == "split":
            for part in split(args.dir, args.max_mib, args.first):
                size = sum(f.stat().st_size for f in part.iterdir())
                print(f"{part}: {len(list(part.iterdir())) - 1} files, {size / 2**20:.1f} MiB")
        else:
            if torch_installed(args.spec):
                print("installed")
                return 0
            text = torch_requirements(args.dir, args.spec)
            if text is None:
                here = f"{sys.version_info.major}.{sys.version_info.minor}"
                raise WheelhouseError(
                    f"error: no torch satisfying '{args.spec.split()[0]}' is installed and wheelhouse "
                    f"{args.dir} holds none for Python {here}: rebuild it with torch "
                    f"({REBUILD} {args.dir} --python {here}), or install torch first and set "
                    "HKT_SYSTEM_SITE=1")
            args.requirements_out.write_text(text, "utf-8")
            print("wheelhouse")
    except WheelhouseError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


def _torch_pin() -> str:
    lines = [ln.strip() for ln in (ROOT / "requirements" / "torch.txt").read_text("utf-8").splitlines()]
    return next(ln for ln in lines if ln.startswith("torch=="))


if __name__ == "__main__":
    sys.exit(main())
