"""The README's quick start holds (issues 64 and 73): two blocks, the first look (set up, then
the few-minute smoke suite, with its offline form beside it) and the main job alone with its
time beside it (pasted whole, the first look must not start the night), and the command that
sets up and runs the tests; the files it tells an offline user to put in the mirror are the ones
`hkt prepare` looks for; `hkt` is named by its path once. Running the commands themselves is
CI's (.ci/run) and tests/test_workflow_e2e.py's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from hkt.workflow.sessions import load_sessions, session_seconds

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "README.md").read_text("utf-8")
QUICK = TEXT[TEXT.index("## Quick start"):TEXT.index("## HKT on one screen")]
SMOKE = [".venv/bin/snakemake", "--cores", "all", "--config", "suite=smoke", "results_dir=results-smoke"]
MAIN = [".venv/bin/snakemake", "--cores", "all"]  # the main job, suite: auto


def blocks(text: str) -> list[tuple[list[list[str]], list[str]]]:
    """Each bash block of ``text``: its commands (split at ``&&``, as words) and its comments
    (a comment line's text, or a command line's trailing ``# …``)."""
    out = []
    for body in re.findall(r"```bash\n(.*?)```", text, re.S):
        code, comments = [], []
        for line in body.splitlines():
            command, hash_, comment = re.match(r"(.*?)(?:(?:^|\s)(#)\s*(.*))?$", line).groups()
            code.append(command)
            if hash_:
                comments.append(comment.strip())
        commands = [shlex.split(part) for part in " ".join(code).split("&&")]
        out.append(([c for c in commands if c], comments))
    return out


BLOCKS = blocks(QUICK)


def test_the_first_look_and_the_main_job_are_blocks_of_their_own_and_the_tests_a_command():
    assert len(BLOCKS) == 2
    (first, offline), (main, beside) = BLOCKS
    assert first == [["bash", "scripts/bootstrap.sh"], SMOKE]
    assert (ROOT / "config" / "suites" / "smoke.yaml").is_file()
    assert main == [MAIN], "the main job is its own block: pasted whole, the first look stops"
    inline = re.findall(r"`([^`]*pytest[^`]*)`", QUICK)
    assert [[shlex.split(p) for p in c.split("&&")] for c in inline] == [
        [["bash", "scripts/bootstrap.sh", "--dev"], [".venv/bin/python", "-m", "pytest"]]]
    assert (ROOT / ".ci" / "run").read_text().count("bash scripts/bootstrap.sh --dev") == 1


def test_the_first_looks_offline_form_is_the_same_command_with_the_mirror():
    _, offline = BLOCKS[0]
    assert len(offline) == 1 and offline[0].startswith("without internet: ")
    assert shlex.split(offline[0].removeprefix("without internet: ")) == ["HKT_DATA_MIRROR=DIR", *SMOKE]
    assert "an archive under another name there is accepted with a warning" in " ".join(QUICK.split())


def test_the_main_jobs_time_beside_it_is_the_published_cpu_suites():
    """The hours written beside the main job are the CPU suite's wall time (its sessions, the
    runs added later included: docs/results/cpu/plan/sessions.json), rounded; not the
    sessions that made published runs again (``redoes``: issue 72's predictions), which the
    main job does not run."""
    _, beside = BLOCKS[1]
    stated = [int(h) for h in re.findall(r"about (\d+) h on a 2-core CPU", " ".join(beside))]
    seconds = sum(session_seconds(s, now=0.0, host="")
                  for s in load_sessions(ROOT / "docs" / "results" / "cpu") if not s.get("redoes"))
    assert stated == [round(seconds / 3600)]


def test_a_quick_start_that_chains_the_main_job_after_the_first_look_is_refused():
    """Issue 73: `bootstrap && smoke && main` in one block ran about 12 hours when pasted."""
    chained = "```bash\nbash scripts/bootstrap.sh &&\n  " + shlex.join(SMOKE) + " &&\n  " \
              + shlex.join(MAIN) + "\n```\n"
    (commands, _), = blocks(chained)
    assert commands == [["bash", "scripts/bootstrap.sh"], SMOKE, MAIN]
    assert commands != BLOCKS[0][0]


def test_the_offline_line_names_the_files_prepare_looks_for():
    assert "HKT_DATA_MIRROR=DIR" in QUICK and "(docs/data.md)" in QUICK
    for task in ("imdb", "cifar10"):
        name = yaml.safe_load((ROOT / "config" / "task" / f"{task}.yaml").read_text())["prepare"]["filename"]
        assert f"`{task}/{name}`" in QUICK


def test_hkt_is_named_by_its_path_once():
    assert "`.venv/bin/hkt`" in QUICK and "source .venv/bin/activate" in QUICK
