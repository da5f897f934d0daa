"""scripts/gpu_check.sh (issue 49) without a GPU: its usage, the joining of wheelhouse parts on the
machine, and its dry run's refusal of an incomplete wheelhouse (docs/gpu-check.md)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def gpu_check(*args: str, tmp_path: Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess:
    base = {**os.environ, "PYTHON": sys.executable, "HKT_GPU_WHEELHOUSE": str(tmp_path / "house"),
            "OUT": str(tmp_path / "out"), "HKT_GPU_RESULTS": str(tmp_path / "results")}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=120)


@pytest.mark.parametrize("args", [[], ["nonsense"], ["stage"]])
def test_usage(args, tmp_path):
    done = gpu_check(*args, tmp_path=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("usage: bash scripts/gpu_check.sh stage PART")


def test_stage_joins_parts_and_refuses_a_folder_that_is_not_one(tmp_path):
    for i, wheel in ((1, "a-1.0-py3-none-any.whl"), (2, "b-1.0-py3-none-any.whl")):
        part = tmp_path / f"part-{i}"
        part.mkdir()
        (part / wheel).write_bytes(b"wheel")
        (part / "wheelhouse.json").write_text(json.dumps({"files": {}}))
        done = gpu_check("stage", str(part), tmp_path=tmp_path)
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "house").iterdir()) == [
        "a-1.0-py3-none-any.whl", "b-1.0-py3-none-any.whl", "wheelhouse.json"]
    (tmp_path / "empty").mkdir()
    done = gpu_check("stage", str(tmp_path / "empty"), tmp_path=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'empty'} is not a wheelhouse part (no wheelhouse.json); make the parts "
        "with: python scripts/wheelhouse.py split DIR --max-mib N"]


def test_a_dry_run_stops_at_an_incomplete_wheelhouse_and_says_what_is_missing(tmp_path):
    part = tmp_path / "part-1"
    part.mkdir()
    lock = ROOT / "requirements" / "lock.txt"
    (part / "wheelhouse.json").write_text(json.dumps(
        {"lock": "lock.txt", "lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest(), "files": {},
         "python": ["3.12"], "omit": []}))
    done = gpu_check("kernel", str(part), "--dry-run", tmp_path=tmp_path)
    assert done.returncode == 1
    assert "lacks 5 locked requirement(s)" in done.stdout and "polars" in done.stdout
    done = gpu_check("run", "--dry-run", tmp_path=tmp_path)
    assert done.returncode == 1 and "locked requirement(s)" in done.stdout


def test_another_suite_and_an_earlier_pack_are_named_or_refused_in_one_line(tmp_path):
    """HKT_GPU_SUITE runs another suite (issue 50's `long`); HKT_GPU_RESUME names a pack that
    must be there. A wrong one stops before anything runs."""
    env = {"HKT_GPU_SUITE": "nosuch"}
    done = gpu_check("run", "--dry-run", tmp_path=tmp_path, env=env)
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: no config/suites/nosuch.yaml (HKT_GPU_SUITE or config/bench/gpu_check.yaml's suite)")
    done = gpu_check("run", "--dry-run", tmp_path=tmp_path,
                         env={"HKT_GPU_SUITE": "long", "HKT_GPU_RESUME": str(tmp_path / "no.tar.gz")})
    assert done.returncode == 2 and "HKT_GPU_RESUME=" in done.stderr and "is not a file" in done.stderr
    done = gpu_check("run", "--dry-run", tmp_path=tmp_path, env={"HKT_GPU_SUITE": "long"})
    assert " suite long" in done.stdout.splitlines()[0]  # then the empty wheelhouse stops it
    assert done.returncode == 1

