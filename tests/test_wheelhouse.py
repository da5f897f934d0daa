"""Installs without internet (issue 49): scripts/wheelhouse.py makes a wheelhouse of a hashed lock
and scripts/bootstrap.sh installs from it with pip --no-index, the lock's hashes kept; a missing,
altered or foreign file stops the install in one line before the venv is touched.

The bootstrap tests run the real scripts on a small project of the same layout (copies of
scripts/bootstrap.sh and wheelhouse.py, a lock of a few tiny pure-Python wheels built
here, a stand-in torch): nothing is downloaded."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


wh = load_script("wheelhouse")


# ----------------------------------------------------------------------------- tiny wheels
def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str],
               requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel (py3-none-any) built with the stdlib: METADATA, WHEEL, RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    members[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{path},{_record_hash(text.encode())},{len(text.encode())}\n"
                     for path, text in members.items()) + f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for member, text in members.items():
            z.writestr(zipfile.ZipInfo(member, (2020, 1, 1, 0, 0, 0)), text)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# A PEP 517/660 backend of the stdlib, so that `pip install --no-deps -e .` needs no setuptools
BACKEND = '''
import os, zipfile
NAME, VERSION = "hkt_bench", "0.1.0"
INFO = f"{NAME}-{VERSION}.dist-info"
def _wheel(directory, editable):
    path = os.path.join(directory, f"{NAME}-{VERSION}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{INFO}/METADATA", f"Metadata-Version: 2.1\\nName: hkt-bench\\nVersion: {VERSION}\\n")
        z.writestr(f"{INFO}/WHEEL", "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        z.writestr(f"{NAME}.pth", os.path.abspath(".") + "\\n")
        z.writestr(f"{INFO}/RECORD", "")
    return os.path.basename(path)
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, False)
def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, True)
def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError
'''


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    """An offline "index" (a folder) of tiny wheels: what `build` downloads from in these tests."""
    src = tmp_path_factory.mktemp("index")
    make_wheel(src, "alpha", "1.0", {"alpha.py": "VALUE = 1\n"})
    make_wheel(src, "beta", "2.0", {"beta.py": "import alpha\nVALUE = alpha.VALUE + 1\n"},
               requires=("alpha==1.0",))
    make_wheel(src, "gamma", "3.0", {"gamma.py": "VALUE = 3\n"})   # windows only in the lock
    # a stand-in torch, with a dependency the lock pins, a CUDA-only one it leaves out (as the
    # real CUDA build's nvidia-*), and one for another platform
    make_wheel(src, "torch", "2.13.0", {"torch/__init__.py": "__version__ = '2.13.0'\n"},
               requires=("alpha==1.0", "nvidia-fake==1.0; platform_system == 'Linux'",
                         "gamma==3.0; sys_platform == 'win32'"))
    make_wheel(src, "nvidia-fake", "1.0", {"nvidia_fake.py": ""})
    make_wheel(src, "beta", "2.1", {"beta.py": "VALUE = 21\n"})    # a release the lock does not pin
    return src


def _lock_text(src: Path) -> str:
    def entry(spec: str, wheel: str) -> str:
        return f"{spec} \\\n    --hash=sha256:{_sha(src / wheel)}\n    # via test\n"
    return ("# inputs-sha256: test\n# a subset of a lock, in scripts/lock_requirements.py's format\n"
            + entry("alpha==1.0", "alpha-1.0-py3-none-any.whl")
            + entry("beta==2.0", "beta-2.0-py3-none-any.whl")
            + entry("gamma==3.0 ; sys_platform == 'win32'", "gamma-3.0-py3-none-any.whl"))


@pytest.fixture
def project(tmp_path, sources) -> Path:
    """A project of the repository's layout: the real scripts, a lock of the tiny wheels."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    (root / "requirements").mkdir()
    (root / "hkt").mkdir()
    for name in ("bootstrap.sh", "wheelhouse.py"):
        shutil.copy(ROOT / "scripts" / name, root / "scripts" / name)
    (root / "requirements" / "lock.txt").write_text(_lock_text(sources))
    (root / "requirements" / "torch.txt").write_text("torch==2.13.0\n")
    conf = (ROOT / "requirements" / "wheelhouse.toml").read_text()
    (root / "requirements" / "wheelhouse.toml").write_text(
        conf.replace('build_requires = ["setuptools>=77", "wheel"]', "build_requires = []"))
    (root / "hkt" / "__init__.py").write_text("import beta\n__version__ = '0.1.0'\n")
    (root / "backend.py").write_text(BACKEND)
    (root / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n')
    return root


def build_house(project: Path, sources: Path, *args: str) -> Path:
    house = project.parent / "wheelhouse"
    done = subprocess.run([sys.executable, str(project / "scripts" / "wheelhouse.py"), "build", str(house),
                           "--python", f"{sys.version_info.major}.{sys.version_info.minor}",
                           "--pip-arg=--no-index", f"--pip-arg=--find-links={sources}", *args],
                          capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stderr
    return house


def _env(**extra: str) -> dict[str, str]:
    """The environment without this machine's pip settings (indexes, find-links, constraints)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return {**env, **extra}


def bootstrap(project: Path, house: Path, venv: Path, **extra: str) -> subprocess.CompletedProcess:
    # PIP_* settings of the caller are left in: bootstrap must ignore them in wheelhouse mode
    env = {**os.environ, "PYTHON": sys.executable, "HKT_VENV": str(venv), "HKT_WHEELHOUSE": str(house),
           "PIP_FIND_LINKS": str(project.parent / "nowhere"), **extra}
    return subprocess.run(["bash", str(project / "scripts" / "bootstrap.sh")], cwd=project,
                          capture_output=True, text=True, env=env, timeout=300)


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


# -------------------------------------------------------------------------------- the wheelhouse
def test_build_downloads_the_lock_for_the_target_and_records_every_hash(project, sources):
    house = build_house(project, sources)
    manifest = json.loads((house / "wheelhouse.json").read_text())
    # the windows-only requirement is not downloaded for linux; beta 2.1 (unlocked) is not taken
    assert sorted(manifest["files"]) == ["alpha-1.0-py3-none-any.whl", "beta-2.0-py3-none-any.whl",
                                         "nvidia_fake-1.0-py3-none-any.whl", "torch-2.13.0-py3-none-any.whl"]
    assert all(manifest["files"][n] == _sha(house / n) for n in manifest["files"])
    assert manifest["lock_sha256"] == _sha(project / "requirements" / "lock.txt")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert manifest["torch_files"] == {here: ["torch-2.13.0-py3-none-any.whl", "nvidia_fake-1.0-py3-none-any.whl"]}


@pytest.mark.slow  # makes a venv
def test_bootstrap_installs_from_the_wheelhouse_with_no_index(project, sources, tmp_path):
    house = build_house(project, sources)
    venv = tmp_path / "venv"
    done = bootstrap(project, house, venv)
    assert done.returncode == 0, done.stderr
    assert "hkt 0.1.0 with torch 2.13.0" in done.stdout
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze", "--exclude-editable"],
                            capture_output=True, text=True).stdout.split()
    assert sorted(freeze) == ["alpha==1.0", "beta==2.0", "nvidia-fake==1.0", "torch==2.13.0"]
    # a second run changes nothing and still needs no index
    again = bootstrap(project, house, venv)
    assert again.returncode == 0, again.stderr


@pytest.mark.slow  # makes a venv
def test_a_missing_wheel_stops_the_install_in_one_line_before_the_venv(project, sources, tmp_path):
    house = build_house(project, sources)
    (house / "beta-2.0-py3-none-any.whl").unlink()
    venv = tmp_path / "venv"
    line = _one_error_line(bootstrap(project, house, venv))
    assert "lacks 1 locked requirement(s)" in line and "beta==2.0" in line
    assert "python scripts/wheelhouse.py build" in line
    assert not venv.exists()


@pytest.mark.slow  # makes a venv
def test_an_altered_wheel_stops_the_install_in_one_line(project, sources, tmp_path):
    house = build_house(project, sources)
    wheel = house / "alpha-1.0-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "keep").write_text("a venv already there")
    line = _one_error_line(bootstrap(project, house, venv))
    assert "alpha-1.0-py3-none-any.whl differs from the wheelhouse manifest's SHA-256" in line
    assert (venv / "keep").read_text() == "a venv already there" and not (venv / "bin").exists()


def test_a_wheel_that_is_not_the_locked_release_is_refused_even_with_a_matching_manifest(project, sources):
    house = build_house(project, sources)
    # another build of beta 2.0, and a manifest rewritten to match it: the lock's hashes still hold
    make_wheel(house, "beta", "2.0", {"beta.py": "VALUE = 'not the locked one'\n"})
    manifest = json.loads((house / "wheelhouse.json").read_text())
    manifest["files"]["beta-2.0-py3-none-any.whl"] = _sha(house / "beta-2.0-py3-none-any.whl")
    (house / "wheelhouse.json").write_text(json.dumps(manifest))
    with pytest.raises(wh.WheelhouseError, match=r"beta-2.0-py3-none-any.whl is not the locked release"):
        wh.check(house, project / "requirements" / "lock.txt")


def test_pip_itself_refuses_a_wheel_off_the_lock_hashes(project, sources, tmp_path):
    """The second line of defence: bootstrap's pip keeps --require-hashes with --no-index."""
    house = build_house(project, sources)
    make_wheel(house, "beta", "2.0", {"beta.py": "VALUE = 'not the locked one'\n"})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run([sys.executable, "-m", "pip", "--isolated", "install", "--dry-run",
                           "--no-index", "--find-links", str(house), "--require-hashes", "--target",
                           str(tmp_path / "t"), "-r", str(project / "requirements" / "lock.txt")],
                          capture_output=True, text=True, env=_env())
    assert done.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr


def test_a_wheelhouse_of_another_lock_is_refused(project, sources):
    house = build_house(project, sources)
    lock = project / "requirements" / "lock.txt"
    lock.write_text(lock.read_text() + "\n")
    with pytest.raises(wh.WheelhouseError) as err:
        wh.check(house, lock)
    assert "was made from another lock.txt" in str(err.value) and "\n" not in str(err.value)


def test_a_missing_or_broken_manifest_names_the_command_that_makes_one(tmp_path, project):
    lock = project / "requirements" / "lock.txt"
    with pytest.raises(wh.WheelhouseError, match="does not exist; make one with"):
        wh.check(tmp_path / "nowhere", lock)
    (tmp_path / "house").mkdir()
    with pytest.raises(wh.WheelhouseError, match="wheelhouse.json is missing"):
        wh.check(tmp_path / "house", lock)
    (tmp_path / "house" / "wheelhouse.json").write_text("{")
    with pytest.raises(wh.WheelhouseError, match="is not valid JSON"):
        wh.check(tmp_path / "house", lock)


def test_omitted_packages_must_be_seen_from_the_installed_python(project, sources):
    house = build_house(project, sources, "--omit", "alpha")
    assert not (house / "alpha-1.0-py3-none-any.whl").exists()
    lock = project / "requirements" / "lock.txt"
    with pytest.raises(wh.WheelhouseError, match="set HKT_SYSTEM_SITE=1"):
        wh.check(house, lock)
    with pytest.raises(wh.WheelhouseError, match=r"lacks it: rebuild the wheelhouse without --omit alpha"):
        wh.check(house, lock, system_site=True)


def test_omit_must_name_a_locked_package(project, sources):
    with pytest.raises(wh.WheelhouseError, match="--omit delta: not in lock.txt"):
        wh.build(project.parent / "h", dev=False, pythons=["3.12"], torch=None, omit=["delta"],
                 pip_args=[], lock=project / "requirements" / "lock.txt",
                 conf={"platforms": ["manylinux_2_17_x86_64"], "build_requires": []})


def test_an_installed_torch_is_kept_else_the_wheelhouse_must_hold_one(project, sources, tmp_path):
    import torch

    have = torch.__version__.split("+")[0]
    assert wh.torch_installed(f"torch=={have}") and wh.torch_installed("torch>=2.4")
    assert not wh.torch_installed("torch==1.0.0")
    house = build_house(project, sources, "--no-torch")
    out = tmp_path / "reqs"
    assert wh.main(["torch", str(house), "torch==1.0.0", "--requirements-out", str(out)]) == 1
    assert wh.main(["torch", str(house), "torch>=2.4", "--requirements-out", str(out)]) == 0


# ------------------------------------------------------------------------------- the real locks
@pytest.mark.parametrize("lock", ["lock.txt", "lock-dev.txt"])
def test_the_locks_give_one_pinned_hashed_release_per_package_for_every_served_python(lock):
    entries = wh.read_lock(ROOT / "requirements" / lock)
    for python in wh.settings()["python"]:
        env = wh.target_env(python)
        names = [e.name for e in entries if e.applies(env)]
        assert len(names) == len(set(names)), f"{lock}: two releases of one package for {python}"
        assert {"mlflow", "polars", "snakemake", "hydra-core"} <= set(names)
    numpy = {python: [e.version for e in entries if e.name == "numpy" and e.applies(wh.target_env(python))]
             for python in ("3.11", "3.12")}
    assert numpy["3.11"] != numpy["3.12"]  # the lock's markers split numpy at 3.12


def test_split_parts_fit_the_limit_and_join_back_into_the_wheelhouse(project, sources, tmp_path):
    house = build_house(project, sources)
    largest = max((house / n).stat().st_size for n in json.loads((house / "wheelhouse.json").read_text())["files"])
    parts = wh.split(house, max_mib=largest * 1.5 / 2**20)
    assert len(parts) >= 2
    joined = tmp_path / "joined"
    joined.mkdir()
    for part in parts:
        files = [f for f in part.iterdir() if f.name != "wheelhouse.json"]
        assert sum(f.stat().st_size for f in files) <= largest * 1.5
        for f in part.iterdir():
            shutil.copy(f, joined / f.name)
    assert sorted(p.name for p in joined.iterdir()) == sorted(p.name for p in house.iterdir())
    wh.check(joined, project / "requirements" / "lock.txt")
    with pytest.raises(wh.WheelhouseError, match="lacks . locked requirement"):
        wh.check(parts[-1], project / "requirements" / "lock.txt")  # one part alone is not enough


@pytest.mark.slow  # makes a venv
def test_system_site_reaches_the_packages_of_a_venv_python_that_a_wheelhouse_omits(project, sources, tmp_path):
    """A machine image's python3 that is itself a venv (/opt/torch/.venv) with torch and alpha
    installed: the wheelhouse leaves both to it, and the new venv sees them."""
    base = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    subprocess.run([str(base / "bin" / "python"), "-m", "pip", "--isolated", "install", "-q", "--no-index",
                    "--no-deps", str(sources / "alpha-1.0-py3-none-any.whl"),
                    str(sources / "torch-2.13.0-py3-none-any.whl")], check=True, env=_env())
    house = build_house(project, sources, "--omit", "alpha", "--no-torch")
    venv = tmp_path / "venv"
    done = bootstrap(project, house, venv, PYTHON=str(base / "bin" / "python"), HKT_SYSTEM_SITE="1",
                     HKT_TORCH="torch>=2.4")
    assert done.returncode == 0, done.stderr
    assert "hkt 0.1.0 with torch 2.13.0" in done.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import alpha, beta; print(alpha.__file__, beta.__file__)"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert where[0].startswith(str(base)) and where[1].startswith(str(venv))
    # without HKT_SYSTEM_SITE the omitted package cannot be reached: one line, nothing touched
    line = _one_error_line(bootstrap(project, house, tmp_path / "other", PYTHON=str(base / "bin" / "python")))
    assert "set HKT_SYSTEM_SITE=1" in line and not (tmp_path / "other").exists()


def test_split_first_puts_what_a_first_step_needs_in_part_one_and_check_only_serves_it(project, sources):
    house = build_house(project, sources)
    parts = wh.split(house, max_mib=1, first=["beta", "alpha"])
    assert {"alpha-1.0-py3-none-any.whl", "beta-2.0-py3-none-any.whl"} <= {p.name for p in parts[0].iterdir()}
    lock = project / "requirements" / "lock.txt"
    assert [e.name for e in wh.check(parts[0], lock, only=["alpha"])] == ["alpha"]
    with pytest.raises(wh.WheelhouseError, match="--only delta: not in lock.txt"):
        wh.check(parts[0], lock, only=["delta"])
    with pytest.raises(wh.WheelhouseError, match="--first delta: not in wheelhouse"):
        wh.split(project.parent / "wheelhouse", max_mib=1, first=["delta"])


def test_a_wheelhouse_torch_other_than_the_spec_is_refused_in_one_line(project, sources, tmp_path):
    house = build_house(project, sources)
    out = tmp_path / "reqs"
    # no torch < 2 is installed here, so the wheelhouse must serve one, and it holds 2.13.0
    assert wh.main(["torch", str(house), "torch<2", "--requirements-out", str(out)]) == 1
    with pytest.raises(wh.WheelhouseError, match=r"holds torch 2.13.0, not 'torch<2' \(HKT_TORCH\)"):
        wh.torch_requirements(house, "torch<2")
    assert "--hash=sha256:" in wh.torch_requirements(house, "torch==2.13.0")
