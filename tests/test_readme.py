"""The README's quick start holds (issue 64): its two commands, set up and run the main job with
the few-minute smoke suite first, and set up and run the tests; the files it tells an offline
user to put in the mirror are the ones `hkt prepare` looks for; `hkt` is named by its path once.
Running the commands themselves is CI's (.ci/run) and tests/test_workflow_e2e.py's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "README.md").read_text("utf-8")
QUICK = TEXT[TEXT.index("## Quick start"):TEXT.index("## HKT on one screen")]
BLOCKS = [" ".join(b.split()) for b in re.findall(r"```bash\n(.*?)```", QUICK, re.S)]


def test_two_commands_set_up_and_run_the_smoke_suite_first_then_the_main_job_and_the_tests():
    assert len(BLOCKS) == 2
    main, tests = ([shlex.split(part) for part in block.split("&&")] for block in BLOCKS)
    assert main[0] == ["bash", "scripts/bootstrap.sh"] and tests[0][:2] == main[0]
    assert main[1] == [".venv/bin/snakemake", "--cores", "all", "--config", "suite=smoke",
                       "results_dir=results-smoke"]
    assert (ROOT / "config" / "suites" / "smoke.yaml").is_file()
    assert main[2] == [".venv/bin/snakemake", "--cores", "all"]  # the main job, suite: auto
    assert tests == [["bash", "scripts/bootstrap.sh", "--dev"], [".venv/bin/python", "-m", "pytest"]]
    assert (ROOT / ".ci" / "run").read_text().count("bash scripts/bootstrap.sh --dev") == 1


def test_the_offline_line_names_the_files_prepare_looks_for():
    assert "HKT_DATA_MIRROR=DIR" in QUICK and "(docs/data.md)" in QUICK
    for task in ("imdb", "cifar10"):
        name = yaml.safe_load((ROOT / "config" / "task" / f"{task}.yaml").read_text())["prepare"]["filename"]
        assert f"`{task}/{name}`" in QUICK


def test_hkt_is_named_by_its_path_once():
    assert "`.venv/bin/hkt`" in QUICK and "source .venv/bin/activate" in QUICK
