"""What the workflow's rules rely on from the `hkt` command: `hkt --log FILE` (output to the log,
its tail on the terminal only when the command fails) and `hkt baseline NAME`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def hkt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HKT_CONFIG_DIR": str(ROOT / "config")}
    return subprocess.run([sys.executable, "-m", "hkt.cli.main", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_log_keeps_a_good_run_quiet(tmp_path):
    log = tmp_path / "logs" / "ok.log"
    r = hkt("--log", str(log), "train", "--print-config", "model=mha")
    assert r.returncode == 0
    assert r.stdout == "" and r.stderr == ""
    assert "name: mha" in log.read_text()


def test_log_shows_the_tail_of_a_failed_run(tmp_path):
    log = tmp_path / "bad.log"
    r = hkt(f"--log={log}", "train", "--print-config", "optim.lr=abc")
    assert r.returncode == 2
    message = "hkt: error: config key 'optim.lr' = 'abc': must be a number"
    assert message in log.read_text()
    assert r.stderr.startswith(f"--- end of {log}:\n") and message in r.stderr


def test_log_keeps_a_traceback_in_the_log(tmp_path):
    log = tmp_path / "crash.log"
    r = hkt("--log", str(log), "analyze", str(tmp_path / "no-such-run"), "--out", str(tmp_path))
    assert r.returncode != 0
    assert r.stderr.startswith(f"--- end of {log}:\n")
    assert len(r.stderr.splitlines()) <= 21  # the header and at most 20 lines of the log


def test_every_registered_baseline_is_an_hkt_command():
    """`hkt baseline` lists what hkt/baselines/ registers (no table to edit); an unknown name
    fails listing the known ones."""
    from hkt.baselines import BASELINES

    r = hkt("baseline", "--help")
    assert r.returncode == 0
    listed = r.stdout.split("positional arguments:")[1]
    assert {"majority", "ngram"} <= set(BASELINES.names())
    for name in BASELINES.names():
        assert re.search(rf"\n    {name}[ \n]", listed), name  # a long name: its help wraps
        r = hkt("baseline", name, "--help")
        assert r.returncode == 0 and "--data DATA_DIR" in r.stdout and "--out RUN_DIR" in r.stdout
    r = hkt("baseline", "nope", "--data", "x")
    assert r.returncode == 2
    known = ", ".join(BASELINES.names())
    assert r.stderr == (f"hkt: error: unknown command 'hkt baseline nope' (commands: {known}; "
                        "`hkt baseline --help` says what each does)\n")
