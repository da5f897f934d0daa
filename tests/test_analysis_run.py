"""`hkt analyze` on real (tiny) trained runs: the table, the figures, truncation, MLflow."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from hkt.analysis.capture import capture_internals
from hkt.cli.main import main
from hkt.models import build_model


def _train(data, run_dir, model: str, *extra: str) -> dict:
    rc = main(["train", "--data", str(data), "--out", str(run_dir), "profile=smoke",
               f"model={model}", *extra])
    assert rc == 0
    return json.loads((run_dir / "record.json").read_text())


@pytest.fixture
def hkt_run(prepared_data, isolated_results, tmp_path_factory):
    data = prepared_data("listops")
    run_dir = tmp_path_factory.mktemp("run") / "hkt"
    record = _train(data, run_dir, "hkt")
    return run_dir, record


def test_analyze_hkt_run(hkt_run, tmp_path):
    run_dir, record = hkt_run
    out = tmp_path / "analysis"
    assert main(["analyze", str(run_dir), "--out", str(out), "examples=16", "gram_examples=2"]) == 0
    table = pl.read_parquet(out / "analysis.parquet")
    assert set(table["section"]) == {"kurtosis", "kernel", "gram", "fusion", "truncation", "approximation"}
    assert (table["task"] == "listops").all() and (table["model"] == "hkt").all()
    levels = record["config"]["model"]["mixer"]["levels"]
    kappa = table.filter((pl.col("section") == "kurtosis") & (pl.col("metric") == "kappa"))
    assert set(kappa["level"]) == set(range(levels))
    assert set(kappa["quantity"]) == {"scores", "queries", "keys"}
    assert kappa["value"].is_finite().all() and (kappa["value"] > 0).all()
    # the Gram's measured rank never exceeds the paper's bound Σ_l rank(M_s^(l))
    gram = table.filter(pl.col("section") == "gram")
    rank = gram.filter(pl.col("metric") == "rank").sort("layer", "head", "quantity")["value"]
    bound = gram.filter(pl.col("metric") == "rank_bound").sort("layer", "head", "quantity")["value"]
    assert (rank <= bound).all()
    # truncation to all levels, on the whole test split, is the run's own test accuracy
    trunc = table.filter((pl.col("section") == "truncation") & (pl.col("metric") == "accuracy")).sort("level")
    assert trunc["level"].to_list() == list(range(1, levels + 1))
    assert trunc["value"][-1] == pytest.approx(record["test_accuracy"], abs=1e-12)
    # fusion weights: per level means sum to one
    means = table.filter((pl.col("section") == "fusion") & (pl.col("metric") == "mean") & (pl.col("level") >= 0))
    sums = means.group_by("layer", "head").agg(pl.col("value").sum())["value"]
    assert ((sums - 1).abs() < 1e-6).all()  # float32 λ
    # approximation: the trained model and its initialisation, every layer, head and L'
    approx = table.filter(pl.col("section") == "approximation")
    assert set(approx["quantity"]) == {"trained", "init"}
    full = approx.filter((pl.col("level") == levels) & (pl.col("metric") != "reduced"))
    assert full.height > 0 and (full["value"] == 0).all()
    assert (approx.filter(pl.col("metric") == "examples")["value"] == 16).all()
    assert approx.filter(pl.col("metric") == "rho")["value"].is_finite().all()
    for name in ("kappa_per_level.png", "lambda_distribution.png", "lambda_example.png", "truncation.png",
                 "approximation.png"):
        assert (out / name).stat().st_size > 1000
    # logged to the run's MLflow entry
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=record["mlflow_tracking_uri"])
    artifacts = {a.path for a in client.list_artifacts(record["mlflow_run_id"], "analysis")}
    assert {"analysis/analysis.parquet", "analysis/environment.json"} <= artifacts
    metrics = client.get_run(record["mlflow_run_id"]).data.metrics
    assert client.get_run(record["mlflow_run_id"]).data.tags["analysis.env_digest"] == \
        json.loads((out / "environment.json").read_text())["digest"]
    assert metrics[f"analysis/truncation_acc_L{levels}"] == pytest.approx(record["test_accuracy"])


def test_initial_model_is_the_runs_training_initialisation(hkt_run):
    """Training seeds torch with the run's seed, then builds the model: the control rebuilds it."""
    from hkt.analysis.run import initial_model, load_trained_run
    from hkt.train.loop import seed_everything

    run_dir, record = hkt_run
    trained = load_trained_run(run_dir)
    init = initial_model(record, trained.data_dir)
    seed_everything(int(record["seed"]))
    meta = {"vocab_size": 16, "num_classes": 10}  # conftest's listops fixture
    expected = build_model(record["config"]["model"], **meta,
                           max_length=int(record["config"]["task"]["max_length"]))
    for (name, p), q in zip(init.named_parameters(), expected.parameters()):
        assert torch.equal(p, q), name
    changed = [n for n, p in trained.model.named_parameters() if not torch.equal(p, init.get_parameter(n))]
    assert changed  # training moved the weights away from the initialisation


def test_analyze_mha_run(prepared_data, isolated_results, tmp_path):
    data = prepared_data("listops")
    _train(data, tmp_path / "mha", "mha", "tracking.enabled=false")
    out = tmp_path / "an"
    assert main(["analyze", str(tmp_path / "mha"), "--out", str(out), "examples=8", "gram_examples=1"]) == 0
    table = pl.read_parquet(out / "analysis.parquet")
    assert set(table["section"]) == {"kurtosis", "kernel", "gram"}  # no λ, no levels to truncate
    assert set(table["level"].filter(table["level"] >= 0)) == {0}


def test_analyze_rejects_model_without_attention_internals(prepared_data, isolated_results, tmp_path,
                                                           capsys):
    """The conv mixer exposes no scores, queries or keys: analyze says so instead of crashing."""
    data = prepared_data("listops")
    _train(data, tmp_path / "conv", "conv", "tracking.enabled=false")
    capsys.readouterr()
    out = tmp_path / "an"
    assert main(["analyze", str(tmp_path / "conv"), "--out", str(out), "examples=8"]) == 2
    err = capsys.readouterr().err
    assert "CausalConvMixer" in err and "analyse mha or hkt runs" in err
    assert not out.exists()


def test_bad_override_names_key(hkt_run, tmp_path, capsys):
    run_dir, _ = hkt_run
    assert main(["analyze", str(run_dir), "--out", str(tmp_path / "x"), "exampels=3"]) == 2
    assert "exampels" in capsys.readouterr().err


def test_capture_internals_restores_forward():
    torch.manual_seed(0)
    model = build_model({"name": "hkt", "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ffn": 32,
                         "mixer": {"levels": 2}}, vocab_size=10, num_classes=3, max_length=32)
    model.eval()  # dropout (EncoderConfig's default 0.1) would make the two passes differ
    tokens = torch.randint(1, 10, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.bool)
    before = model(tokens, mask)
    with capture_internals(model) as captured:
        during = model(tokens, mask)
    assert [len(c) for c in captured] == [1, 1]
    assert captured[0][0].lambdas.shape == (2, 2, 12, 2)
    torch.testing.assert_close(during, before)
    assert all("forward" not in m.__dict__ for m in model.mixer_modules())
