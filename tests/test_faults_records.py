"""Run records and histories that are damaged, forged or duplicated (issue 61): each is refused
or named in one line, and `hkt aggregate` writes nothing partial (docs/faults.md, "Records")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hkt.cli.main import main as hkt_main
from hkt.runs_frame import AggregateError, load_records, runs_from_records
from test_report_aggregate import make_record, suite_records, write_records


def _aggregate(capsys, *sources: Path, out: Path) -> tuple[int, list[str]]:
    """`hkt aggregate SOURCES --out OUT`: its exit status and its stderr lines."""
    rc = hkt_main(["aggregate", *map(str, sources), "--out", str(out)])
    return rc, capsys.readouterr().err.strip().splitlines()


def _files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) \
        if out.exists() else []


# ------------------------------------------------------------------ two records of one run


def test_two_records_of_one_run_are_refused_naming_both(tmp_path, capsys):
    """Issue 61: a record copied under another model's folder and edited to say it is HKT
    (seed 0) gave HKT at 90 % or at 6 % depending on the argument order. Both orders are
    refused, naming both files, and nothing is written."""
    ours = make_record(model="hkt", seed=0, test=0.06)
    write_records(tmp_path / "runs", [ours, make_record(model="mha", seed=0, test=0.5)])
    forged = tmp_path / "copy" / "record.json"  # not in a run directory: its place says nothing
    forged.parent.mkdir()
    forged.write_text(json.dumps(make_record(model="hkt", seed=0, test=0.9,
                                             created="2026-03-01T00:00:00+00:00")))
    hkt_dir = tmp_path / "runs" / "listops" / "hkt" / "main" / "seed0" / "record.json"
    for order in ([tmp_path / "runs", forged], [forged, tmp_path / "runs"]):
        with pytest.raises(AggregateError, match="two records of one run") as exc:
            runs_from_records(load_records(order))
        assert str(hkt_dir) in str(exc.value) and str(forged) in str(exc.value)
        out = tmp_path / "out"
        assert hkt_main(["aggregate", *map(str, order), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("hkt: error: two records of one run")
        assert not out.exists() or not any(out.rglob("*.*"))


def test_a_record_whose_folder_names_another_run_is_refused(tmp_path, capsys):
    """A record in runs/TASK/MODEL/VARIANT/seedK/ must be that run's: one copied under the
    MHA folder (still saying HKT) is refused, naming the file and what differs."""
    write_records(tmp_path / "runs", [make_record(model="hkt", seed=0)])
    moved = tmp_path / "runs" / "listops" / "mha" / "main" / "seed0"
    moved.mkdir(parents=True)
    (moved / "record.json").write_text(json.dumps(make_record(model="hkt", seed=0)))
    with pytest.raises(AggregateError, match=r"lies in the run directory of listops/mha/main/seed0 "
                                             r"but is the record of listops/hkt/main/seed0 \(its "
                                             r"model differ"):
        load_records([tmp_path / "runs"])
    # the task folder may be the task file's id (runs/listops_lra/ holds family listops)
    lra = tmp_path / "lra" / "runs" / "listops_lra" / "hkt" / "main" / "seed1"
    lra.mkdir(parents=True)
    rec = make_record(model="hkt", seed=1)
    rec["config"]["task"]["id"] = "listops_lra"
    (lra / "record.json").write_text(json.dumps(rec))
    assert len(load_records([tmp_path / "lra"])) == 1


# ------------------------------------------------------------------ a damaged history.csv


def test_a_damaged_history_is_named_and_the_convergence_table_says_so(tmp_path, capsys):
    """A history.csv cut short (at a line boundary: it parses) lost its run's curve without a
    word. Now one warning line names the file, and the convergence table's row and caption
    say a seed lacks its curve."""
    root = write_records(tmp_path / "runs", suite_records())
    hist = root / "listops" / "hkt" / "main" / "seed1" / "history.csv"
    hist.write_text("\n".join(hist.read_text().splitlines()[:3]) + "\n")  # the last row is gone
    rc, err = _aggregate(capsys, root, out=tmp_path / "out")
    assert rc == 0
    warned = [line for line in err if str(hist) in line]
    assert len(warned) == 1 and warned[0].startswith("hkt: warning: ")
    assert "it ends at step 6, the run at step 12" in warned[0]
    table = (tmp_path / "out" / "tables" / "convergence.md").read_text()
    assert "Warning: 1 run(s) have no readable history.csv" in table.splitlines()[0]
    assert str(hist) in table.splitlines()[0]
    row = next(line for line in table.splitlines() if line.startswith("| listops | 512 | hkt"))
    assert "| 3 (1 without a readable history.csv) |" in row
    # a history that does not parse, or is missing, is named the same way; every seed's lost:
    # the row stays, saying so
    for seed in (0, 2):
        (root / "listops" / "hkt" / "main" / f"seed{seed}" / "history.csv").write_text(
            "step,val_acc\n3,0.1\n6,0.x\n" if seed else "")
    (root / "listops" / "hkt" / "main" / "seed1" / "history.csv").unlink()
    rc, err = _aggregate(capsys, root, out=tmp_path / "out2")
    assert rc == 0 and sum("is not readable as its run's history" in line for line in err) == 3
    table = (tmp_path / "out2" / "tables" / "convergence.md").read_text()
    assert "(missing)" in table.splitlines()[0]
    row = next(line for line in table.splitlines() if line.startswith("| listops | 512 | hkt"))
    assert "| 3 (3 without a readable history.csv) |" in row
    # the intact ones give no warning
    rc, err = _aggregate(capsys, write_records(tmp_path / "whole", suite_records()),
                         out=tmp_path / "out3")
    assert rc == 0 and not any("history" in line for line in err)


# ------------------------------------------------------------------ non-finite numbers


def test_a_nan_accuracy_is_refused_when_the_record_loads_and_nothing_is_written(tmp_path, capsys):
    """`json.dump` writes NaN, which the schema's `number` lets through: aggregate died in
    matplotlib with partial tables in --out. Now one line names the file and the field."""
    recs = suite_records()
    recs[0]["test_accuracy"] = math.nan
    root = write_records(tmp_path / "runs", recs)
    assert "NaN" in (root / "listops" / "hkt" / "main" / "seed0" / "record.json").read_text()
    out = tmp_path / "out"
    rc, err = _aggregate(capsys, root, out=out)
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("hkt: error: ") and "listops/hkt/main/seed0/record.json" in err[0]
    assert "test_accuracy is nan, not a finite number" in err[0]
    assert "run the workflow again" in err[0]  # what to do
    assert _files(out) == []
    recs[0]["test_accuracy"], recs[1]["config"]["optim"] = 0.5, {"lr": math.inf}
    write_records(tmp_path / "runs", recs)
    rc, err = _aggregate(capsys, root, out=out)
    assert rc == 2 and "config.optim.lr is inf, not a finite number" in err[0]


def test_an_aggregate_that_fails_leaves_out_as_it_was(tmp_path, capsys, monkeypatch):
    """Whatever fails while writing (here the last figure), --out keeps the previous
    aggregate's files, unchanged, and no staging folder."""
    from hkt.figures import suite as figures
    from hkt.report import build

    root = write_records(tmp_path / "runs", suite_records())
    out = tmp_path / "out"
    assert _aggregate(capsys, root, out=out)[0] == 0
    before = {f: (out / f).read_bytes() for f in _files(out)}
    recs = suite_records()
    recs[0]["test_accuracy"] = 0.01  # a new result, whose tables are written first
    write_records(tmp_path / "runs", recs)

    def broken(*args, **kwargs):
        raise ValueError("a figure that cannot be drawn")

    monkeypatch.setattr(figures, "main_bar", broken)
    with pytest.raises(ValueError, match="cannot be drawn"):
        hkt_main(["aggregate", str(root), "--out", str(out)])
    assert {f: (out / f).read_bytes() for f in _files(out)} == before
    assert not (out / build.STAGE).exists()
    monkeypatch.undo()
    assert _aggregate(capsys, root, out=out)[0] == 0
    assert (out / "tables" / "main.md").read_bytes() != before["tables/main.md"]
    assert not (out / build.STAGE).exists() and sorted(before) == _files(out)


# ------------------------------------------------------------------ a record that does not load


def _train_cmd(data: Path, out: Path) -> list[str]:
    return ["train", "--data", str(data), "--out", str(out), "task=listops", "model=mha",
            "profile=smoke", "train.max_steps=6", "train.eval_every=3", "train.log_every=3",
            "train.checkpoint_every=3", "--no-progress"]


def test_hkt_train_rebuilds_a_truncated_record_from_the_final_checkpoint(tmp_path, capsys,
                                                                       isolated_results):
    """Issue 61: a record.json cut short counted as done; `hkt train` said "not valid JSON"
    and stopped. The same command now sets it aside (record.json.damaged), says so in one line,
    and finishes the run from its last checkpoint: the best checkpoint tested again, the same
    numbers, its MLflow run FINISHED."""
    from mlflow.tracking import MlflowClient

    from conftest import write_prepared_data
    from hkt.mlflow_store import tracking_uri

    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    assert hkt_main(_train_cmd(data, run)) == 0
    record = json.loads((run / "record.json").read_text())
    text = (run / "record.json").read_text()
    (run / "record.json").write_text(text[: len(text) // 2])  # a copy cut off half-way
    capsys.readouterr()
    assert hkt_main(_train_cmd(data, run)) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if line.startswith("hkt: warning:")]
    assert len(warned) == 1 and f"{run / 'record.json'} does not load (not valid JSON" in warned[0]
    assert "kept as record.json.damaged" in warned[0] and "from its last checkpoint" in warned[0]
    assert "resuming from" in err and "at step 6/6" in err  # nothing left to train: it tests
    rebuilt = json.loads((run / "record.json").read_text())
    for key in ("val_accuracy", "test_accuracy", "test_loss", "best_step", "steps", "n_params",
                "data_checksums", "mlflow_run_id"):
        assert rebuilt[key] == record[key], key
    assert (run / "record.json.damaged").read_text() == text[: len(text) // 2]
    client = MlflowClient(tracking_uri(None, isolated_results))
    assert client.get_run(rebuilt["mlflow_run_id"]).info.status == "FINISHED"
    # a record with a NaN, or whose schema fails, is rebuilt the same way; a whole one is kept
    (run / "record.json").write_text(json.dumps({**rebuilt, "test_accuracy": math.nan}))
    assert hkt_main(_train_cmd(data, run)) == 0
    assert "test_accuracy is nan, not a finite number" in capsys.readouterr().err
    assert json.loads((run / "record.json").read_text())["test_accuracy"] == record["test_accuracy"]
    assert hkt_main(_train_cmd(data, run)) == 0
    assert "run already finished; nothing to do." in capsys.readouterr().err


def test_the_workflow_redoes_a_run_whose_record_does_not_load(tmp_path):
    """Snakemake takes a job whose output exists as done. A record that does not load is named
    when the workflow is read; a dry run leaves it (reading the workflow changes nothing, issue
    62), a run sets it aside as it builds its DAG, so the job runs again, even where nothing else
    is left to do; a whole one is left alone (the data and one run's record in place; a --touch
    run: the real DAG and start, no command run)."""
    from hkt.workflow.suites import load_suite
    from test_workflow import ROOT, snakemake

    grid = load_suite("smoke", overrides={"results_dir": "res"}).grid
    job = grid.train_jobs()[0]
    for f in grid.data_files(job.task):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    record = tmp_path / grid.record(job)
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps(make_record(task=job.task, model=job.model, seed=job.seed)))
    args = (grid.record(job), "--configfile", str(ROOT / "config" / "suites" / "smoke.yaml"),
            "--config", "results_dir=res")
    r = snakemake("-n", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Nothing to be done" in r.stdout + r.stderr
    record.write_text(record.read_text()[:100])
    r = snakemake("-n", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    warned = [line for line in out.splitlines() if line.startswith("hkt: warning:")]
    assert len(warned) == 1 and f"{grid.record(job)} does not load (not valid JSON" in warned[0]
    assert ("a run sets it aside as record.json.damaged and runs its job again" in warned[0]
            and "a dry run leaves it, and lists its job as done" in warned[0])
    assert "Nothing to be done" in out and record.exists()  # as it says
    r = snakemake("--touch", "--cores", "1", *args, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "rule train:" in out and "Nothing to be done" not in out
    assert not record.exists() and record.with_name("record.json.damaged").exists()


def test_hkt_status_does_not_count_a_record_that_does_not_load_as_done(tmp_path, capsys):
    """`hkt status` said such a run was done. It is waiting now, named with what happens."""
    from test_status import results as _results  # noqa: F401 - the plan of a small suite
    from hkt.suite.standing import settings, suite_status
    from hkt.suite.status import format_status

    res = _results.__wrapped__(tmp_path)
    for j in json.loads((res / "plan" / "suite.json").read_text())["jobs"]:
        out = tmp_path / j["output"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(make_record(seed=int(j["name"][-1]))) if j["rule"] == "train"
                       else "{}")
    broken = res / "runs/listops/hkt/main/seed1/record.json"
    broken.write_text(broken.read_text()[:50])
    s = suite_status(res, settings([]))
    text = format_status(s)
    assert "jobs: 6: done 4, running 0, waiting 2, failed 0" in text  # the run, and the aggregate
    assert "to redo:" in text
    line = next(line for line in text.splitlines() if "listops/hkt/main/seed1" in line)
    assert "does not load (not valid JSON" in line and "the workflow's next run redoes this run" \
        in line
    assert broken.exists()  # status only reads
