"""The hashed n-gram baseline (hkt.baselines.ngram) and what every baseline of ours shares
(hkt.baselines.run: the record, MLflow, the command line)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from hkt.baselines import ngram
from hkt.provenance import SUITE_ENV
from hkt.baselines.run import run_baseline
from hkt.cli.main import main
from hkt.data.parquet import SplitData
from hkt.device import describe_device
from hkt.report.audit import check_mlflow
from hkt.report.mlflow_runs import runs_from_mlflow
from hkt.report.tables import main_table
from hkt.runs_frame import load_records, runs_from_records
from hkt.run_record import HISTORY_COLUMNS, load_record


def keyword_data(out: Path, n_train=600, n_eval=200, seed=0) -> Path:
    """Prepared data (contract layout) whose label is whether token 7 occurs: n-grams can learn it."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("val", n_eval), ("test", n_eval)):
        labels = rng.integers(0, 2, size=n)
        tokens = []
        for y in labels:
            t = rng.integers(1, 7, size=int(rng.integers(5, 40))).astype(np.uint16)
            if y:
                t[rng.integers(0, len(t))] = 7
            tokens.append(t)
        table = pa.table({
            "id": [f"{split}-{i}" for i in range(n)],
            "tokens": pa.array(tokens, pa.list_(pa.uint16())),
            "label": pa.array(labels.astype(np.int64)),
            "length": pa.array([len(t) for t in tokens], pa.int32()),
        })
        meta = {"task": "keyword", "split": split, "vocab": [str(i) for i in range(8)],
                "vocab_size": 8, "num_classes": 2, "max_length": 64, "source": "test",
                "code_version": "test"}
        pq.write_table(table.replace_schema_metadata({"hkt": json.dumps(meta)}),
                       out / f"{split}.parquet", compression="zstd")
    return out


def test_ngrams_stay_inside_examples():
    split = SplitData(["a", "b"], np.array([1, 2, 3]), np.array([0, 2, 3]), np.array([0, 1]))
    ids, offsets, weights = ngram.hashed_ngrams(split, (1, 2), bits=16)
    assert offsets.tolist() == [0, 3, 4]  # example 0: "1", "2", "1 2"; example 1: "3" (no "2 3")
    norms = np.sqrt(np.bincount(np.repeat([0, 1], np.diff(offsets)), weights=weights ** 2))
    np.testing.assert_allclose(norms, 1.0, rtol=1e-6)
    # the same n-gram hashes alike wherever it occurs, and orders differ
    ids_a, _, _ = ngram.hashed_ngrams(split.take(np.arange(1)), (1,), bits=16)
    assert set(ids_a) <= set(ids[:3])


def test_the_numbers_are_those_before_majority_had_its_own_module(tmp_path):
    """Pinned: what `hkt baseline ngram` computed on this data before the split (issue 40); the
    published records are reproduced the same way (docs/results/*/runs/*/ngram)."""
    data = keyword_data(tmp_path / "data")
    rec = run_baseline("ngram", data, tmp_path / "lr", orders=(1, 2), buckets=1 << 12, epochs=3,
                       batch_size=32, seed=1, profile="smoke")
    assert (rec["val_accuracy"], rec["test_accuracy"]) == (0.99, 0.98)
    assert (rec["steps"], rec["best_step"], rec["n_params"]) == (57, 57, 8194)
    with open(tmp_path / "lr" / "history.csv", newline="") as f:
        assert [float(h["val_acc"]) for h in csv.DictReader(f)] == [0.885, 0.965, 0.99]
    assert rec["config"]["model"] == {"name": "ngram", "orders": [1, 2], "buckets": 4096,
                                      "features": "log1p(count), unit L2 norm",
                                      "classifier": "logistic regression"}
    assert rec["config"]["train"] == {"profile": "smoke", "epochs": 3, "batch_size": 32,
                                      "lr": 0.05, "optimizer": "sparse adam", "max_train": None}
    assert rec["external"] == "hkt.baselines.ngram"


def test_majority_and_ngram_write_valid_records(tmp_path):
    data = keyword_data(tmp_path / "data")
    maj = run_baseline("majority", data, tmp_path / "maj", profile="smoke")
    lr = run_baseline("ngram", data, tmp_path / "lr", orders=(1, 2), buckets=1 << 12, epochs=5,
                      batch_size=32, seed=1, profile="smoke")
    for rec, path in ((maj, tmp_path / "maj"), (lr, tmp_path / "lr")):
        assert load_record(path) == rec  # schema-valid, and what was returned
        assert rec["task"] == "keyword" and rec["config"]["task"]["max_length"] == 64
        assert rec["mlflow_run_id"] is None
        assert len(rec["data_checksums"]) == 3
        assert rec["device"] == describe_device(torch.device("cpu"))  # as hkt train names it
    assert maj["n_params"] == 0 and maj["model"] == "majority"
    assert 0.3 < maj["test_accuracy"] < 0.7
    assert lr["test_accuracy"] > 0.9 > maj["test_accuracy"] + 0.2
    assert lr["n_params"] == (1 << 12) * 2 + 2
    # history.csv in the one layout every run has (hkt.run_record), one row per epoch
    with open(tmp_path / "lr" / "history.csv", newline="") as f:
        hist = list(csv.DictReader(f))
    assert tuple(hist[0]) == HISTORY_COLUMNS and len(hist) == 5
    assert max(float(h["val_acc"]) for h in hist) == lr["val_accuracy"]  # the best epoch
    # the external-baseline recipe: its records join the tables like training runs
    runs = runs_from_records(load_records([tmp_path / "maj", tmp_path / "lr"]))
    main = main_table(runs)
    assert main["model"].to_list() == ["ngram", "majority"]


def test_logs_to_mlflow_and_passes_the_audit(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("HKT_MLFLOW_EXPERIMENT", raising=False)
    data = keyword_data(tmp_path / "data", n_train=100, n_eval=40)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec = run_baseline("ngram", data, tmp_path / "run", buckets=1 << 10, epochs=1,
                       tracking_uri=uri, profile="smoke")
    # the experiment `hkt train` uses for this profile and task (config/train.yaml)
    assert rec["mlflow_experiment"] == "hkt-smoke-keyword" and rec["mlflow_tracking_uri"] == uri
    client = MlflowClient(uri)
    artifacts = {a.path for a in client.list_artifacts(rec["mlflow_run_id"])}
    assert artifacts == {"record.json", "config.json", "environment.json", "predictions.parquet"}
    assert client.get_run(rec["mlflow_run_id"]).info.status == "FINISHED"
    check = check_mlflow(load_records([tmp_path / "run"]))
    assert check["status"].to_list() == ["ok"]
    runs, _ = runs_from_mlflow(uri)
    assert runs["test_accuracy"].to_list() == [rec["test_accuracy"]]
    assert runs["env_digest"].to_list() == [rec["env_digest"]]  # the MLflow tag, as the record
    assert (tmp_path / "run" / "environment.json").is_file()


def test_the_workflow_names_the_experiment_through_the_environment(tmp_path, monkeypatch):
    """An external command learns the suite's experiment from $HKT_MLFLOW_EXPERIMENT and its
    suite run from $HKT_SUITE and $HKT_RESULTS_DIR: the one channel, as for `hkt train`."""
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("HKT_MLFLOW_EXPERIMENT", "hkt-paper-keyword")
    monkeypatch.setenv("HKT_RESULTS_DIR", str(tmp_path / "res"))
    monkeypatch.setenv("HKT_SUITE", "paper")
    data = keyword_data(tmp_path / "data", n_train=40, n_eval=20)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SUITE_ENV, "paper")
        rec = run_baseline("majority", data, tmp_path / "run", tracking_uri=uri)
    assert rec["mlflow_experiment"] == "hkt-paper-keyword"
    assert rec["suite"] == "paper" and rec["results_dir"] == str((tmp_path / "res").resolve())
    run = MlflowClient(uri).get_run(rec["mlflow_run_id"])
    assert run.data.tags["suite"] == "paper" and run.data.tags["results_dir"] == rec["results_dir"]
    assert run.data.metrics["wall_time_s"] == rec["wall_time_s"]  # as hkt train logs it


def test_help_names_the_default_experiment(capsys):
    with pytest.raises(SystemExit):
        main(["baseline", "ngram", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "HKT_MLFLOW_EXPERIMENT" in text and "hkt-<profile>-<task>" in text
    assert "--suite" not in text and "HKT_RESULTS_DIR" in text
    assert "--orders" in text and "--method" not in text  # its own options; no retired one


def test_command_line_errors_are_one_line(tmp_path, capsys):
    assert main(["baseline", "ngram", "--data", str(tmp_path / "nope"),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "hkt prepare" in err and "Traceback" not in err
    data = keyword_data(tmp_path / "data", n_train=20, n_eval=10)
    assert main(["baseline", "ngram", "--data", str(data), "--out", str(tmp_path / "o"),
                 "--buckets", "1000"]) == 2
    assert "power of two" in capsys.readouterr().err
    bare = tmp_path / "bare"  # Parquet without the hkt metadata: not prepared data
    bare.mkdir()
    pq.write_table(pq.read_table(data / "train.parquet").replace_schema_metadata(None),
                   bare / "train.parquet")
    assert main(["baseline", "ngram", "--data", str(bare), "--out", str(tmp_path / "o")]) == 2
    assert "'hkt' metadata" in capsys.readouterr().err
    assert main(["baseline", "ngram", "--data", str(data), "--out", str(tmp_path / "o"),
                 "--max-train", "5", "--epochs", "1"]) == 0
    assert load_record(tmp_path / "o")["config"]["train"]["max_train"] == 5


def test_the_majority_method_of_ngram_is_gone_with_what_to_run_instead(tmp_path, capsys):
    """`hkt baseline ngram --method majority` ran the majority class before it had its own
    module; no record or document names that command, so it fails saying what replaced it."""
    with pytest.raises(SystemExit) as exc:
        main(["baseline", "ngram", "--data", str(tmp_path), "--out", str(tmp_path / "o"),
              "--method", "majority"])
    assert exc.value.code == 2
    assert "the majority class is `hkt baseline majority`" in capsys.readouterr().err
