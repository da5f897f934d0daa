"""Published runs made again (issue 72): `publish_results.py --redo` puts a rerun in place of its
published run only where it reached the same outcome, and `identity_check.py --runs` reports the
same check run by run; hkt.run_identity holds the comparison both use."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from conftest import load_script

from hkt.run_identity import (HistoryAgreement, compare_histories, compare_run_histories, config_notes,
                              outcome_differences)

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "docs" / "results" / "quick"
FIXED, CHANGED, BARE = "listops/hkt/main/seed0", "listops/mha/main/seed0", "listops/s4d/main/seed0"


def _edit(path: Path, **fields) -> dict:
    record = {**json.loads(path.read_text()), **fields}
    path.write_text(json.dumps(record, indent=2))
    return record


@pytest.fixture
def redo(tmp_path):
    """A copy of docs/results/quick whose HKT and MHA runs kept no predictions and whose data
    has no per-example facts (as the cpu suite's ListOps runs were published), and a results
    directory (with the facts) that made three runs again: HKT's
    with predictions at the same outcome, one loss off in its 8th digit; MHA's at ten times the
    learning rate; S4D's without the predictions its published run has."""
    if not (QUICK / "runs" / FIXED / "predictions.parquet").is_file():
        pytest.skip("docs/results/quick/ holds no predictions to make the fixture from")
    publish = load_script("publish_results")
    dest, results = tmp_path / "quick", tmp_path / "results"
    shutil.copytree(QUICK, dest)
    for run in (FIXED, CHANGED, BARE):
        new = results / "runs" / run
        shutil.copytree(QUICK / "runs" / run, new)
        shutil.copy(QUICK / "environment.json", new / "environment.json")
        if run != BARE:  # published without predictions
            (dest / "runs" / run / "predictions.parquet").unlink()
            record = json.loads((dest / "runs" / run / "record.json").read_text())
            record.pop("predictions")
            (dest / "runs" / run / "record.json").write_text(json.dumps(record, indent=2))
        _edit(new / "record.json", wall_time_s=1234.5, created_at="2026-12-07T16:00:00+00:00",
              device="cpu (Another CPU, x86_64, 2 cores, 1 threads)")
    hist = results / "runs" / FIXED / "history.csv"
    lines = hist.read_text().splitlines()
    cells = lines[1].split(",")
    cells[1] = repr(float(cells[1]) * (1 + 3e-8))  # the first logged loss, in its late digits
    hist.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    record = json.loads((results / "runs" / CHANGED / "record.json").read_text())
    record["config"]["optim"]["lr"] *= 10
    _edit(results / "runs" / CHANGED / "record.json", config=record["config"])
    (results / "runs" / BARE / "predictions.parquet").unlink()
    record = json.loads((results / "runs" / BARE / "record.json").read_text())
    record.pop("predictions")
    (results / "runs" / BARE / "record.json").write_text(json.dumps(record, indent=2))
    end = datetime.fromisoformat("2026-12-07T16:00:00+00:00").timestamp()
    (results / "plan").mkdir()
    (results / "plan" / "sessions.json").write_text(json.dumps({"sessions": [
        {"started": end - 2000, "ended": end + 10, "last_seen": end + 10, "host": "elsewhere",
         "pid": 4242, "estimate_s": 9999.0, "ok": True, "argv": ["snakemake"]}]}))
    # published without per-example facts (as the cpu suite was); the reruns' data has them
    facts = Path("data") / "listops" / "examples.parquet"
    (results / facts).parent.mkdir(parents=True)
    shutil.move(dest / facts, results / facts)
    publish.write_manifest(dest)
    return publish, dest, results


def test_redo_replaces_the_runs_that_reach_their_published_outcome_and_names_the_others(redo, capsys):
    publish, dest, results = redo
    untouched = (dest / "runs" / CHANGED / "record.json").read_bytes()
    done, left = publish.redo_runs(results, dest)
    assert done == [FIXED]
    assert [why.split(":")[0] for why in left] == [CHANGED, BARE]
    lr = json.loads((QUICK / "runs" / CHANGED / "record.json").read_text())["config"]["optim"]["lr"]
    assert left[0] == f"{CHANGED}: config optim.lr: {lr!r} published, {lr * 10!r} now"
    assert left[1] == f"{BARE}: the published run has predictions, this one none"
    out = capsys.readouterr().out
    assert f"{FIXED}: same outcome as published; history equal in " in out
    assert "the others differ (largest relative difference 3e-08: 7 significant digits" in out
    run = dest / "runs" / FIXED
    assert (run / "record.json").read_bytes() == (results / "runs" / FIXED / "record.json").read_bytes()
    assert (run / "predictions.parquet").read_bytes() == (QUICK / "runs" / FIXED / "predictions.parquet").read_bytes()
    assert (dest / "runs" / CHANGED / "record.json").read_bytes() == untouched
    assert not (dest / "runs" / CHANGED / "predictions.parquet").exists()
    assert f"runs/{FIXED}/predictions.parquet" in (dest / "SHA256SUMS").read_text()
    publish.verify(dest)  # sealed as it now is
    sessions = json.loads((dest / "plan" / "sessions.json").read_text())["sessions"]
    assert [s.get("redoes") for s in sessions if s.get("pid") == 4242] == [[FIXED]]
    assert not any(s.get("adds") for s in sessions if s.get("pid") == 4242)
    # the facts come with the rerun (what its predictions are read by): HKT's rule readings
    # are back as published from its predictions, MHA's not
    facts = dest / "data" / "listops" / "examples.parquet"
    assert facts.read_bytes() == (QUICK / "data" / "listops" / "examples.parquet").read_bytes()
    assert (dest / "tables" / "main.csv").read_bytes() == (QUICK / "tables" / "main.csv").read_bytes()
    now, then = (pl.read_csv(d / "tables" / "rule_agreement.csv") for d in (dest, QUICK))
    assert now.filter(pl.col("model") == "hkt").equals(then.filter(pl.col("model") == "hkt"))
    assert now.filter(pl.col("model") == "mha").is_empty() and not then.filter(pl.col("model") == "mha").is_empty()
    # a second --redo leaves a run already put in place alone
    for run in (CHANGED, BARE):
        shutil.rmtree(results / "runs" / run)
    with pytest.raises(SystemExit, match="has published is there as made again already; nothing to do"):
        publish.redo_runs(results, dest)


def test_redo_publishes_nothing_where_no_run_qualifies(redo):
    publish, dest, results = redo
    shutil.rmtree(results / "runs" / FIXED)
    before = {f: f.read_bytes() for f in sorted(dest.rglob("*")) if f.is_file()}
    with pytest.raises(SystemExit, match=rf"no run of .* reached its published run's outcome; .* is "
                       rf"unchanged: {CHANGED}: config optim.lr"):
        publish.redo_runs(results, dest)
    assert {f: f.read_bytes() for f in sorted(dest.rglob("*")) if f.is_file()} == before
    other = results.parent / "other"
    (other / "runs" / "listops" / "hkt" / "main" / "seed9").mkdir(parents=True)
    shutil.copy(results / "runs" / CHANGED / "record.json", other / "runs/listops/hkt/main/seed9/record.json")
    with pytest.raises(SystemExit, match="holds no run that .* has published"):
        publish.redo_runs(other, dest)
    (results / "runs" / CHANGED / "environment.json").unlink()
    with pytest.raises(SystemExit, match=rf"runs that record no software environment \({CHANGED}\)"):
        publish.redo_runs(results, dest)


def test_identity_check_runs_reports_each_rerun_against_its_published_run(redo, capsys):
    _, dest, results = redo
    check = load_script("identity_check")
    assert check.compare_runs(dest, results) == 2
    out = capsys.readouterr().out
    assert f"same outcome  {FIXED}: best step " in out and "predictions new" in out
    assert "the others differ (largest relative difference 3e-08: 7 significant digits agree everywhere)" in out
    assert f"DIFFERENT  {CHANGED}: " in out and "config optim.lr" in out
    assert f"DIFFERENT  {BARE}: " in out and "the published run has predictions, this one none" in out
    assert "2 DIFFERENT: 3 runs made again" in out
    shutil.rmtree(results / "runs" / CHANGED)
    shutil.rmtree(results / "runs" / BARE)
    assert check.compare_runs(dest, results) == 0
    assert "same outcome: 1 runs made again" in capsys.readouterr().out
    runs = len(list(dest.glob("runs/**/record.json")))  # the publication's others: not in results
    assert check.compare_runs(results, dest) == runs
    assert "not published  listops/conv/main/seed0" in capsys.readouterr().out


def test_outcome_differences_leave_out_where_a_run_was_written_only():
    record = json.loads((QUICK / "runs" / FIXED / "record.json").read_text())
    moved = json.loads(json.dumps(record))
    moved["config"]["tracking"] = {**moved["config"].get("tracking", {}), "uri": "sqlite:////elsewhere.db",
                                   "results_dir": "/elsewhere", "new_setting": 3}
    moved.update(wall_time_s=1.0, device="cpu (other)", git_commit="0" * 40, mlflow_run_id="x")
    assert outcome_differences(record, moved) == [] and config_notes(record, moved) == []
    moved["config"]["train"]["batch_size"] += 1
    moved["config"]["train"]["a_new_switch"] = True
    moved["best_step"] = (record["best_step"] or 0) + 250
    moved["data_checksums"] = {**record["data_checksums"], "test": "0" * 64}  # the file's bytes
    assert [d.split(":")[0] for d in outcome_differences(record, moved)] == [
        "best_step", "config train.batch_size"]  # the content is compared where both have it
    moved["data_content_checksums"] = {**record["data_content_checksums"], "test": "0" * 64}
    diffs = outcome_differences(record, moved)
    assert diffs[0].startswith("best_step: ") and diffs[1] == "data_content_checksums: the data differ"
    assert diffs[2].startswith("config train.batch_size: ")
    assert config_notes(record, moved) == ["config only now: train.a_new_switch"]


def test_history_agreement_counts_values_and_digits():
    rows = [{"step": 1, "train_loss": 2.0, "samples_per_s": 9.0, "val_acc": None},
            {"step": 2, "train_loss": 1.5, "samples_per_s": 9.0, "val_acc": 0.5}]
    same = compare_histories(rows, [{**r, "samples_per_s": 1.0} for r in rows])
    assert same.identical and same.values == 3 and str(same) == "history identical (3 values)"
    off = compare_histories(rows, [rows[0], {**rows[1], "train_loss": 1.5 * (1 + 2e-6)}])
    assert (off.values, off.equal, off.digits()) == (3, 2, 5) and not off.identical
    assert compare_histories(rows, rows[:1]).steps_differ == "steps only published [2], only now []"
    gap = compare_histories(rows, [rows[0], {**rows[1], "val_acc": None}])
    assert gap.steps_differ == "step 2 val_acc: 0.5 published, None now"
    assert HistoryAgreement(4, 4, 0.0).digits() == 17


def test_a_run_without_a_history_is_said_to_have_none(tmp_path):
    """An external baseline writes no history.csv: the comparison says so, it does not fail."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "history.csv").write_text("step,train_loss\n1,2.0\n")
    assert compare_run_histories(tmp_path / "a", tmp_path / "b") == "the published run has no history.csv"
    shutil.copy(tmp_path / "b" / "history.csv", tmp_path / "a")
    assert compare_run_histories(tmp_path / "a", tmp_path / "b").identical


def test_data_made_again_at_the_published_commit_stands_for_a_record_without_content_checksums(tmp_path):
    """A record of before content checksums names its split files' SHA-256, which a later release
    writes otherwise for the same rows (the metadata's code_version): the published data made
    again, whose files equal the record's, give its content to compare."""
    from conftest import write_prepared_data

    from hkt.data.parquet import content_checksums, prepared_checksums
    from hkt.errors import DataError
    from hkt.fileio import sha256_file

    data = write_prepared_data(tmp_path / "data", "listops")
    files = {s: sha256_file(data / f"{s}.parquet") for s in ("train", "val", "test")}
    published = {"data_checksums": files}
    rerun = {"data_checksums": {**files, "train": "0" * 64},  # a later release's bytes
             "data_content_checksums": content_checksums(data)}
    assert outcome_differences(published, rerun) == [
        "data_checksums: the split files differ, and the published record has no content checksums "
        "to tell whether what they hold does (prepare the data again at the published run's commit "
        "and give that directory as --published-data DIR)"]
    known = [prepared_checksums(data)]
    assert outcome_differences(published, rerun, known) == []
    other = {**rerun, "data_content_checksums": {**rerun["data_content_checksums"], "test": "1" * 64}}
    assert outcome_differences(published, other, known) == ["data_content_checksums: the data differ"]
    unrelated = {"data_checksums": {**files, "val": "2" * 64}}  # known data that is not the record's
    assert outcome_differences(unrelated, rerun, known)[0].startswith("data_checksums: the split files differ")
    (data / "val.parquet").unlink()
    with pytest.raises(DataError, match=r"is not a prepared data directory \(no val.parquet\)"):
        prepared_checksums(data)


def test_published_data_goes_with_redo(tmp_path, capsys):
    publish = load_script("publish_results")
    with pytest.raises(SystemExit) as exit_:
        publish.main([str(tmp_path / "r"), str(tmp_path / "d"), "--published-data", str(tmp_path)])
    assert exit_.value.code == 2 and "--published-data goes with --redo" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"is not a prepared data directory \(no train.parquet\)"):
        publish.redo_runs(tmp_path / "r", tmp_path / "d", [tmp_path])
