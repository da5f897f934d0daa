"""What an auditor finds in MLflow (issue 24, items 2-4): every run's data as a dataset input
(two runs on other data of one task differ), every training run's best model, named after its
run, loadable from `runs:/<id>/<run name>` and reproducing the run's test accuracy, and the suite as one MLflow run
that holds the summary, tables and figures and to which every run links."""

from __future__ import annotations

import json
import os

import mlflow
import pytest
import torch
from mlflow.tracking import MlflowClient

from conftest import write_prepared_data
from hkt.cli.main import main
from hkt.models.serving import served_tokens
from hkt.train.data import RunData
from hkt.train.run_metadata import dataset_digest

TRAIN = ["task=listops", "profile=smoke", "--no-progress"]


@pytest.fixture
def store(isolated_results):
    return f"sqlite:///{isolated_results}/mlflow.db"


def train(data, run, *extra):
    assert main(["train", "--data", str(data), "--out", str(run), *TRAIN, *extra]) == 0
    return json.loads((run / "record.json").read_text())


def test_runs_log_their_data_and_a_loadable_model(tmp_path, store, monkeypatch):
    data = write_prepared_data(tmp_path / "data", "listops", n_train=64)
    other = write_prepared_data(tmp_path / "other", "listops", n_train=96)
    rec = train(data, tmp_path / "run", "model=hkt")
    rec2 = train(other, tmp_path / "run2", "model=mha", "tracking.log_model=false")
    client = MlflowClient(store)

    inputs = client.get_run(rec["mlflow_run_id"]).inputs.dataset_inputs
    assert len(inputs) == 1
    ds = inputs[0].dataset
    assert ds.name == "listops" and ds.digest == dataset_digest(rec["data_checksums"])
    assert json.loads(ds.source)["uri"] == str(data.resolve())
    assert json.loads(ds.profile)["num_rows"] == {"train": 64, "val": 32, "test": 32}
    assert {t.key: t.value for t in inputs[0].tags}["mlflow.data.context"] == "training"
    ds2 = client.get_run(rec2["mlflow_run_id"]).inputs.dataset_inputs[0].dataset
    assert ds2.name == "listops" and ds2.digest != ds.digest  # other data: visibly different

    assert "MLFLOW_TRACKING_URI" not in os.environ  # hkt train left it as it was
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)  # where runs:/ is looked up
    run_name = client.get_run(rec["mlflow_run_id"]).info.run_name
    assert run_name == "listops-hkt-main-s0"
    model = mlflow.pytorch.load_model(f"runs:/{rec['mlflow_run_id']}/{run_name}")
    test = RunData(data).eval_batches("test", rec["config"]["train"]["batch_size"],
                                      rec["config"]["train"]["test_batches"])
    correct = n = 0
    with torch.no_grad():
        for b in test:
            pred = model(served_tokens(b["tokens"], b["mask"])).argmax(-1)
            correct += int((pred == b["labels"]).sum())
            n += len(pred)
    assert n == rec["test_examples"] and correct / n == rec["test_accuracy"]
    models = client.search_logged_models(
        experiment_ids=[client.get_experiment_by_name("hkt-smoke-listops").experiment_id])
    assert [m.source_run_id for m in models] == [rec["mlflow_run_id"]]  # not the switched-off one
    assert [m.name for m in models] == [run_name]  # the Models column names the run's model


def test_a_baseline_logs_its_data(tmp_path, store):
    data = write_prepared_data(tmp_path / "data", "listops")
    assert main(["baseline", "majority", "--data", str(data), "--out", str(tmp_path / "b"),
                 "--tracking-uri", store, "--profile", "smoke"]) == 0
    rec = json.loads((tmp_path / "b" / "record.json").read_text())
    ds = MlflowClient(store).get_run(rec["mlflow_run_id"]).inputs.dataset_inputs[0].dataset
    assert ds.name == "listops" and ds.digest == dataset_digest(rec["data_checksums"])


def test_the_suite_is_one_mlflow_run_linked_to_its_runs(tmp_path, store, capsys, monkeypatch):
    """The aggregate is given the suite (--suite, as the workflow's rule passes it): its records
    must name it, and the suite run is its, not read from the records."""
    data = write_prepared_data(tmp_path / "data", "listops")
    monkeypatch.setenv("HKT_SUITE", "smoke")  # the one channel by which a job learns its suite
    runs = [train(data, tmp_path / "runs" / m, f"model={m}", "variant=main",
                  "tracking.log_model=false") for m in ("mha", "hkt")]
    assert {r["suite"] for r in runs} == {"smoke"}
    out = tmp_path / "results"
    base = ["aggregate", str(tmp_path / "runs"), "--out", str(out), "--tracking-uri", store]
    assert main([*base, "--suite-run"]) == 2  # the suite is not guessed from the records
    assert "--suite-run logs the run of one suite: name it with --suite NAME" in capsys.readouterr().err
    assert main([*base, "--suite", "cpu", "--no-tables"]) == 2  # records of another suite
    assert "2 of 2 records are of another suite than --suite cpu" in capsys.readouterr().err
    args = [*base, "--suite", "smoke", "--suite-run"]
    for _ in range(2):  # an aggregate run again updates the suite run, adds none
        assert main(args) == 0
    client = MlflowClient(store)
    exp = client.get_experiment_by_name("hkt-suite-smoke")
    suite_runs = client.search_runs([exp.experiment_id])
    assert len(suite_runs) == 1
    run = suite_runs[0]
    assert f"MLflow: suite run {run.info.run_id} in experiment 'hkt-suite-smoke'" in capsys.readouterr().out
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["suite"] == "smoke" and tags["hkt.kind"] == "suite"
    assert tags["git_commit"] == str(runs[0]["git_commit"]) and tags["env_digest"] == runs[0]["env_digest"]
    hkt_acc = runs[1]["test_accuracy"] * 100
    mha_acc = runs[0]["test_accuracy"] * 100
    assert run.data.metrics["listops_T512.hkt_minus_mha_pp"] == pytest.approx(hkt_acc - mha_acc)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.md", "tables", "figures"} <= artifacts
    assert "tables/main.csv" in {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert "figures/main_bar.png" in {a.path for a in client.list_artifacts(run.info.run_id, "figures")}
    note = tags["mlflow.note.content"]
    for rec in runs:  # drill down: the description links every run, each run links back
        exp_id = client.get_run(rec["mlflow_run_id"]).info.experiment_id
        assert f"(#/experiments/{exp_id}/runs/{rec['mlflow_run_id']})" in note
        linked = client.get_run(rec["mlflow_run_id"]).data.tags
        assert linked["hkt.suite_run_id"] == run.info.run_id
        assert linked["hkt.suite_run_experiment"] == exp.experiment_id
    # the suite's experiment is not read as runs
    assert main(["aggregate", "--mlflow", store, "--out", str(tmp_path / "from-mlflow")]) == 0
    import polars as pl

    read = pl.read_csv(tmp_path / "from-mlflow" / "tables" / "runs.csv")
    assert sorted(read["model"].to_list()) == ["hkt", "mha"]  # the two runs, not the suite run
