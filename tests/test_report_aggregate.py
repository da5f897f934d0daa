"""hkt.report: tables from run records and from MLflow, the MLflow audit, figures, `hkt aggregate`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from hkt.cli.main import main as hkt_main
from hkt.report.audit import check_mlflow
from hkt.report.mlflow_runs import runs_from_mlflow
from hkt.report.sweep import EACH_AT_BEST, ONE_RATE
from hkt.report.writers import examples_text
from hkt.report.tables import ablation_table, gap_table, main_display, main_table
from hkt.report.writers import write_table
from hkt.runs_frame import AggregateError, curves_from_records, load_records, most_common_length, runs_from_records
from hkt import paper
from hkt.figures import suite as figures
from conftest import load_script

HKT_ATT = {"levels": 3, "stride": 2, "kernel_size": 2, "fusion": "dynamic", "upsample": "nearest",
           "impl": "fused"}


def make_record(task="listops", model="hkt", variant="main", seed=0, val=0.5, test=0.5,
                length=512, n_params=1000, levels=None, created="2026-01-01T00:00:00+00:00",
                **extra):
    att = dict(HKT_ATT, levels=levels or 3) if model == "hkt" else {}
    rec = {
        "schema_version": 1, "task": task, "model": model, "variant": variant, "seed": seed,
        "profile": "smoke",
        "config": {"task": {"family": task, "max_length": length, "num_classes": 10},
                   "model": {"name": model, "d_model": 16, "n_layers": 1, "d_ffn": 32,
                             "mixer": att},
                   "train": {"batch_size": 8}},
        "n_params": n_params, "steps": 12, "best_step": 6, "train_examples": 48, "val_accuracy": val,
        "test_accuracy": test, "wall_time_s": 1.0, "ms_per_step": 10.0, "samples_per_s": 100.0,
        "device": "cpu", "git_commit": None, "git_dirty": None, "data_dir": None,
        "data_checksums": {}, "mlflow_run_id": None, "mlflow_tracking_uri": None,
        "mlflow_experiment": None, "created_at": created, "hkt_version": "0.1.0",
    }
    rec.update(extra)
    return rec


def write_records(root: Path, records: list[dict]) -> Path:
    for r in records:
        d = root / r["task"] / r["model"] / r["variant"] / f"seed{r['seed']}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "record.json").write_text(json.dumps(r))
        if r["model"] in ("hkt", "mha"):
            (d / "history.csv").write_text(
                "step,train_loss,train_acc,lr,samples_per_s,val_loss,val_acc\n"
                f"3,1.0,0.1,0.001,10,,\n6,0.9,0.2,0.001,10,0.8,{r['val_accuracy'] / 2}\n"
                f"12,0.8,0.3,0.001,10,0.7,{r['val_accuracy']}\n")
    return root


def suite_records() -> list[dict]:
    recs = []
    for seed, (h, m) in enumerate([(0.56, 0.50), (0.55, 0.51), (0.54, 0.49)]):
        recs.append(make_record(model="hkt", seed=seed, val=h + 0.01, test=h, n_params=1200,
                                test_examples=2000))
        recs.append(make_record(model="mha", seed=seed, val=m + 0.01, test=m, n_params=1000,
                                test_examples=2000))
        recs.append(make_record(model="hkt", variant="levels1", seed=seed, levels=1, test=h - 0.2,
                                val=h - 0.2))
        recs.append(make_record(task="imdb", length=1024, model="hkt", seed=seed, test=0.7, val=0.7))
        recs.append(make_record(task="imdb", length=1024, model="mha", seed=seed, test=0.6, val=0.6))
    recs.append(make_record(model="majority", seed=0, test=0.1, val=0.1, n_params=0,
                            external="hkt.baselines.ngram"))
    return recs


def test_main_table_means_stds_and_paper(tmp_path):
    records = load_records([write_records(tmp_path, suite_records())])
    runs = runs_from_records(records)
    assert len(runs) == 16
    main = main_table(runs)
    row = main.filter((pl.col("task") == "listops") & (pl.col("model") == "hkt")).row(0, named=True)
    assert row["seeds"] == 3 and row["length"] == 512
    assert row["test_mean"] == pytest.approx(55.0)
    assert row["test_std"] == pytest.approx(1.0)  # sample std of 56, 55, 54
    assert row["paper_mean"] == pytest.approx(55.10) and row["paper_std"] == pytest.approx(0.29)
    assert row["delta_vs_paper"] == pytest.approx(55.0 - 55.10)
    assert row["n_params"] == 1200
    assert (row["profile"], row["steps"], row["epochs"]) == ("smoke", 12, pytest.approx(2.0))
    assert main_display(main)[1][1][4] == "smoke: 12 steps, 2.00 epochs"  # 12 x 8 / 48    # order: tasks as the paper, models mha, hkt, then the rest
    assert main.select("task", "model").rows()[:3] == [("listops", "mha"), ("listops", "hkt"),
                                                      ("listops", "majority")]
    maj = main.filter(pl.col("model") == "majority").row(0, named=True)
    assert maj["paper_mean"] is None and maj["test_std"] is None  # one seed: no std
    gap = gap_table(main, runs)
    g = gap.filter(pl.col("task") == "listops").row(0, named=True)
    assert g["ours_pp"] == pytest.approx(55.0 - 50.0)
    assert g["paper_pp"] == pytest.approx(55.10 - 50.33)
    assert g["difference_pp"] == pytest.approx(5.0 - 4.77)
    # Welch over seeds: 56, 55, 54 vs 50, 51, 49: SE = sqrt(1/3 + 1/3), df = 4, t(0.975, 4) = 2.776
    half = 2.776 * (2 / 3) ** 0.5
    assert (g["ci_low_pp"], g["ci_high_pp"]) == pytest.approx((5.0 - half, 5.0 + half), abs=2e-3)
    assert g["p_value"] == pytest.approx(0.0036, abs=2e-4) and g["significant"].startswith("yes")
    assert (g["seeds_a"], g["seeds_b"], g["test_examples_min"], g["test_examples_max"]) == (3, 3, 2000, 2000)
    flat = gap.filter(pl.col("task") == "imdb").row(0, named=True)  # 70, 70, 70 vs 60, 60, 60
    assert flat["p_value"] is None and "no spread" in flat["significant"]
    assert flat["test_examples_min"] is None and examples_text(flat) == "?"  # records without test_examples say so


def test_controls_table_sets_each_trained_model_against_hkt_and_mha_not_the_external_ones(tmp_path):
    from hkt.report.controls import controls_display, controls_table

    recs = suite_records() + [make_record(model="s4d", seed=s, test=t, val=t, test_examples=2000)
                              for s, t in enumerate([0.60, 0.62, 0.61])]
    runs = runs_from_records(load_records([write_records(tmp_path, recs)]))
    controls = controls_table(main_table(runs), runs)
    # s4d on listops only; majority is external, hkt and mha are the compared pair
    assert controls.select("task", "model", "versus").rows() == [
        ("listops", "s4d", "hkt"), ("listops", "s4d", "mha")]
    hkt, mha = controls.iter_rows(named=True)
    assert hkt["difference_pp"] == pytest.approx(61.0 - 55.0)
    assert mha["difference_pp"] == pytest.approx(61.0 - 50.0)
    # Welch: 60, 62, 61 vs 56, 55, 54: SE = sqrt(1/3 + 1/3), df = 4
    half = 2.776 * (2 / 3) ** 0.5
    assert (hkt["ci_low_pp"], hkt["ci_high_pp"]) == pytest.approx((6.0 - half, 6.0 + half), abs=2e-3)
    assert hkt["p_value"] < 0.01 and (hkt["seeds_a"], hkt["seeds_b"]) == (3, 3)
    assert hkt["versus_paper"] == pytest.approx(55.10)
    assert mha["minus_paper_pp"] == pytest.approx(61.0 - 50.33)
    header, rows = controls_display(controls)
    assert rows[1][header.index("control − versus (pp)")] == "+11.00"
    assert rows[1][header.index("its test acc (%)")] == "50.00 ± 1.00"
    none = controls_table(main_table(runs.filter(pl.col("model") != "s4d")), runs)
    assert none.is_empty() and none.columns == controls.columns


def test_ablation_table_deltas_and_paper_figure(tmp_path):
    runs = runs_from_records(load_records([write_records(tmp_path, suite_records())]))
    abl = ablation_table(runs, "listops")
    assert abl["variant"].to_list() == ["main", "levels1", "main"]
    assert abl["model"].to_list() == ["hkt", "hkt", "mha"]
    l1 = abl.row(1, named=True)
    assert l1["delta_pp"] == pytest.approx(-20.0)
    assert l1["paper_delta_pp"] == pytest.approx(paper.ABLATION_NO_HIERARCHY["delta_pp"])
    assert abl.row(0, named=True)["delta_pp"] == pytest.approx(0.0)
    assert l1["setting"].startswith("HKT L=1")
    half = 2.776 * (2 / 3) ** 0.5  # 36, 35, 34 vs 56, 55, 54
    assert (l1["ci_low_pp"], l1["ci_high_pp"]) == pytest.approx((-20 - half, -20 + half), abs=2e-3)
    assert l1["significant"].startswith("yes") and l1["seeds_a"] == 3
    assert abl.row(0, named=True)["p_value"] is None  # the reference itself


def test_a_derived_levels1_row_is_the_mha_runs_and_says_so(tmp_path, capsys):
    """ablation.derived {levels1: mha}: no levels1 runs; the row is MHA's, filed as HKT L=1,
    with its difference to HKT and the paper's -18.4 beside it, and the runs table untouched."""
    records = [r for r in suite_records() if r["variant"] != "levels1"]
    write_records(tmp_path / "runs", records)
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out),
                     "--derived", "levels1=mha"]) == 0
    abl = pl.read_csv(out / "tables" / "ablation.csv")
    l1 = abl.filter(pl.col("variant") == "levels1").row(0, named=True)
    mha = abl.filter(pl.col("model") == "mha").row(0, named=True)
    assert l1["model"] == "hkt" and l1["levels"] == 1
    assert l1["setting"] == "HKT L=1 (derived: the MHA runs, not trained again)"
    assert (l1["test_mean"], l1["delta_pp"], l1["p_value"]) == \
        (mha["test_mean"], mha["delta_pp"], mha["p_value"])
    assert l1["delta_pp"] == pytest.approx(50.0 - 55.0)
    assert l1["paper_delta_pp"] == pytest.approx(paper.ABLATION_NO_HIERARCHY["delta_pp"])
    assert "levels1" not in pl.read_csv(out / "tables" / "runs.csv")["variant"].to_list()
    # no MHA runs to derive from: one line naming what to do
    write_records(tmp_path / "hkt_only", [r for r in records if r["model"] != "mha"])
    assert hkt_main(["aggregate", str(tmp_path / "hkt_only"), "--out", str(tmp_path / "o2"),
                     "--derived", "levels1=mha"]) == 2
    assert "derived from the mha main runs on listops, but there are none" in capsys.readouterr().err
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(tmp_path / "o3"),
                     "--derived", "levels9=mha"]) == 2
    assert "--derived levels9=mha: expected VARIANT=MODEL" in capsys.readouterr().err


def test_runs_csv_gives_each_run_a_wilson_interval(tmp_path):
    from hkt.report.tables import with_test_interval

    recs = [make_record(seed=0, test=0.5, test_examples=10), make_record(seed=1, test=0.5)]
    runs = with_test_interval(runs_from_records(load_records([write_records(tmp_path, recs)])))
    r0, r1 = runs.sort("seed").rows(named=True)
    assert (r0["test_ci_low"], r0["test_ci_high"]) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert r1["test_ci_low"] is None  # unknown number of test examples: no interval


def test_superseded_mlflow_rerun_has_no_curve(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("hkt-listops", artifact_location=(tmp_path / "art").as_uri())
    tags = {"task": "listops", "model": "hkt", "variant": "main", "seed": "0"}
    for start_ms, acc in ((1_000, 0.2), (2_000, 0.8)):
        rid = client.create_run(exp_id, start_time=start_ms, tags=tags).info.run_id
        client.log_param(rid, "task.max_length", 512)
        for k in ("val_accuracy", "test_accuracy"):
            client.log_metric(rid, k, acc, step=12)
        client.set_tag(rid, "best_val_accuracy", repr(acc))
        client.set_terminated(rid, "FINISHED")
    runs, curves = runs_from_mlflow(uri)
    assert runs["val_accuracy"].to_list() == [0.8]
    assert curves["val_accuracy"].to_list() == [0.8]
    assert curves["source"].to_list() == runs["source"].to_list()


def test_records_and_mlflow_runs_from_before_the_mixer_rename_read_once_migrated(tmp_path,
                                                                               monkeypatch):
    """Records written before the rename hold config.model.attention, MLflow runs logged
    before it model.attention.* params: once scripts/migrate_results.py has migrated their
    results directory, both give the same variant columns as new ones."""
    from mlflow.tracking import MlflowClient

    new = make_record(levels=2, seed=0)
    old = make_record(levels=2, seed=1)
    old["config"]["model"]["attention"] = old["config"]["model"].pop("mixer")
    root = write_records(tmp_path / "runs", [new, old])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("hkt-listops", artifact_location=(tmp_path / "art").as_uri())
    for seed, key in ((0, "mixer"), (1, "attention")):
        rid = client.create_run(exp_id, tags={"task": "listops", "model": "hkt", "variant": "main",
                                              "seed": str(seed)}).info.run_id
        client.log_param(rid, "task.max_length", 512)
        for k, v in HKT_ATT.items():
            client.log_param(rid, f"model.{key}.{k}", 2 if k == "levels" else v)
        for k in ("val_accuracy", "test_accuracy"):
            client.log_metric(rid, k, 0.5, step=12)
        client.set_terminated(rid, "FINISHED")
    assert runs_from_mlflow(uri)[0].sort("seed")["levels"].to_list() == [2, None]  # not yet
    migrate = load_script("migrate_results")
    assert migrate.main([str(tmp_path), "--snakemake-dir", str(tmp_path)]) == 0
    for validate in (True, False):
        runs = runs_from_records(load_records([root], validate=validate))
        assert runs.sort("seed")["levels"].to_list() == [2, 2]
        assert runs.sort("seed")["stride"].to_list() == [2, 2]
    runs, _ = runs_from_mlflow(uri)
    runs = runs.sort("seed")
    assert runs["levels"].to_list() == [2, 2] and runs["fusion"].to_list() == ["dynamic"] * 2


def test_most_common_length():
    runs = runs_from_records([dict(make_record(length=n, seed=i), _path=f"r{i}")
                                  for i, n in enumerate((1024, 512, 1024, 512, 2000))])
    assert most_common_length(runs) == 512  # a tie: the shortest
    assert most_common_length(runs.filter(pl.col("length") > 512)) == 1024
    assert most_common_length(runs.clear()) is None


def test_invalid_record_is_named(tmp_path):
    bad = make_record()
    del bad["test_accuracy"]
    write_records(tmp_path, [bad])
    with pytest.raises(Exception, match="test_accuracy"):
        load_records([tmp_path])
    with pytest.raises(AggregateError, match="no such file"):
        load_records([tmp_path / "missing"])


def test_write_tables_and_figures(tmp_path):
    records = load_records([write_records(tmp_path / "runs", suite_records())])
    runs, curves = runs_from_records(records), curves_from_records(records)
    assert set(curves["model"].unique()) == {"hkt", "mha"}  # external baselines have no curve
    main = main_table(runs)
    written = write_table(main, main_display(main), tmp_path / "out" / "main", "Main.")
    md, csv, tex = (p.read_text() for p in written)
    assert "55.00 ± 1.00" in md and "55.10 ± 0.29" in md
    assert pl.read_csv(written[1]).height == len(main)
    assert r"\begin{tabular}" in tex and r"$\pm$" in tex and "±" not in tex
    for fn, args in ((figures.val_curves, (curves,)), (figures.main_bar, (runs,)),
                     (figures.accuracy_vs_levels, (runs,))):
        out = fn(*args, tmp_path / "fig" / f"{fn.__name__}.png")
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # without data every figure still exists (a workflow declares them up front)
    empty = runs.clear()
    out = figures.accuracy_vs_levels(empty, tmp_path / "fig" / "empty.png")
    assert out.stat().st_size > 0


def _figure_of(monkeypatch, fn, *args):
    """Run a figure function and return its matplotlib figure instead of saving it."""
    caught = []
    monkeypatch.setattr(figures, "save", lambda fig, path: caught.append(fig) or path)
    fn(*args, "unused.png")
    return caught[0]


def test_main_bar_legend_has_each_label_once(tmp_path, monkeypatch):
    runs = runs_from_records(load_records([write_records(tmp_path, suite_records())]))
    fig = _figure_of(monkeypatch, figures.main_bar, runs)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert sorted(labels) == ["hkt", "majority", "mha", "paper"]


def test_levels_figure_marks_the_papers_levels(tmp_path, monkeypatch):
    runs = runs_from_records(load_records([write_records(tmp_path, suite_records())]))
    ax = _figure_of(monkeypatch, figures.accuracy_vs_levels, runs).axes[0]
    ticks = {int(t) for t in ax.get_xticks()}
    assert {paper.LEVELS, paper.ABLATION_NO_HIERARCHY["levels"]} <= ticks
    monkeypatch.setattr(paper, "LEVELS", 5)
    ax = _figure_of(monkeypatch, figures.accuracy_vs_levels, runs).axes[0]
    assert 5 in {int(t) for t in ax.get_xticks()}


def test_cli_writes_everything(tmp_path, capsys):
    write_records(tmp_path / "runs", suite_records())
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out)]) == 0
    for t in ("main", "gap", "ablation"):
        for ext in ("md", "csv", "tex"):
            assert (out / "tables" / f"{t}.{ext}").is_file()
    for f in ("val_curves", "accuracy_vs_levels", "main_bar"):
        assert (out / "figures" / f"{f}.png").is_file()
    summary = (out / "summary.md").read_text()
    assert "## Main table" in summary and "(tables/main.md)" in summary
    assert "## The paper's claims, read against our runs" in summary
    assert "| HKT beats MHA on listops (T=512) |" in summary
    assert pl.read_csv(out / "tables" / "runs.csv").height == 16
    # user errors: one line, exit 2
    assert hkt_main(["aggregate", "--out", str(out)]) == 2
    assert "nothing to aggregate" in capsys.readouterr().err


def _lr_record(model, seed, lr, val, test, variant="main"):
    rec = make_record(model=model, seed=seed, val=val, test=test, variant=variant,
                      test_examples=2000)
    rec["config"]["optim"] = {"lr": lr}
    return rec


def test_learning_rate_tables_pick_each_models_best_rate_by_validation(tmp_path):
    """hkt aggregate --borrow: the published lr-1e-4 seeds beside a sweep's other rates;
    the best rate is the best mean validation accuracy, even where test says otherwise."""
    borrowed = [_lr_record(m, s, 1e-4, v, t) for s in range(3) for m, v, t in
                (("hkt", 0.40 + s / 100, 0.38 + s / 100), ("mha", 0.35 + s / 100, 0.33 + s / 100))]
    swept = [_lr_record("hkt", 0, 1e-3, 0.45, 0.30, "lr1e3"),   # best val, worse test
             _lr_record("mha", 0, 1e-3, 0.30, 0.36, "lr1e3"),   # worse val, better test
             _lr_record("hkt", 0, 3e-4, 0.41, 0.39, "lr3e4"),
             _lr_record("mha", 0, 3e-4, 0.37, 0.35, "lr3e4")]
    write_records(tmp_path / "published", borrowed)
    write_records(tmp_path / "runs", swept)
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out),
                     "--borrow", str(tmp_path / "published")]) == 0
    table = pl.read_csv(out / "tables" / "sweep.csv")
    assert table.select("model", "lr", "seeds").rows() == [
        ("hkt", 1e-4, 3), ("hkt", 3e-4, 1), ("hkt", 1e-3, 1),
        ("mha", 1e-4, 3), ("mha", 3e-4, 1), ("mha", 1e-3, 1)]
    best = table.filter(pl.col("best")).select("model", "lr").rows()
    assert best == [("hkt", 1e-3), ("mha", 3e-4)]
    assert set(table["source"]) == {"this suite", str(tmp_path / "published")}
    gap = pl.read_csv(out / "tables" / "sweep_gap.csv")
    assert gap.select("comparison", "lr_a", "lr_b").rows() == [
        (ONE_RATE, 1e-4, 1e-4), (ONE_RATE, 3e-4, 3e-4),
        (ONE_RATE, 1e-3, 1e-3), (EACH_AT_BEST, 1e-3, 3e-4)]
    assert gap["ours_pp"].to_list() == pytest.approx([5.0, 4.0, -6.0, -5.0])
    assert gap["seeds_a"].to_list() == [3, 1, 1, 1]
    # the borrowed runs stay out of every other table
    assert pl.read_csv(out / "tables" / "runs.csv").height == 4


def test_a_longer_budget_at_a_published_rate_is_its_own_setting(tmp_path):
    """The long suite: 1e-3 for 20k steps is not pooled with the published 1e-3 at 10k steps;
    two borrowed paths join the table; the gap pairs settings both models share."""
    def at(model, seed, lr, steps, val, test, variant):
        rec = _lr_record(model, seed, lr, val, test, variant)
        rec["steps"] = steps
        return rec
    write_records(tmp_path / "cpu", [at(m, 0, 1e-4, 10_000, 0.35, 0.33, "main")
                                     for m in ("hkt", "mha")])
    write_records(tmp_path / "sens", [at(m, 0, 1e-3, 10_000, 0.38, 0.35, "lr1e3")
                                      for m in ("hkt", "mha")])
    write_records(tmp_path / "runs", [at("hkt", 0, 1e-3, 20_000, 0.42, 0.40, "lr1e3_steps20k"),
                                      at("mha", 0, 1e-3, 20_000, 0.37, 0.36, "lr1e3_steps20k")])
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out),
                     "--borrow", str(tmp_path / "cpu"), "--borrow", str(tmp_path / "sens")]) == 0
    table = pl.read_csv(out / "tables" / "sweep.csv")
    assert table.select("model", "lr", "steps", "seeds", "best").rows() == [
        ("hkt", 1e-4, 10_000, 1, False), ("hkt", 1e-3, 10_000, 1, False),
        ("hkt", 1e-3, 20_000, 1, True), ("mha", 1e-4, 10_000, 1, False),
        ("mha", 1e-3, 10_000, 1, True), ("mha", 1e-3, 20_000, 1, False)]
    gap = pl.read_csv(out / "tables" / "sweep_gap.csv")
    assert gap.select("comparison", "lr_a", "steps_a", "lr_b", "steps_b").rows() == [
        (ONE_RATE, 1e-4, 10_000, 1e-4, 10_000), (ONE_RATE, 1e-3, 10_000, 1e-3, 10_000),
        (ONE_RATE, 1e-3, 20_000, 1e-3, 20_000), (EACH_AT_BEST, 1e-3, 20_000, 1e-3, 10_000)]
    assert gap["ours_pp"].to_list() == pytest.approx([0.0, 0.0, 4.0, 5.0])
    assert "| 0.001 | 20,000 |" in (out / "tables" / "sweep.md").read_text()


def test_learning_rate_tables_say_why_they_are_empty(tmp_path):
    write_records(tmp_path / "runs", suite_records())
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert pl.read_csv(out / "tables" / "sweep.csv").is_empty()
    assert "No model of these runs was trained at more than one learning rate or budget" in (
        out / "tables" / "sweep_gap.md").read_text()


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory):
    """A SQLite MLflow store holding the suite's runs the way `hkt train` logs them."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    records = suite_records()
    for r in records:
        name = f"hkt-{r['task']}"
        exp = client.get_experiment_by_name(name)
        exp_id = exp.experiment_id if exp else client.create_experiment(
            name, artifact_location=(root / "art").as_uri())
        tags = {"task": r["task"], "model": r["model"], "variant": r["variant"],
                "seed": str(r["seed"]), "profile": r["profile"]}
        if r.get("external"):
            tags["external"] = r["external"]
        run = client.create_run(exp_id, tags=tags)
        rid = run.info.run_id
        client.log_param(rid, "task.max_length", r["config"]["task"]["max_length"])
        for k, v in r["config"]["model"].items():
            if k != "mixer":
                client.log_param(rid, f"model.{k}", v)
        for k, v in r["config"]["model"].get("mixer", {}).items():
            client.log_param(rid, f"model.mixer.{k}", v)
        if "train" in r["config"]:
            client.log_param(rid, "train.batch_size", r["config"]["train"]["batch_size"])
        for k in ("test_accuracy", "n_params", "ms_per_step", "test_examples",
                  "steps", "train_examples"):
            if r.get(k) is not None:  # as hkt train's log_final
                client.log_metric(rid, k, r[k], step=12)
        # the curve, best at step 6 (the record's val_accuracy, the tag), lower at the last step
        client.log_metric(rid, "val_accuracy", r["val_accuracy"], step=6)
        client.log_metric(rid, "val_accuracy", r["val_accuracy"] - 0.1, step=12)
        client.set_tag(rid, "best_val_accuracy", repr(r["val_accuracy"]))
        client.set_terminated(rid, "FINISHED")
        r.update(mlflow_run_id=rid, mlflow_tracking_uri=uri, mlflow_experiment=name)
    unfinished = client.create_run(client.get_experiment_by_name("hkt-listops").experiment_id,
                                   tags={"task": "listops", "model": "hkt"})
    assert unfinished.info.status == "RUNNING"  # not counted: no final metrics, not finished
    return uri, records


def test_tables_from_mlflow_match_tables_from_records(tmp_path, mlflow_store):
    uri, records = mlflow_store
    from_records = main_table(runs_from_records(
        load_records([write_records(tmp_path, records)])))
    runs, curves = runs_from_mlflow(uri)
    from_mlflow = main_table(runs)
    cols = ["task", "length", "model", "seeds", "val_mean", "test_mean", "test_std", "n_params"]
    assert from_mlflow.select(cols).equals(from_records.select(cols))
    assert set(curves["model"].unique()) == {"hkt", "mha"}
    only_imdb, _ = runs_from_mlflow(uri, ["hkt-imdb"])
    assert set(only_imdb["task"].unique()) == {"imdb"}
    with pytest.raises(AggregateError, match="no MLflow experiment"):
        runs_from_mlflow(uri, ["hkt-nope"])
    a, b = tmp_path / "from_mlflow", tmp_path / "from_records"
    assert hkt_main(["aggregate", "--mlflow", uri, "--out", str(a)]) == 0
    assert hkt_main(["aggregate", str(tmp_path / "listops"), str(tmp_path / "imdb"),
                     "--out", str(b)]) == 0
    for table in ("main.md", "gap.md", "ablation.md"):
        assert (a / "tables" / table).read_text() == (b / "tables" / table).read_text()


def test_mlflow_audit_finds_missing_and_mismatched_runs(tmp_path, mlflow_store):
    uri, records = mlflow_store
    recs = [dict(r, _path=f"r{i}") for i, r in enumerate(records[:3])]
    check = check_mlflow(recs)
    assert check["status"].to_list() == ["ok", "ok", "ok"]
    recs[0]["test_accuracy"] = 0.123
    recs[1]["mlflow_run_id"] = "0" * 32
    recs[2] = dict(recs[2], mlflow_run_id=None, mlflow_tracking_uri=None)
    check = check_mlflow(recs)
    assert check["status"].to_list() == ["mismatch", "missing", "no mlflow"]
    assert "test_accuracy" in check["detail"][0]
    # through the CLI: writes the audit table and fails with the reason
    root = write_records(tmp_path / "runs", [{k: v for k, v in r.items() if k != "_path"}
                                             for r in recs])
    code = hkt_main(["aggregate", str(root), "--out", str(tmp_path / "o"), "--check-mlflow",
                     "--no-tables"])
    assert code == 2
    table = (tmp_path / "o" / "tables" / "mlflow_check.md").read_text()
    assert "mismatch" in table and "missing" in table


def test_paper_numbers_are_the_design_notes():
    assert {(r.task, r.length, r.model): (r.mean, r.std) for r in paper.MAIN} == {
        ("listops", 512, "hkt"): (55.10, 0.29), ("listops", 512, "mha"): (50.33, 0.12),
        ("cifar10", 1024, "hkt"): (35.45, 0.09), ("cifar10", 1024, "mha"): (34.01, 0.19),
        ("imdb", 1024, "hkt"): (70.19, 0.57), ("imdb", 1024, "mha"): (62.72, 0.40)}
    assert paper.paper_accuracy("listops", 2000, "hkt") is None
    assert paper.SCORE_COST["levels3"] == 1.3125
    # the paper's cost figures are its configuration's (L, s) under our formulas
    from hkt.mixers import score_cost_limit, score_cost_ratio

    assert score_cost_ratio(paper.LEVELS, paper.STRIDE) == pytest.approx(paper.SCORE_COST["levels3"])
    assert score_cost_limit(paper.STRIDE) == pytest.approx(paper.SCORE_COST["bound"])
    assert math.isclose(paper.ABLATION_NO_HIERARCHY["delta_pp"], -18.4)


def test_tables_state_their_caveats_in_the_file(tmp_path):
    """A table names exactly the rows that are not at the paper's budget (their comparison with
    the paper is of shape), each row states its own budget, an external baseline its own
    settings; each accuracy says how many test examples it rests on."""
    from hkt.report.build import write_all

    records = [dict(r, profile="paper") if r["task"] == "listops" and not r.get("external") else r
               for r in suite_records()]
    records = load_records([write_records(tmp_path / "runs", records)])
    runs, curves = runs_from_records(records), curves_from_records(records)
    write_all(runs, curves, tmp_path / "out")
    main_md = (tmp_path / "out" / "tables" / "main.md").read_text()
    first = main_md.splitlines()[0]
    assert ("Not at the paper's budget: imdb T=1024 (every model: smoke: 12 steps, 2.00 epochs); "
            "compare these rows with the paper's figures in shape") in first
    assert "listops T=512" not in first and "not in value" in first
    assert "External baselines run at their own settings" in first
    assert "2000 test examples" in first
    header = main_md.splitlines()[2]
    assert "test examples" in header
    listops_hkt = next(l for l in main_md.splitlines() if l.startswith("| listops | 512 | hkt"))
    assert "| 2000 |" in listops_hkt and "| paper: 12 steps, 2.00 epochs |" in listops_hkt
    majority = next(l for l in main_md.splitlines() if l.startswith("| listops | 512 | majority"))
    assert "| own settings: d_model 16, n_layers 1, d_ffn 32, 12 steps |" in majority
    # the ablation (listops, all at the paper's budget) has no caveat of shape
    assert "shape" not in (tmp_path / "out" / "tables" / "ablation.md").read_text().splitlines()[0]
    paper_runs = runs.with_columns(pl.lit("paper").alias("profile"))
    write_all(paper_runs, curves, tmp_path / "paper")
    assert "shape" not in (tmp_path / "paper" / "tables" / "main.md").read_text()


def test_main_bar_has_a_short_title_and_its_caption_says_what_the_comparison_means(
        tmp_path, monkeypatch):
    """The figure keeps a title, axes and legend; what it means is the summary's caption."""
    runs = runs_from_records(load_records([write_records(tmp_path / "runs", suite_records())]))
    title = _figure_of(monkeypatch, figures.main_bar, runs).axes[0].get_title()
    assert title == "Main table: mean ± std over seeds"
    monkeypatch.undo()  # the figures are saved again: aggregate moves each into place
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    caption = summary[summary.index("![main table as bars](figures/main_bar.png)"):].splitlines()[2]
    assert caption.startswith("Bars: mean over seeds (written at the bar's foot, or above its seeds where they lie that low);")
    assert "Not at the paper's budget: listops T=512 (every model: smoke" in caption and "2000" in caption


def test_identical_validation_curves_stay_apart(tmp_path, monkeypatch):
    """Two models with the same curve: different markers and line styles keep both visible."""
    records = load_records([write_records(tmp_path, suite_records())])
    curves = curves_from_records(records)
    same = curves.with_columns(pl.lit(0.5).alias("val_accuracy"))
    ax = _figure_of(monkeypatch, figures.val_curves, same).axes[0]
    lines = [l for l in ax.get_lines() if not l.get_label().startswith("_")]
    assert len(lines) == 2
    assert len({(l.get_marker(), l.get_linestyle()) for l in lines}) == 2


def test_data_from_an_alternative_archive_is_flagged_in_summary_tables_and_runs(tmp_path, capsys):
    """A run's data prepared from a non-official archive: summary.md says so at its top,
    main.md in its caption, runs.csv in column data_warning."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "imdb-data"
    data.mkdir()
    meta = {"task": "imdb", "task_config": "imdb",
            "source": {"file": "imdb_relabelled.tar.gz", "official": False, "sha256": "cd" * 32}}
    pq.write_table(pa.table({"label": [0]}).replace_schema_metadata({"hkt": json.dumps(meta)}),
                   data / "train.parquet")
    recs = [dict(r, data_dir=str(data)) if r["task"] == "imdb" else r for r in suite_records()]
    write_records(tmp_path / "runs", recs)
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert "imdb_relabelled.tar.gz" in capsys.readouterr().err
    summary = (out / "summary.md").read_text().splitlines()
    top = "\n".join(summary[:6])
    assert "**Warning (imdb, T=1024):**" in top and "not the official archive" in top
    assert "imdb_relabelled.tar.gz" in (out / "tables" / "main.md").read_text().splitlines()[0]
    runs = pl.read_csv(out / "tables" / "runs.csv")
    flagged = runs.filter(pl.col("data_warning").is_not_null())
    assert set(flagged["task"]) == {"imdb"} and len(flagged) == 6


def test_a_table_of_models_at_different_learning_rates_names_them_per_task():
    """S4D trains at its own rate: the main and controls tables say so, per task, and say
    nothing where every model shares one rate or for external baselines."""
    from hkt.report.result_tables import learning_rate_note

    runs = pl.DataFrame({
        "task": ["listops"] * 4 + ["imdb"] * 3, "length": [512] * 4 + [1024] * 3,
        "model": ["hkt", "mha", "s4d", "ngram", "hkt", "mha", "s4d"],
        "lr": [1e-4, 1e-4, 1e-3, None, 1e-3, 1e-3, 1e-3],
        "external": [None, None, None, "hkt.baselines.ngram", None, None, None]})
    assert learning_rate_note(runs) == ("Peak learning rates differ between models: "
                                        "listops T=512: hkt, mha 1e-4; s4d 1e-3.")
    assert learning_rate_note(runs.filter(pl.col("task") == "imdb")) == ""
    assert learning_rate_note(runs.clear()) == ""


def test_a_bar_at_zero_is_labelled_and_the_rule_names_are_legible(tmp_path, monkeypatch):
    """Issue 64 item 10: a model at 0 % has no bar to see, so each bar's mean is written at its
    foot; the rule references' names are not tiny grey text."""
    from matplotlib.colors import to_rgb

    from hkt.figures.common import RULE_LABEL_SIZE

    recs = [r for r in suite_records() if r["task"] == "listops" and r["variant"] == "main"]
    recs.append(make_record(model="conv", seed=0, test=0.0, val=0.0, test_examples=2000))
    recs += [make_record(model=m, seed=0, test=v, val=v, n_params=0, test_examples=2000,
                         external=f"hkt.baselines.{m}",
                         config={"task": {"family": "listops", "max_length": 512},
                                 "model": {"name": m, "rule": m}})
             for m, v in (("root_op_prior", 0.33), ("depth1_rule", 0.5))]
    runs = runs_from_records(load_records([write_records(tmp_path, recs)]))
    ax = _figure_of(monkeypatch, figures.main_bar, runs).axes[0]
    texts = {t.get_text(): t for t in ax.texts}
    assert {"0.0", "55.0", "50.0"} <= set(texts)  # conv at 0 %, hkt, mha
    for name in ("root-operator prior 33.0", "depth-1 rule 50.0"):
        label = texts[name]
        assert label.get_fontsize() >= RULE_LABEL_SIZE >= 8
        assert max(to_rgb(label.get_color())) <= 0.2  # dark, not light grey


def test_validation_panels_keep_a_least_span_and_say_their_scale(tmp_path, monkeypatch):
    """Issue 64 item 10: each task's panel has its own y scale; a gap of a point must not fill
    it (at least VAL_CURVES_MIN_SPAN_PP), and the axis says the scale is the panel's own where
    it does not start at 0."""
    records = load_records([write_records(tmp_path, suite_records())])
    curves = curves_from_records(records)
    near = curves.with_columns((0.5 + pl.col("seed") * 0.001).alias("val_accuracy"))
    for ax in _figure_of(monkeypatch, figures.val_curves, near).axes:
        if not ax.get_lines():
            continue
        lo, hi = ax.get_ylim()
        assert hi - lo >= figures.VAL_CURVES_MIN_SPAN_PP - 1e-9 and lo >= 0
        assert ax.get_ylabel() == ("validation accuracy (%)\nthis panel's own scale, not from 0")
    low = curves.with_columns(pl.lit(0.01).alias("val_accuracy"))  # the span would dip below 0
    for ax in _figure_of(monkeypatch, figures.val_curves, low).axes:
        if ax.get_lines():
            assert ax.get_ylim()[0] == 0.0 and ax.get_ylabel() == "validation accuracy (%)"


def test_the_summary_names_results_directories_a_reader_can_follow(tmp_path):
    """Issue 64 item 11: a summary names no absolute path of the machine that made it: its own
    results directory as such, others by their count and where runs.csv names each."""
    recs = [{**r, "suite": "quick", "results_dir": f"/elsewhere/r{r['seed'] % 2}/results"}
            for r in suite_records()]
    write_records(tmp_path / "runs", recs)
    out = tmp_path / "out"
    assert hkt_main(["aggregate", str(tmp_path / "runs"), "--out", str(out)]) == 0
    first = (out / "summary.md").read_text().splitlines()[2]
    assert "suite: quick, from 2 results directories (each run's: `results_dir` in " \
           "tables/runs.csv);" in first and "/elsewhere" not in first
    here = tmp_path / "here"
    write_records(tmp_path / "own", [{**r, "suite": "quick", "results_dir": str(here.resolve())}
                                     for r in suite_records()])
    assert hkt_main(["aggregate", str(tmp_path / "own"), "--out", str(here)]) == 0
    first = (here / "summary.md").read_text().splitlines()[2]
    assert "suite: quick, in this results directory;" in first and str(here) not in first


def test_each_run_says_its_precision_where_its_record_makes_it_certain():
    """Issue 58: bf16 GPU runs are compared with fp32 CPU runs, so the runs frame (runs.csv,
    the learning-rate tables) carries each run's precision: the record's, or for a record from
    before it had one, what its config gives where that is certain."""
    from hkt.runs_frame import run_precision

    assert run_precision("bf16 autocast", "auto", "cuda:0 (NVIDIA H200)") == "bf16 autocast"
    assert run_precision(None, "auto", "cpu (x86_64, 2 cores, 1 threads)") == "fp32"
    assert run_precision(None, "fp32", "cuda:0 (NVIDIA H200)") == "fp32"
    assert run_precision(None, "bf16", "cpu") == "bf16 autocast"
    assert run_precision(None, "auto", "cuda:0 (NVIDIA H200)") is None  # its GPU's bf16: unknown
    recs = [make_record(seed=0, precision="bf16 autocast"),
            make_record(seed=1, config={"task": {"family": "listops", "max_length": 512},
                                        "model": {"name": "hkt"}, "train": {"precision": "auto"}})]
    assert runs_from_records(recs).sort("seed")["precision"].to_list() == ["bf16 autocast", "fp32"]
