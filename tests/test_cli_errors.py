"""Clear ends where a user types (issue 52, item 5): output piped into a reader that leaves early
(`hkt status | head -1`) ends quietly with exit 0, for every `hkt` command; a suite's name
mistyped stops the workflow with one line listing the suites; and the README chooses suites by
name, which is what gets that line (a mistyped `--configfile` path is read by Snakemake before
the workflow starts)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from test_status import results  # noqa: F401 - a fixture: a results directory mid-suite
from test_workflow import ROOT, snakemake

HKT = [sys.executable, "-m", "hkt.cli.main"]


def run_with_reader_gone(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """`hkt ARGS` writing into a pipe whose reader has already closed it (what `| head -1`
    does once it has its line), so that every write fails, in every try."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([*HKT, *args], stdout=write, stderr=subprocess.PIPE, text=True,
                              cwd=cwd, timeout=120)
    finally:
        os.close(write)


def test_a_mistyped_command_names_the_one_meant():
    """`hkt trian` is one line naming `train` (issue 73), and so is a group's command."""
    for args, meant in ((["trian", "--data", "x"], "train"), (["bench", "atention"], "attention")):
        r = subprocess.run([*HKT, *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("hkt: error: unknown command")
        assert r.stderr.endswith(f"; did you mean {meant}?\n"), r.stderr


def test_status_into_a_closed_pipe_ends_quietly_with_exit_0(results):
    r = run_with_reader_gone("status", str(results))
    assert (r.returncode, r.stderr) == (0, "")


def test_help_into_a_closed_pipe_ends_quietly_with_exit_0():
    """argparse's help, printed before any command runs: the same one place handles it."""
    for args in (["--help"], ["stop", "--help"]):
        r = run_with_reader_gone(*args)
        assert (r.returncode, r.stderr) == (0, ""), args


def test_hkt_status_piped_into_head_exits_0(results):
    for _ in range(3):  # the issue saw "Broken pipe" in 3 of 5 tries
        r = subprocess.run(["bash", "-o", "pipefail", "-c",
                            f"{sys.executable} -m hkt.cli.main status {results} | head -1"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert r.stdout.startswith("suite cpu (profile cpu) in ") and r.stdout.count("\n") == 1


def test_a_mistyped_suite_name_stops_the_workflow_with_one_line(tmp_path):
    r = snakemake("-n", "--config", "suite=smok", cwd=tmp_path, timeout=120)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and "WorkflowError" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert re.fullmatch(r"hkt: error: workflow config \(config/config.yaml \+ --configfile/--config\):"
                        r" suite 'smok' has no config/suites/smok.yaml \(suites: cpu, .*smoke.*, or "
                        r"auto: paper with CUDA, else cpu\); did you mean smoke\?", lines[-1]), lines
    assert not any(line.startswith("hkt: error:") for line in lines[:-1])


def test_the_readme_chooses_suites_by_name():
    """Each snakemake command of the README and the docs pages picks its suite with
    `--config suite=NAME` (one clear line for a typo), never with `--configfile config/suites/…`
    (Snakemake's traceback). The one exception is a cut (config/cuts/), a suite of its own made
    of the suite's file and the cut's, which only config files can give."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    commands = re.findall(r"^\S*snakemake .*$", text, re.M)
    assert commands
    assert not re.search(r"--configfile\s+config/suites/\S++(?!\s+\S*config/cuts/)", text)
    assert re.search(r"--configfile\s+config/suites/\S++(?!\s+\S*config/cuts/)",
                     "snakemake --configfile config/suites/cpu.yaml --cores 2")
    assert any("--config suite=smoke" in c for c in commands)
    assert "pkill" not in text  # `hkt stop` stops one suite; pkill -f stops everyone's
