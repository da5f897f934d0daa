"""Every external baseline keeps the run-record contract (docs/contracts.md "Runs"): each baseline
registered in hkt/baselines/ and each entry of config/config.yaml's `external:` runs on a tiny
prepared task, with the command the workflow gives it, and writes a record that validates, holds
accuracies in [0, 1] and reads back through hkt.runs_frame; the workflow's dry run plans its jobs. A
program that is not ours runs from its config entry alone."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import check_predictions

from hkt.baselines import BASELINES
from hkt.cli.main import main
from hkt.data.prepare import prepare_task
from hkt.fileio import sha256_file
from hkt.run_record import load_record, schema
from hkt.runs_frame import load_records, runs_from_records
from hkt.workflow.grid import MAIN, Grid, Job
from test_workflow import ROOT, snakemake

CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
ENTRIES = sorted(name for name, spec in CONFIG["external"].items() if spec.get("enabled", True))
TASK = "listops"

# Another program, registered by its config entry alone: a script (no hkt import) that writes
# the record as plain JSON, predicting label 0.
FOREIGN_SCRIPT = '''
import hashlib, json, sys
from datetime import datetime, timezone
from pathlib import Path
import pyarrow.parquet as pq

data, out, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
acc = {s: pq.read_table(data / f"{s}.parquet").column("label").to_pylist().count(0)
          / pq.read_metadata(data / f"{s}.parquet").num_rows for s in ("val", "test")}
out.mkdir(parents=True, exist_ok=True)
(out / "record.json").write_text(json.dumps({
    "schema_version": 1, "task": "listops", "model": "zero", "variant": "main", "seed": seed,
    "profile": "none", "config": {"task": {"name": "listops", "max_length": 512}},
    "n_params": 0, "steps": 0, "best_step": None, "val_accuracy": acc["val"],
    "test_accuracy": acc["test"], "wall_time_s": 0.0, "ms_per_step": None, "samples_per_s": None,
    "device": "cpu", "git_commit": None, "git_dirty": None, "data_dir": str(data),
    "data_checksums": {s: hashlib.sha256((data / f"{s}.parquet").read_bytes()).hexdigest()
                       for s in ("train", "val", "test")},
    "mlflow_run_id": None, "mlflow_tracking_uri": None, "mlflow_experiment": None,
    "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "hkt_version": "x"}))
print("zero: record written")
'''


def foreign_entry(script: Path) -> dict:
    return {"enabled": True, "tasks": [TASK], "seeds": [3],
            "command": f"python {shlex.quote(str(script))} {{data}} {{out}} {{seed}}"
                       " > {log} 2>&1"}


def check_record(run_dir: Path, data: Path, *, model: str, seed: int) -> None:
    """The contract: the schema's fields, the job's identity, accuracies in [0, 1], the data's
    checksums, and one row of the runs frame."""
    rec = load_record(run_dir)  # validates against hkt/schemas/run_record.schema.json
    assert set(schema()["required"]) <= set(rec)
    assert (rec["model"], rec["variant"], rec["seed"]) == (model, MAIN, seed)
    assert 0 <= rec["val_accuracy"] <= 1 and 0 <= rec["test_accuracy"] <= 1
    assert rec["data_checksums"] == {s: sha256_file(data / f"{s}.parquet")
                                     for s in ("train", "val", "test")}
    runs = runs_from_records(load_records([run_dir]))
    assert runs["model"].to_list() == [model]
    assert runs["test_accuracy"].to_list() == [rec["test_accuracy"]]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Real ListOps, small: the rule references (hkt/baselines/_listops_rules.py) read its trees."""
    out = tmp_path_factory.mktemp("contract") / "data"
    prepare_task(TASK, out, overrides=["prepare.splits.train=200", "prepare.splits.val=50",
                                       "prepare.splits.test=50", "prepare.chunk_size=2000"])
    return out


@pytest.mark.parametrize("name", BASELINES.names())
def test_every_registered_baseline_writes_a_record_of_the_contract(name, data, tmp_path):
    assert main(["baseline", name, "--data", str(data), "--out", str(tmp_path / "run"),
                 "--seed", "2"]) == 0
    check_record(tmp_path / "run", data, model=name, seed=2)
    # every example of both splits, in file order; a rule's probability is 1 for its answer
    df = check_predictions(tmp_path / "run", data)
    for split in ("val", "test"):
        part = df.filter(pl.col("split") == split)
        assert part["row"].to_list() == list(range(pq.read_metadata(data / f"{split}.parquet").num_rows))
        if name != "ngram":
            assert part.select(pl.max_horizontal(pl.all().exclude("split", "row", "label", "pred"))
                               ).to_series().to_list() == [1.0] * part.height


def run_workflow_command(grid: Grid, job: Job, cwd: Path) -> subprocess.CompletedProcess:
    """The job's shell command as the rule `external` runs it, in a results directory that holds
    the task's prepared data, with `hkt` and `python` from this interpreter's directory."""
    uri = f"sqlite:///{cwd / grid.results / 'mlflow.db'}"
    shell = (f"HKT_MLFLOW_EXPERIMENT={shlex.quote(grid.experiment(job.task))} "
             f"{grid.external_command(job, uri)}")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HKT_RESULTS_DIR": str(cwd / grid.results), "MLFLOW_TRACKING_URI": uri}
    (cwd / grid.job_log("external", job)).parent.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", "-c", shell], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def contract_grid(**external: dict) -> Grid:
    """config/config.yaml's grid (the suite `paper`, results in ``results``), with more
    ``external`` entries."""
    config = {**CONFIG, "suite": "paper", "external": {**CONFIG["external"], **external}}
    return Grid(config, CONFIG_DIR)


@pytest.fixture(scope="module")
def workdir(data, tmp_path_factory) -> Path:
    """Where the jobs run: ``results/data/TASK`` is the fixture; one MLflow store for all."""
    cwd = tmp_path_factory.mktemp("contract-jobs")
    target = cwd / contract_grid().path("data", task=TASK)
    target.parent.mkdir(parents=True)
    target.symlink_to(data, target_is_directory=True)
    return cwd


@pytest.mark.parametrize("name", ENTRIES)
def test_every_configured_baseline_runs_its_workflow_command(name, data, workdir):
    grid = contract_grid()
    job = Job(TASK, name, MAIN, grid.external[name].seeds[0])
    r = run_workflow_command(grid, job, workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    check_record(workdir / grid.path("run", **job.wildcards()), data, model=name, seed=job.seed)
    check_predictions(workdir / grid.path("run", **job.wildcards()), data)
    assert load_record(workdir / grid.record(job))["mlflow_experiment"] == grid.experiment(TASK)
    assert (workdir / grid.job_log("external", job)).read_text().startswith("===== hkt baseline")


def test_a_program_that_is_not_ours_runs_from_its_config_entry_alone(data, workdir, tmp_path):
    script = tmp_path / "zero.py"
    script.write_text(FOREIGN_SCRIPT)
    grid = contract_grid(zero=foreign_entry(script))
    job = Job(TASK, "zero", MAIN, 3)
    assert job in grid.external_jobs()
    r = run_workflow_command(grid, job, workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    check_record(workdir / grid.path("run", **job.wildcards()), data, model="zero", seed=3)
    assert (workdir / grid.job_log("external", job)).read_text() == "zero: record written\n"


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> str:
    """The workflow's dry run (-p: each job's command) of config/config.yaml's external
    baselines beside one trained model, plus a program that is not ours, added by its entry."""
    tmp = tmp_path_factory.mktemp("contract-dry")
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "main": {"tasks": [TASK], "models": ["mha"]}, "ablation": {"enabled": False},
        "analyze": {"enabled": False}, "bench": {"enabled": False},
        "external": {"zero": foreign_entry(tmp / "zero.py")}}))
    r = snakemake("-n", "-p", "--configfile", str(cfg), "--config", "results_dir=res", cwd=tmp)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return r.stdout + r.stderr


@pytest.mark.parametrize("name", [*ENTRIES, "zero"])
def test_the_dry_run_plans_every_configured_baseline(name, dry_run):
    spec = {**CONFIG["external"], "zero": foreign_entry(Path("zero.py"))}[name]
    for task in spec.get("tasks") or [TASK]:
        for seed in spec.get("seeds") or [0]:
            job = f"res/runs/{task}/{name}/main/seed{seed}"
            assert f"output: {job}/record.json" in dry_run, job
            assert f"--out {job}" in dry_run or f"{job} {seed} >" in dry_run
