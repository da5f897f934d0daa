"""What a finished suite tells its user to run next (issue 64): the report command as it works
where the workflow ran (the venv's Snakemake, the suite and results_dir always named, the
workflow's own Snakefile, config files and --config keys), and the MLflow UI command of
docs/tracking.md. The commands themselves run in tests/test_workflow_e2e.py."""

from __future__ import annotations

import shlex
import sys

import pytest

from hkt.provenance import NO_SUITE
from hkt.workflow.next_steps import closing_lines, mlflow_ui_command, published_form, report_command


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """A checkout in ``tmp_path`` with the README's ``.venv``, this Python standing for its own."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "snakemake", "mlflow"):
        (bin_dir / name).write_text("")
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow" / "Snakefile").write_text("")
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_report_command_names_the_suite_and_its_results_directory(venv):
    cmd = report_command("results-smoke", suite="smoke", snakefile=venv / "workflow" / "Snakefile",
                         config={"suite": "smoke", "results_dir": "results-smoke"})
    assert cmd == (".venv/bin/snakemake --report results-smoke/report.html "
                   "--config suite=smoke results_dir=results-smoke")
    # `suite: auto` chose the suite: it is named all the same, beside the default results_dir
    assert report_command("results", suite="cpu", snakefile="workflow/Snakefile").endswith(
        "--report results/report.html --config suite=cpu results_dir=results")


def test_the_report_command_keeps_the_workflows_own_files_and_keys(venv, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("repo") / "workflow" / "Snakefile"
    cfg = venv / "my config.yaml"
    cmd = report_command("my results é/wf", suite=NO_SUITE, snakefile=elsewhere, configfiles=[cfg],
                         config={"seeds": ["0", "1"], "results_dir": "my results é/wf"})
    words = shlex.split(cmd)
    assert words[:3] == [".venv/bin/snakemake", "--report", "my results é/wf/report.html"]
    assert words[words.index("--snakefile") + 1] == str(elsewhere)
    assert words[words.index("--configfile") + 1] == "my config.yaml"
    # config files that name no suite: none is added; results_dir first, the user's keys after
    assert words[words.index("--config") + 1:] == ["results_dir=my results é/wf", 'seeds=["0", "1"]']


def test_the_report_command_of_a_suite_made_of_config_files_names_them_all_and_not_the_suite(venv):
    """The cpu cut (config/cuts/cpu.yaml, given after config/suites/cpu.yaml) names its own
    suite: `--config suite=cpu_cut` would be refused, and a second `--configfile` would drop the
    first file."""
    files = [venv / "config" / "suites" / "cpu.yaml", venv / "config" / "cuts" / "cpu.yaml"]
    cmd = report_command("results-cut", suite="cpu_cut", snakefile="workflow/Snakefile",
                         configfiles=files, config={"results_dir": "results-cut"})
    assert cmd == (".venv/bin/snakemake --report results-cut/report.html --configfile "
                   "config/suites/cpu.yaml config/cuts/cpu.yaml --config results_dir=results-cut")


def test_the_closing_lines_name_the_summary_the_report_and_the_mlflow_ui(venv):
    ui = mlflow_ui_command(f"sqlite:///{venv / 'results-smoke' / 'mlflow.db'}")
    assert ui == (".venv/bin/mlflow ui --backend-store-uri sqlite:///results-smoke/mlflow.db "
                  "--host 127.0.0.1 --port 5000")  # as docs/tracking.md writes it
    lines = closing_lines("results-smoke", "summary.md", "REPORT", f"sqlite:///{venv}/results-smoke/mlflow.db")
    assert lines[0].endswith("read results-smoke/summary.md first")
    assert "`REPORT`" in lines[1] and f"`{ui}`" in lines[2]
    assert mlflow_ui_command("http://tracking:5000") is None
    assert "the tracking server http://tracking:5000" in closing_lines("r", "summary.md", "R",
                                                                       "http://tracking:5000")[2]


def test_a_venv_outside_the_checkout_is_named_by_its_path_here_and_by_its_name_in_summary_md(
        venv, tmp_path_factory, monkeypatch):
    """Issue 73: docs/results/lra_listops/summary.md named `/work/main/.venv/bin/snakemake`. The
    closing line keeps the path, which works where the workflow ran; summary.md, which may be
    published, names the program alone (and keeps every other word)."""
    outside = tmp_path_factory.mktemp("other") / "venv" / "bin"
    outside.mkdir(parents=True)
    (outside / "snakemake").write_text("")
    monkeypatch.setattr(sys, "executable", str(outside / "python"))
    cmd = report_command("my results", suite="smoke", snakefile="workflow/Snakefile")
    assert shlex.split(cmd)[0] == str(outside / "snakemake")
    assert published_form(cmd) == ("snakemake --report 'my results/report.html' "
                                   "--config suite=smoke 'results_dir=my results'")
    inside = ".venv/bin/snakemake --report r/report.html --config suite=smoke results_dir=r"
    assert published_form(inside) == inside
