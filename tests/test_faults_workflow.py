"""Faults of a shared results directory and of the suite's switches (issue 23, faults 3-6): a
second workflow on a results directory in use is refused, naming the other run; a broken MLflow
store stops the workflow at its start; a job's log keeps every attempt; and every combination of
the suite's switches either runs or is refused at start, with the aggregate step writing
exactly what the workflow declares for it."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hkt.cli.main import main, run_logged
from hkt.errors import ConfigError
from hkt.report.aggregate_outputs import aggregate_files
from hkt.workflow.job_configs import check_analysable
from hkt.workflow.grid import Grid
from test_workflow import ROOT, snakemake
from test_workflow import suite as suite_config

SMOKE = str(ROOT / "config" / "suites" / "smoke.yaml")


def test_a_second_workflow_on_a_results_dir_in_use_is_refused_naming_the_other(tmp_path):
    results = tmp_path / "shared results"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom hkt.workflow.results_lock import claim_results_dir\n"
         f"claim_results_dir({str(results)!r}, '/home/alice/hkt-checkout')\n"
         "print('held', flush=True)\ntime.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = snakemake("--cores", "1", "--configfile", SMOKE, "--config", f"results_dir={results}",
                      cwd=tmp_path / "work", timeout=300)
    finally:
        holder.kill()
        holder.wait()
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert (f"hkt: error: the results directory {results} is in use by another running "
            f"workflow: pid {holder.pid} on host {socket.gethostname()}, from the checkout "
            "/home/alice/hkt-checkout, running since") in out, out[-3000:]
    assert sorted(p.name for p in results.iterdir()) == [".workflow.lock"]  # nothing else made


def test_the_lock_is_released_with_its_process_and_retaken(tmp_path):
    from hkt.workflow.results_lock import LOCK_NAME, claim_results_dir, holder

    results = tmp_path / "results"
    subprocess.run([sys.executable, "-c", "from hkt.workflow.results_lock import claim_results_dir\n"
                    f"claim_results_dir({str(results)!r}, '/elsewhere')"], check=True)
    claim_results_dir(results, ROOT)  # the first holder is gone (killed or finished): free
    info = holder(results / LOCK_NAME)
    assert info["pid"] == os.getpid() and info["checkout"] == str(ROOT)
    claim_results_dir(results, ROOT)  # this process holds it already: no-op


def test_a_corrupt_store_stops_the_workflow_before_any_job(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    junk = os.urandom(4096)
    (results / "mlflow.db").write_bytes(junk)
    r = snakemake("--cores", "1", "--configfile", SMOKE, "--config", f"results_dir={results}",
                  cwd=tmp_path / "work", timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert f"hkt: error: {results / 'mlflow.db'} is not an MLflow store" in out, out[-3000:]
    assert "Traceback" not in out
    assert (results / "mlflow.db").read_bytes() == junk
    assert not (results / "data").exists() and not (results / "runs").exists()


def test_a_log_keeps_every_attempt_and_shows_the_last(tmp_path, capsys):
    log = tmp_path / "logs" / "job.log"

    def ran(msg: str, code: int):
        def command() -> int:
            os.write(1, f"{msg}\n".encode())  # at the file descriptor, as a child process writes
            return code
        return command

    assert run_logged(str(log), ran("the first attempt trained to step 9000", 0), "== one ==\n") == 0
    assert run_logged(str(log), ran("another process is already training", 2), "== two ==\n") == 2
    text = log.read_text()
    assert text == ("== one ==\nthe first attempt trained to step 9000\n"
                    "== two ==\nanother process is already training\n")
    tail = capsys.readouterr().err
    assert "another process is already training" in tail and "step 9000" not in tail


def test_a_log_deleted_between_attempts_gets_them_back(tmp_path, capsys):
    """Snakemake deletes a job's log before each attempt (Job.remove_existing_output); the
    hidden second name keeps the earlier ones, and the next attempt puts them back."""
    log = tmp_path / "logs" / "job.log"

    def say(msg: str):
        return lambda: os.write(1, f"{msg}\n".encode()) and 143

    keep = log.parent / ".job.log.attempts"

    def killed() -> int:  # the second name is there while the first attempt runs (kill -9)
        assert os.path.samefile(keep, log)
        return say("hkt: stopped by SIGTERM at step 2648/10000")()

    run_logged(str(log), killed, "== one ==\n")
    log.unlink()  # as Snakemake does before the rerun
    assert run_logged(str(log), say("resuming at step 2648"), "== two ==\n") == 143
    both = "== one ==\nhkt: stopped by SIGTERM at step 2648/10000\n== two ==\nresuming at step 2648\n"
    assert log.read_text() == both
    assert keep.read_text() == both and os.path.samefile(keep, log)
    assert capsys.readouterr().err.splitlines()[-1] == "resuming at step 2648"  # this attempt's
    log.unlink()
    log.touch()  # deleted, then created empty (a shell's redirection): no reason to lose them
    run_logged(str(log), say("three"), "== three ==\n")
    assert log.read_text() == both + "== three ==\nthree\n"


def test_without_hard_links_the_attempts_are_copied(tmp_path, monkeypatch):
    log = tmp_path / "job.log"

    def no_link(*args):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    run_logged(str(log), lambda: 0 * os.write(1, b"first\n"), "== one ==\n")
    log.unlink()
    run_logged(str(log), lambda: 0 * os.write(1, b"second\n"), "== two ==\n")
    both = "== one ==\nfirst\n== two ==\nsecond\n"
    assert log.read_text() == both == (tmp_path / ".job.log.attempts").read_text()


def test_hkt_log_heads_each_attempt_with_command_time_host_and_pid(tmp_path, capsys):
    log = tmp_path / "x.log"
    for _ in range(2):
        assert main(["--log", str(log), "plan", "--help"]) == 0
    headers = [line for line in log.read_text().splitlines() if line.startswith("===== hkt ")]
    assert len(headers) == 2
    assert f"host {socket.gethostname()} pid {os.getpid()}" in headers[0]
    assert headers[0].startswith("===== hkt plan --help | 20")


# --- every combination of the suite's switches ---------------------------------------------------

MODEL_SETS = (["mha"], ["hkt"], ["conv"], ["mha", "conv"], ["mha", "hkt", "conv"])


def combination(models, analyses, ablation, bench, baselines, lra) -> dict:
    from hkt.workflow.suites import merge

    return merge(suite_config("smoke"), {
        "main": {"models": list(models)}, "analyze": {"enabled": analyses},
        "ablation": {"enabled": ablation, "include": ["levels1"]}, "bench": {"enabled": bench},
        "external": {"majority": {"enabled": baselines}, "ngram": {"enabled": baselines}},
        "lra": {"enabled": lra, "models": [m for m in models if m != "conv"] or ["mha"]}})


COMBINATIONS = list(itertools.product(MODEL_SETS, (True, False), (True, False), (True, False),
                                      (True, False), (True, False)))


def test_every_combination_is_a_valid_grid_or_refused(tmp_path):
    for combo in COMBINATIONS:
        grid = Grid(combination(*combo), ROOT / "config")
        assert grid.train_jobs(), combo
        check_analysable(grid.analyze_models if grid.analysis_jobs() else [])
    with pytest.raises(ConfigError, match="analyze.models names 'conv', whose token mixer exposes "
                                          "no queries, keys or scores"):
        check_analysable(["mha", "conv"])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A smoke run of each model, and the analyses of the HKT and MHA ones."""
    from hkt.data.prepare import prepare_task
    from test_baselines_listops_rules import SMALL

    tmp = tmp_path_factory.mktemp("combos")
    # real ListOps (a few hundred trees): the aggregate reads its runs' predictions against the
    # trees' facts (depth, the rules' answers), which random tokens do not have
    data = tmp / "data"
    prepare_task("listops", data, overrides=SMALL)
    runs, analyses = {}, {}
    for model in ("mha", "hkt", "conv"):
        runs[model] = tmp / "runs" / model
        assert main(["train", "--data", str(data), "--out", str(runs[model]), "task=listops",
                     f"model={model}", "profile=smoke", "variant=main",
                     "tracking.enabled=false", "--no-progress"]) == 0
    for model in ("mha", "hkt"):
        analyses[model] = tmp / "analysis" / model
        assert main(["analyze", str(runs[model]), "--out", str(analyses[model]), "examples=8",
                     "truncation_examples=8", "mlflow=false"]) == 0
    return runs, analyses


def files_under(out: Path) -> set[Path]:
    return {p for p in out.rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("models, analyses", [(["mha"], True), (["hkt"], True), (["conv"], True),
                                              (["mha", "conv"], False), (["mha", "hkt"], True)])
def test_the_aggregate_writes_exactly_what_the_workflow_declares(models, analyses, trained,
                                                                tmp_path):
    runs, done = trained
    grid = Grid(combination(models, analyses, False, True, False, False), ROOT / "config")
    jobs = {j.model for j in grid.train_jobs()}
    analysed = sorted({j.model for j in grid.analysis_jobs()})
    out = tmp_path / "results"
    args = ["aggregate", *(str(runs[m] / "record.json") for m in sorted(jobs)), "--out", str(out)]
    if analysed:
        args += ["--analyses", *(str(done[m] / "analysis.parquet") for m in analysed)]
    assert main(args) == 0
    declared = set(aggregate_files(out, analyses=bool(grid.analyses()),
                                   predictions=grid.writes_predictions))
    assert files_under(out) == declared


@pytest.mark.slow
@pytest.mark.parametrize("models, analyses", [(["mha"], True), (["conv"], True)])
def test_the_workflow_declares_the_products_list(models, analyses, tmp_path):
    """The aggregate job of a dry run has exactly hkt.report.aggregate_outputs' files as outputs."""
    cfg = tmp_path / "combo.yaml"
    cfg.write_text(yaml.safe_dump(combination(models, analyses, False, True, True, False)))
    r = snakemake("-n", "--configfile", str(cfg), "--config", "results_dir=res", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    block = out[out.index("rule aggregate:"):]
    block = block[:block.index("\n\n")]
    line = next(ln for ln in block.splitlines() if ln.strip().startswith("output:"))
    outputs = {Path(f.strip()) for f in line.split("output:", 1)[1].split(",")}
    grid = Grid(combination(models, analyses, False, True, True, False), ROOT / "config")
    assert grid.writes_predictions  # a suite that trains declares the per-example readings
    assert outputs == set(aggregate_files(Path("res"), analyses=bool(grid.analyses()),
                                          predictions=True))


def test_analysing_a_model_without_scores_is_refused_before_any_job(tmp_path):
    cfg = tmp_path / "combo.yaml"
    combo = combination(["mha", "conv"], True, False, False, False, False)
    combo["analyze"]["models"] = ["mha", "conv"]
    cfg.write_text(yaml.safe_dump(combo))
    r = snakemake("-n", "--configfile", str(cfg), cwd=tmp_path)
    assert r.returncode != 0
    assert ("workflow config: analyze.models names 'conv', whose token mixer exposes no queries"
            in r.stdout + r.stderr), (r.stdout + r.stderr)[-3000:]
