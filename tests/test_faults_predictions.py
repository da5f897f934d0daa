"""Predictions and run folders that are not what their records say (issue 74): another run's
predictions, rows no run writes, a file its record names outside its run, a run folder that is a
symlink. Each is named in one line, and no table reads it silently (docs/faults.md, "Records")."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from hkt.cli.main import main as hkt_main
from hkt.fileio import sha256_file
from hkt.predictions import (PREDICTIONS_NAME, RECORD_FIELD, PredictionsError, SplitPredictions,
                             check_against_record, one_hot, predictions_table, read_checked,
                             write_predictions)
from hkt.runs_frame import AggregateError, find_records
from test_report_aggregate import make_record

EXAMPLES, CLASSES = 200, 10


def _run(root: Path, model: str, seed: int, share: float) -> Path:
    """A run of ``model`` with its predictions: right on ``share`` of the test examples (which
    ones depends on the seed and model), its record's accuracies theirs."""
    rng = np.random.default_rng(seed + (100 if model == "hkt" else 0))
    labels = np.arange(EXAMPLES) % CLASSES
    right = rng.random(EXAMPLES) < share
    pred = np.where(right, labels, (labels + 1) % CLASSES)
    split = SplitPredictions(np.arange(EXAMPLES), labels, pred, one_hot(pred, CLASSES))
    d = root / "listops" / model / "main" / f"seed{seed}"
    d.mkdir(parents=True)
    acc = float(right.sum() / EXAMPLES)
    rec = make_record(model=model, seed=seed, val=acc, test=acc, test_examples=EXAMPLES)
    rec[RECORD_FIELD] = write_predictions({"val": split, "test": split}, d, CLASSES)
    (d / "record.json").write_text(json.dumps(rec))
    return d


def _runs(root: Path) -> Path:
    """HKT (about 60 % right) and MHA (about 50 %), two seeds each."""
    for seed in (0, 1):
        _run(root, "hkt", seed, 0.6)
        _run(root, "mha", seed, 0.5)
    return root


def _aggregate(capsys, runs: Path, out: Path) -> tuple[int, list[str]]:
    """`hkt aggregate RUNS --out OUT`: its exit status and its warnings of predictions."""
    rc = hkt_main(["aggregate", str(runs), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, [e for e in err if "history.csv" not in e]


def _paired(out: Path) -> pl.DataFrame:
    return pl.read_csv(out / "tables" / "paired.csv")


def _forge(run: Path, table: pa.Table) -> None:
    """Write ``table`` as ``run``'s predictions, with its record's SHA-256 made to match."""
    import pyarrow.parquet as pq

    pq.write_table(table, run / PREDICTIONS_NAME)
    rec = json.loads((run / "record.json").read_text())
    rec[RECORD_FIELD]["sha256"] = sha256_file(run / PREDICTIONS_NAME)
    (run / "record.json").write_text(json.dumps(rec))


# ------------------------------------------------------------ another run's predictions (item 1)


def test_another_runs_predictions_are_named_and_not_read_paired(tmp_path, capsys):
    """Issue 74: MHA seed 0's file copied over HKT seed 0's was read as HKT's (a paired
    HKT − MHA that the main table contradicts). Now one warning names the run and why, the gap
    reads unpaired, and the paired table's caption names the run."""
    runs = _runs(tmp_path / "runs")
    rc, err = _aggregate(capsys, runs, tmp_path / "ok")
    assert rc == 0 and err == [] and len(_paired(tmp_path / "ok")) == 1  # HKT − MHA, paired
    hkt0 = runs / "listops" / "hkt" / "main" / "seed0"
    shutil.copy(runs / "listops" / "mha" / "main" / "seed0" / PREDICTIONS_NAME, hkt0)
    rc, err = _aggregate(capsys, runs, tmp_path / "out")
    assert rc == 0 and len(err) == 1
    assert err[0].startswith(f"hkt: warning: listops/hkt/main/seed0: {hkt0 / PREDICTIONS_NAME} "
                             "is not the file its record names (SHA-256 differs)")
    assert err[0].endswith("it is read unpaired, as a run without predictions")
    out = tmp_path / "out"
    assert _paired(out).is_empty()
    caption = (out / "tables" / "paired.md").read_text()
    assert ("Runs whose predictions are missing or not their record's (each named in a warning "
            "of the aggregate), read nowhere here: listops/hkt/main/seed0.") in caption
    assert "paired on" not in (out / "tables" / "gap.md").read_text()


def test_predictions_whose_record_was_made_to_match_still_give_its_accuracy(tmp_path, capsys):
    """All-correct predictions, with the record's SHA-256 set to theirs, gave +46 pp at
    p = 7e-18: their accuracy is not the record's, and that is the one line."""
    runs = _runs(tmp_path / "runs")
    hkt0 = runs / "listops" / "hkt" / "main" / "seed0"
    t = pl.read_parquet(hkt0 / PREDICTIONS_NAME).with_columns(pred=pl.col("label"))
    _forge(hkt0, t.to_arrow())
    rc, err = _aggregate(capsys, runs, tmp_path / "out")
    assert rc == 0 and len(err) == 1
    assert "the val predictions give accuracy 200/200 = 1.0, the record says 0." in err[0]
    assert _paired(tmp_path / "out").is_empty()


def test_a_deleted_predictions_file_is_missing_not_made_before_they_were_kept(tmp_path, capsys):
    runs = _runs(tmp_path / "runs")
    hkt0 = runs / "listops" / "hkt" / "main" / "seed0"
    (hkt0 / PREDICTIONS_NAME).unlink()
    rc, err = _aggregate(capsys, runs, tmp_path / "out")
    assert rc == 0 and len(err) == 1
    assert f"{hkt0 / PREDICTIONS_NAME} is missing: the record names it" in err[0]
    caption = (tmp_path / "out" / "tables" / "paired.md").read_text()
    assert "made before they were kept" not in caption
    assert "missing or not their record's" in caption and "listops/hkt/main/seed0" in caption


def _table(rows, labels, preds, splits=None) -> pa.Table:
    """A predictions table of the given test rows (and the same as validation, unless
    ``splits`` names a split per row)."""
    rows, labels, preds = (np.asarray(v) for v in (rows, labels, preds))
    t = predictions_table({"test": SplitPredictions(np.arange(len(rows)), labels, preds,
                                                    one_hot(np.clip(preds, 0, CLASSES - 1),
                                                            CLASSES))}, CLASSES)
    t = t.set_column(1, "row", pa.array(rows, pa.int64()))
    if splits is not None:
        return t.set_column(0, "split", pa.array(splits, pa.string()))
    return pa.concat_tables([t.set_column(0, "split", pa.array(["val"] * len(rows))), t])


RECORD = {"val_accuracy": 0.5, "test_accuracy": 0.5,
          "config": {"task": {"num_classes": CLASSES}}}


@pytest.mark.parametrize("table, record, says", [
    # one right and one wrong row again: the accuracy stays 1/2
    (_table([0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 0, 1], [0, 1, 0, 0, 0, 0]), RECORD,
     "val row 0 is there twice"),
    (_table([0, 1, -2, 3], [0, 1, 2, 3], [0, 1, 0, 0]), RECORD, "val row -2 is negative"),
    (_table([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 12, 0]), RECORD,
     "a pred of 12, outside the task's 10 classes 0..9"),
    (_table([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 0], ["test", "test", "train", "train"]),
     RECORD, "rows of split 'train'"),
    (_table([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 0], ["val"] * 4), RECORD,
     "the test predictions give accuracy no example"),
    (_table([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 0]), {**RECORD, "test_examples": 6},
     "4 test predictions, the record tested 6 examples"),
    (_table([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 0]),
     {**RECORD, "config": {"task": {"num_classes": 2}}},
     "10 probability columns, the record's task has 2 classes"),
])
def test_rows_no_run_writes_are_refused_naming_what(table, record, says):
    """Duplicated, negative, out-of-class and other-split rows, a val-only file, rows missing
    from the test split or of another task, each at the record's accuracy: one line."""
    with pytest.raises(PredictionsError, match="they are not this run's") as exc:
        check_against_record(table, record, "RUN")
    assert str(exc.value).startswith("RUN: ") and says in str(exc.value)
    assert "\n" not in str(exc.value)


def test_rows_a_record_matches_are_refused_by_the_aggregate_too(tmp_path, capsys):
    """A file of duplicated rows whose record names it (SHA-256) and whose accuracy is its
    record's is read unpaired with one warning, as every reader takes predictions."""
    runs = _runs(tmp_path / "runs")
    hkt0 = runs / "listops" / "hkt" / "main" / "seed0"
    t = pl.read_parquet(hkt0 / PREDICTIONS_NAME)
    twice = pl.concat([t, t]).sort("split", "row")  # each row twice: the same accuracy
    _forge(hkt0, twice.to_arrow())
    rec = json.loads((hkt0 / "record.json").read_text())
    rec["test_examples"] = 2 * EXAMPLES
    (hkt0 / "record.json").write_text(json.dumps(rec))
    rc, err = _aggregate(capsys, runs, tmp_path / "out")
    assert rc == 0 and len(err) == 1 and "val row 0 is there twice" in err[0]
    assert _paired(tmp_path / "out").is_empty()


# --------------------------------------------------------- a path outside the run (item 2)


def test_a_predictions_file_that_links_out_of_its_run_is_refused(tmp_path):
    run = _run(tmp_path / "runs", "hkt", 0, 0.6)
    record = json.loads((run / "record.json").read_text())
    assert read_checked(run, record) is not None
    outside = tmp_path / "secret.parquet"
    (run / PREDICTIONS_NAME).rename(outside)
    (run / PREDICTIONS_NAME).symlink_to(outside)
    with pytest.raises(PredictionsError, match=r"predictions.parquet is a link to .*secret"
                                               r"\.parquet, outside its run folder"):
        read_checked(run, record)
    for name in ("../../../../../../secret.parquet", str(outside)):
        forged = {**record, RECORD_FIELD: {**record[RECORD_FIELD], "file": name}}
        with pytest.raises(PredictionsError, match="a path outside its folder"):
            read_checked(run, forged)


def test_publish_refuses_a_record_that_names_a_file_outside_its_run(tmp_path):
    """Issue 74: a record naming ``../../../../../../secret.txt`` with that file's SHA-256 was
    published, the file written outside DEST; the record is now read through its schema, and
    a run file linking out of its folder (config.yaml) is refused; nothing is written."""
    from conftest import load_script
    from test_scripts_results import results_dir

    publish = load_script("publish_results")
    res = results_dir(tmp_path / "res")
    run = res / "runs" / "listops" / "hkt" / "main" / "seed0"
    secret = tmp_path / "secret.txt"
    secret.write_text("not the run's")
    good = (run / "record.json").read_text()
    rec = json.loads(good)
    rec[RECORD_FIELD] = {"file": "../../../../../../secret.txt", "sha256": sha256_file(secret)}
    (run / "record.json").write_text(json.dumps(rec))
    then = (res / "summary.md").stat().st_mtime
    os.utime(run / "record.json", (then, then))  # written before the aggregate, as a run is
    dest = tmp_path / "docs" / "cpu"
    with pytest.raises(SystemExit, match=r"record.json: invalid run record: predictions.file: "
                                         r"'predictions.parquet' was expected"):
        publish.main([str(res), str(dest)])
    (run / "record.json").write_text(good)
    os.utime(run / "record.json", (then, then))
    (run / "config.yaml").rename(tmp_path / "outside.yaml")
    (run / "config.yaml").symlink_to(tmp_path / "outside.yaml")
    with pytest.raises(SystemExit, match=r"seed0/config.yaml is a link to .*/outside.yaml, "
                                         "outside its run folder"):
        publish.main([str(res), str(dest)])
    assert not dest.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "outside.yaml", "res", "secret.txt"]


def test_regenerating_a_publication_refuses_predictions_that_are_not_their_records(tmp_path):
    """`--retable`, `--add` and the drift test check a publication's predictions as the
    aggregate does: all-correct predictions whose record's SHA-256 was made to match are named
    by their accuracy."""
    from conftest import load_script
    from test_scripts_results import results_dir

    publish = load_script("publish_results")
    dest = tmp_path / "docs" / "cpu"
    assert publish.main([str(results_dir(tmp_path / "res")), str(dest)]) == 0
    assert publish.check_predictions(dest) == 1
    run = dest / "runs" / "listops" / "hkt" / "main" / "seed0"
    _forge(run, pl.read_parquet(run / PREDICTIONS_NAME).with_columns(pred=pl.col("label"))
           .to_arrow())
    with pytest.raises(SystemExit, match=r"seed0/predictions.parquet: the val predictions give "
                                         r"accuracy 3/3 = 1.0, the record says 0.666"):
        publish.check_predictions(dest)


# -------------------------------------------------------------- a linked run folder (item 5)


def test_a_run_folder_linked_in_is_read_and_one_linked_from_outside_refused(tmp_path, capsys):
    """Issue 74: a run folder that is a symlink was skipped (HKT's row one seed short, exit 0).
    One whose target lies inside the tree is read where the link places it; one outside the
    tree, or a link to nothing, is refused in one line naming the link."""
    runs = _runs(tmp_path / "results" / "runs")
    seed1 = runs / "listops" / "hkt" / "main" / "seed1"
    store = tmp_path / "results" / "kept" / "seed1"
    store.parent.mkdir()
    seed1.rename(store)
    seed1.symlink_to(Path("..", "..", "..", "..", "kept", "seed1"))
    rc, err = _aggregate(capsys, runs.parent, tmp_path / "out")
    assert rc == 0 and err == []
    main = pl.read_csv(tmp_path / "out" / "tables" / "main.csv")
    assert main.filter(pl.col("model") == "hkt")["seeds"].to_list() == [2]
    assert len(_paired(tmp_path / "out")) == 1  # its predictions read through the link too
    found = [f.resolve() for f in find_records([runs.parent])]  # once, by link or target
    assert len(found) == 4 and found.count((store / "record.json").resolve()) == 1
    for target in (store, tmp_path / "gone"):  # the tree is now runs/ alone; then no target
        seed1.unlink()
        seed1.symlink_to(target)
        rc, err = _aggregate(capsys, runs, tmp_path / "out2")
        assert rc == 2 and len(err) == 1
        assert err[0].startswith(f"hkt: error: {seed1} is a link to {target}, ")
        with pytest.raises(AggregateError, match="outside" if target == store else "not exist"):
            find_records([runs])
