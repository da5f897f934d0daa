"""`hkt aggregate --mlflow` on a store shared by two suite runs, and the same outputs from MLflow
as from the run records, on tiny real runs (`hkt train` and the n-gram baseline)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from conftest import seal_prepared_data, write_prepared_data
from hkt.cli.main import main as hkt_main
from hkt.provenance import NO_SUITE, RESULTS_DIR_TAG, SUITE_ENV, SUITE_TAG, SuiteRun
from hkt.report.audit import check_mlflow
from hkt.report.mlflow_runs import runs_from_mlflow
from hkt.report.suite_choice import SuiteChoice, choose
from hkt.runs_frame import KEY, AggregateError, curves_from_records, load_records, runs_from_records

#: runs.csv columns that differ between the two sources by nature (hkt.report.mlflow_runs): the
#: record's path or the MLflow run id. mlflow_tracking_uri is equal here (read where logged);
#: timings are logged from the record, so no table column is excluded.
SOURCE_COLUMNS = ("source",)

UNOFFICIAL = {"file": "listops_alt.tar.gz", "official": False, "sha256": "ab" * 32}


def unofficial_data(out: Path) -> Path:
    """Tiny ListOps data whose metadata says it came from an alternative archive (every run on
    it carries a data warning: one more column the two sources must agree on)."""
    write_prepared_data(out, "listops")
    for split in ("train", "val", "test"):
        path = out / f"{split}.parquet"
        table = pq.read_table(path)
        meta = dict(json.loads(table.schema.metadata[b"hkt"]), source=UNOFFICIAL)
        pq.write_table(table.replace_schema_metadata({"hkt": json.dumps(meta)}), path,
                       compression="zstd")
    seal_prepared_data(out)
    return out


def train_run(data: Path, out: Path, uri: str, results: Path, *overrides: str) -> None:
    from hkt.train.run_config import load_config
    from hkt.train.loop import train

    with pytest.MonkeyPatch.context() as mp:  # the suite, as the workflow tells its jobs
        mp.setenv(SUITE_ENV, "smoke")
        train(load_config(["profile=smoke", "task=listops", "variant=main",
                           f"tracking.uri={uri}", f"tracking.results_dir={results}", *overrides]),
              data, out, stream=io.StringIO(), progress=False)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """One MLflow store, two results directories of suite smoke: ``a`` with three trained runs
    (HKT seeds 0 and 1, MHA) and an n-gram baseline, ``b`` with one HKT run of seed 0 (as
    ``a``'s: mixing them would keep one HKT seed)."""
    from hkt.baselines.run import run_baseline

    root = tmp_path_factory.mktemp("shared")
    data = unofficial_data(root / "data")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    a, b = root / "a", root / "b"
    for model, seed in (("hkt", 0), ("hkt", 1), ("mha", 0)):
        train_run(data, a / "runs" / f"{model}-{seed}", uri, a, f"model={model}", f"seed={seed}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SUITE_ENV, "smoke")
        run_baseline("ngram", data, a / "runs" / "ngram-0", profile="smoke", epochs=1,
                     buckets=1 << 10, tracking_uri=uri, results_dir=a,
                     experiment="hkt-smoke-listops")
    train_run(data, b / "runs" / "hkt-0", uri, b, "model=hkt", "seed=0", "optim.lr=0.01")
    return uri, a.resolve(), b.resolve()


def test_a_shared_store_needs_a_named_suite_run(shared_store, tmp_path, capsys):
    uri, a, b = shared_store
    assert hkt_main(["aggregate", "--mlflow", uri, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "the runs of 2 suite runs" in err
    assert f"--suite smoke --results-dir {a}  (4 runs)" in err
    assert f"--suite smoke --results-dir {b}  (1 run)" in err
    assert hkt_main(["aggregate", "--mlflow", uri, "--suite", "smoke", "--out",
                     str(tmp_path / "x")]) == 2  # both are suite smoke
    assert "match --suite smoke" in capsys.readouterr().err
    assert hkt_main(["aggregate", "--mlflow", uri, "--suite", "cpu", "--out",
                     str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "no finished runs of --suite cpu" in err and str(a) in err and str(b) in err
    # named: only that directory's runs
    out = tmp_path / "a"
    assert hkt_main(["aggregate", "--mlflow", uri, "--results-dir", str(a), "--out",
                     str(out)]) == 0
    runs = pl.read_csv(out / "tables" / "runs.csv")
    assert set(runs[RESULTS_DIR_TAG]) == {str(a)} and len(runs) == 4
    main = pl.read_csv(out / "tables" / "main.csv")
    assert main.filter(pl.col("model") == "hkt")["seeds"].to_list() == [2]
    only_b, _ = runs_from_mlflow(uri, choice=SuiteChoice(results_dir=str(b)))
    assert only_b.select("model", "seed", RESULTS_DIR_TAG).rows() == [("hkt", 0, str(b))]


def test_the_audit_checks_the_records_suite_run(shared_store):
    """A record whose MLflow run names another suite run (its run directory was copied from
    there and resumed that MLflow run) fails the audit."""
    _, a, b = shared_store
    records = load_records([a / "runs"])
    assert check_mlflow(records)["status"].to_list() == ["ok"] * 4
    records[0] = dict(records[0], results_dir=str(b))
    check = check_mlflow(records)
    assert check["status"][0] == "mismatch" and f"results_dir: record {b}" in check["detail"][0]


def test_untagged_runs_are_a_suite_run_of_their_own(shared_store, tmp_path_factory, capsys):
    """A run logged before runs named their results directory: listed as such, chosen by
    --untagged, never mixed with tagged runs."""
    from mlflow.tracking import MlflowClient

    uri, a, _ = shared_store
    store = tmp_path_factory.mktemp("old") / "mlflow.db"
    store.write_bytes(Path(uri[len("sqlite:///"):]).read_bytes())  # a copy to add to
    old_uri = f"sqlite:///{store}"
    client = MlflowClient(old_uri)
    exp = client.get_experiment_by_name("hkt-smoke-listops").experiment_id
    rid = client.create_run(exp, tags={"task": "listops", "model": "mha", "variant": "main",
                                       "seed": "3", SUITE_TAG: "smoke"}).info.run_id
    client.log_param(rid, "task.max_length", 512)
    client.log_metric(rid, "test_accuracy", 0.5)
    client.set_terminated(rid, "FINISHED")
    out = tmp_path_factory.mktemp("out")
    assert hkt_main(["aggregate", "--mlflow", old_uri, "--out", str(out)]) == 2
    assert "--suite smoke --untagged" in capsys.readouterr().err
    runs, _ = runs_from_mlflow(old_uri, choice=SuiteChoice(untagged=True), curves=False)
    assert runs["seed"].to_list() == [3] and runs[RESULTS_DIR_TAG].to_list() == [None]
    assert hkt_main(["aggregate", "--mlflow", old_uri, "--untagged", "--no-tables",
                     "--out", str(out)]) == 0
    assert "no results_dir tag" in capsys.readouterr().err  # the warning


def test_choice_among_suite_runs():
    x, y = SuiteRun("cpu", "/r/x"), SuiteRun("cpu", "/r/y")
    old, free = SuiteRun("cpu", None), SuiteRun(NO_SUITE, "/r/x")
    counts = {x: 3, y: 2, old: 4, free: 1}
    assert choose({x: 3}, SuiteChoice(), "store") == x  # alone: no name needed
    assert choose({}, SuiteChoice(suite="cpu"), "store") is None  # no runs at all
    assert choose(counts, SuiteChoice(results_dir="/r/y"), "store") == y
    assert choose(counts, SuiteChoice(suite="cpu", untagged=True), "store") == old
    assert choose(counts, SuiteChoice(suite=NO_SUITE), "store") == free
    with pytest.raises(AggregateError, match="the runs of 4 suite runs are in store") as err:
        choose(counts, SuiteChoice(), "store")
    assert "--suite cpu --untagged  (4 runs, logged before runs named their results" in str(err.value)
    assert "--suite none --results-dir /r/x" in str(err.value)
    with pytest.raises(AggregateError, match="3 suite runs match --suite cpu"):
        choose(counts, SuiteChoice(suite="cpu"), "store")
    with pytest.raises(AggregateError, match="contradict"):
        SuiteChoice(results_dir="/r/x", untagged=True)


def test_tags_and_record_fields_name_the_same_suite_run(tmp_path):
    run = SuiteRun.of(None, tmp_path / "results" / "..")
    assert run.results_dir == str(tmp_path.resolve())
    assert run.tags() == {SUITE_TAG: NO_SUITE, RESULTS_DIR_TAG: str(tmp_path.resolve())}
    assert SuiteRun.from_tags(run.tags()) == run
    assert run.fields() == {SUITE_TAG: None, RESULTS_DIR_TAG: str(tmp_path.resolve())}


def test_mlflow_gives_the_records_outputs(shared_store, tmp_path):
    """runs.csv, every table and the validation curves are the same read from MLflow as read
    from the records, but for SOURCE_COLUMNS."""
    import shutil

    uri, a, _ = shared_store
    from_records, from_mlflow = tmp_path / "records", tmp_path / "mlflow"
    # `--mlflow` reads no predictions (docs/per-example.md): the records without theirs, which
    # pair no interval and add no per-example table, are what MLflow gives
    runs = tmp_path / "runs"
    shutil.copytree(a / "runs", runs)
    assert [p.unlink() for p in runs.rglob("predictions.parquet")]
    assert hkt_main(["aggregate", str(runs), "--out", str(from_records)]) == 0
    assert hkt_main(["aggregate", "--mlflow", uri, "--results-dir", str(a),
                     "--out", str(from_mlflow)]) == 0
    runs_r = pl.read_csv(from_records / "tables" / "runs.csv", infer_schema_length=None)
    runs_m = pl.read_csv(from_mlflow / "tables" / "runs.csv", infer_schema_length=None)
    assert runs_r.columns == runs_m.columns
    assert set(runs_r["model"]) == {"hkt", "mha", "ngram"}
    assert runs_r["data_warning"].is_not_null().all()  # the case where the two used to differ
    for col in runs_r.columns:
        if col not in SOURCE_COLUMNS:
            assert runs_r[col].to_list() == runs_m[col].to_list(), col
            assert runs_r[col].dtype == runs_m[col].dtype, col
    tables = sorted(p.name for p in (from_records / "tables").iterdir() if p.name != "runs.csv")
    assert tables == sorted(p.name for p in (from_mlflow / "tables").iterdir()
                            if p.name != "runs.csv")
    assert {"main.csv", "main.md", "gap.tex", "ablation.csv"} <= set(tables)
    for name in tables:
        assert (from_records / "tables" / name).read_bytes() == \
            (from_mlflow / "tables" / name).read_bytes(), name
    records = load_records([runs])
    curves_r = curves_from_records(records, runs_from_records(records)).drop("source")
    curves_m = runs_from_mlflow(uri, choice=SuiteChoice(results_dir=str(a)))[1].drop("source")
    assert not curves_r.is_empty()
    assert curves_r.sort([*KEY, "step"]).equals(curves_m.sort([*KEY, "step"]))
