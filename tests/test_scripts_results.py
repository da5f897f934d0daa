"""The two scripts that publish results and check them: scripts/publish_results.py (what goes to
docs/results/) and scripts/identity_check.py (two results directories, the same numbers)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import load_script
from test_report_aggregate import make_record

ROOT = Path(__file__).resolve().parents[1]
DATA_META = {"task": "listops", "source": {"generator": "lra", "official": True}}


script = load_script


def write_predictions(run: Path, *, pred: int = 1) -> None:
    """A run's predictions.parquet (three test examples, answered ``pred``, ``1``, ``2``), named
    in its record as `hkt train` names it."""
    import numpy as np

    from hkt.predictions import SplitPredictions, one_hot
    from hkt.predictions import write_predictions as write

    preds = np.array([pred, 1, 2])
    p = SplitPredictions(np.arange(3), np.array([0, 1, 2]), preds, one_hot(preds, 3))
    record = json.loads((run / "record.json").read_text())
    record["config"]["task"]["num_classes"] = 3
    record["val_accuracy"] = record["test_accuracy"] = p.accuracy
    (run / "record.json").write_text(json.dumps({**record, "predictions": write(
        {"val": p, "test": p}, run, 3)}))


def results_dir(root: Path, *, val: float = 0.35, env: str = '{"torch": "2.13.0"}',
                pred: int = 1) -> Path:
    """A finished suite's results directory in miniature: two runs, one analysis, tables."""
    for run in ("listops/hkt/main/seed0", "listops/majority/main/seed0"):
        d = root / "runs" / run
        (d / "checkpoints").mkdir(parents=True)
        (d / "checkpoints" / "last.pt").write_bytes(b"\0" * 64)
        model = run.split("/")[1]
        (d / "record.json").write_text(json.dumps(make_record(
            model=model, seed=0, val=0.3, test=0.3, test_examples=3,
            **({"external": "hkt.baselines.ngram"} if model == "majority" else {}))))
        (d / "config.yaml").write_text("seed: 0\n")
        (d / "environment.json").write_text(env)
    write_predictions(root / "runs/listops/hkt/main/seed0", pred=pred)
    best = json.loads((root / "runs/listops/hkt/main/seed0/record.json").read_text())["val_accuracy"]
    (root / "runs/listops/hkt/main/seed0/history.csv").write_text(  # as the record: 12 steps, its best
        f"step,train_loss,samples_per_s,val_acc\n6,2.3,40.1,{val}\n12,2.2,39.0,{best}\n")
    a = root / "analysis/listops/hkt/main/seed0"
    a.mkdir(parents=True)
    for name in ("summary.md", "settings.json", "analysis.parquet"):
        (a / name).write_text("x")
    (root / "tables").mkdir()
    (root / "tables/main.csv").write_text(f"task,model,val\nlistops,hkt,{val}\n")
    (root / "figures").mkdir()
    (root / "figures/val_curves.png").write_bytes(b"png")
    (root / "bench").mkdir()
    (root / "bench/attention.csv").write_text("T,ratio\n256,2.5\n")
    (root / "tables/runs.csv").write_text(
        "task,model,seed,source\n"
        f"listops,hkt,0,{root.name}/runs/listops/hkt/main/seed0/record.json\n"
        f"listops,majority,0,{root.name}/runs/listops/majority/main/seed0/record.json\n")
    (root / "data/listops").mkdir(parents=True)
    table = pa.table({"label": [0]}).replace_schema_metadata({"hkt": json.dumps(DATA_META)})
    pq.write_table(table, root / "data/listops/train.parquet")
    (root / "data/listops/README.md").write_text("# data card\n")
    (root / "plan").mkdir()
    for name in ("suite.json", "sessions.json", "calibration.json"):  # the cache stays behind
        (root / "plan" / name).write_text("{}")
    (root / "summary.md").write_text("# summary\n")
    return root


def test_publish_copies_every_record_and_history_and_nothing_large(tmp_path):
    publish = script("publish_results")
    res = results_dir(tmp_path / "res")
    dest = tmp_path / "docs" / "cpu"
    assert publish.main([str(res), str(dest)]) == 0
    files = sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file())
    assert files == sorted([
        "summary.md", "tables/main.csv", "tables/runs.csv", "figures/val_curves.png", "bench/attention.csv",
        "environment.json", "plan/suite.json", "plan/sessions.json", "data/listops/README.md",
        "data/listops/metadata.json", "SHA256SUMS",
        "runs/listops/hkt/main/seed0/record.json", "runs/listops/hkt/main/seed0/history.csv",
        "runs/listops/hkt/main/seed0/config.yaml", "runs/listops/hkt/main/seed0/predictions.parquet",
        "runs/listops/majority/main/seed0/record.json",
        "runs/listops/majority/main/seed0/config.yaml",
        "analysis/listops/hkt/main/seed0/summary.md", "analysis/listops/hkt/main/seed0/settings.json",
        "analysis/listops/hkt/main/seed0/analysis.parquet"])
    assert json.loads((dest / "environment.json").read_text()) == {"torch": "2.13.0"}
    # the SHA-256 of every file its runs wrote (sha256sum's format); not of what --retable rewrites
    sums = dict(reversed(line.split("  ")) for line in (dest / "SHA256SUMS").read_text().splitlines())
    assert sorted(sums) == sorted(f for f in files if not f.startswith(("summary", "tables/", "figures/", "SHA")))
    assert sums["runs/listops/hkt/main/seed0/record.json"] == hashlib.sha256(
        (dest / "runs/listops/hkt/main/seed0/record.json").read_bytes()).hexdigest()
    # what the data warnings are read from (hkt aggregate --data), not the data
    assert json.loads((dest / "data/listops/metadata.json").read_text()) == DATA_META
    # predictions travel with the record that names them, checked; a stray file stays behind
    hkt_run = res / "runs/listops/hkt/main/seed0"
    assert (dest / "runs/listops/hkt/main/seed0/predictions.parquet").read_bytes() == \
        (hkt_run / "predictions.parquet").read_bytes()
    assert publish.check_predictions(dest) == 1
    (res / "runs/listops/majority/main/seed0/predictions.parquet").write_bytes(b"unnamed")
    kept = (hkt_run / "predictions.parquet").read_bytes()
    (hkt_run / "predictions.parquet").write_bytes(b"altered")
    with pytest.raises(SystemExit, match="is not the file its record names"):
        publish.main([str(res), str(tmp_path / "d2")])
    (hkt_run / "predictions.parquet").unlink()
    with pytest.raises(SystemExit, match="predictions.parquet is missing: the record names it"):
        publish.main([str(res), str(tmp_path / "d2")])
    assert not list(tmp_path.glob("*d2*"))  # refused before anything was staged
    (dest / "runs/listops/majority/main/seed0/predictions.parquet").write_bytes(b"unnamed")
    with pytest.raises(SystemExit, match="is named by no record"):
        publish.check_predictions(dest)
    (dest / "runs/listops/majority/main/seed0/predictions.parquet").unlink()
    (hkt_run / "predictions.parquet").write_bytes(kept)
    # a second publication over the first needs --replace, and then holds only the new copy
    with pytest.raises(SystemExit, match="already holds files; pass --replace"):
        publish.main([str(res), str(dest)])
    (dest / "stale.md").write_text("old")
    publish.main([str(res), str(dest), "--replace"])
    assert not (dest / "stale.md").exists() and (dest / "summary.md").exists()
    assert not (dest / "runs/listops/majority/main/seed0/predictions.parquet").exists()


def test_publish_refuses_an_unfinished_suite_and_mixed_environments(tmp_path):
    publish = script("publish_results")
    res = results_dir(tmp_path / "res")
    (res / "summary.md").unlink()
    with pytest.raises(SystemExit, match="no summary.md: the suite has not finished"):
        publish.main([str(res), str(tmp_path / "d1")])
    res2 = results_dir(tmp_path / "res2")
    (res2 / "runs/listops/majority/main/seed0/environment.json").write_text('{"torch": "2.12"}')
    with pytest.raises(SystemExit, match="2 different environments"):
        publish.main([str(res2), str(tmp_path / "d2")])
    assert not (tmp_path / "d2").exists()


def test_publish_takes_only_what_the_summary_counts_of_a_finished_idle_suite(tmp_path, capsys):
    import os
    import subprocess
    import sys

    publish = script("publish_results")
    res = results_dir(tmp_path / "res")
    # another suite's run in the same results directory (the quick suite's levels1): left behind
    other = res / "runs/listops/hkt/levels1/seed0"
    other.mkdir(parents=True)
    for name in ("record.json", "history.csv", "config.yaml"):
        (other / name).write_text("{}")
    (other / "environment.json").write_text('{"torch": "2.10"}')  # nor does its environment count
    os.utime(other / "record.json", (0, 0))
    dest = tmp_path / "docs" / "cpu"
    assert publish.main([str(res), str(dest)]) == 0
    assert not (dest / "runs/listops/hkt/levels1").exists()
    assert "left behind 1 runs the summary does not count: listops/hkt/levels1/seed0" in capsys.readouterr().out
    (dest / "README.md").write_text("the publisher's")
    # a workflow running in a results directory (another process holds its lock): refused
    busy = results_dir(tmp_path / "busy")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"fh = open({str(busy / '.workflow.lock')!r}, 'a')\n"
        "fcntl.flock(fh.fileno(), fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit, match=r"is in use by another running workflow.*; publish when it "
                                             r"has finished"):
            publish.main([str(busy), str(dest), "--replace"])
    finally:
        holder.kill()
        holder.wait()
    # a run finished after the last aggregate: refused too
    record = res / "runs/listops/hkt/main/seed0/record.json"
    summary_time = (res / "summary.md").stat().st_mtime
    os.utime(record, (summary_time + 60, summary_time + 60))
    with pytest.raises(SystemExit, match="runs/listops/hkt/main/seed0/record.json is newer than summary.md"):
        publish.main([str(res), str(dest), "--replace"])
    assert (dest / "README.md").read_text() == "the publisher's" and (dest / "summary.md").exists()
    # a summary not built from records (aggregated from MLflow) cannot say which records it counts
    os.utime(record, (summary_time, summary_time))
    runs_csv = res / "tables/runs.csv"
    runs_csv.write_text("task,model,seed,source\nlistops,hkt,0,mlflow:abc\n")
    with pytest.raises(SystemExit, match="a run whose source is not a record"):
        publish.main([str(res), str(dest), "--replace"])


def test_publish_takes_one_environment_by_its_digest(tmp_path):
    """A suite resumed after a reboot into another kernel is one environment (the digest leaves
    the kernel release out); a different digest is another."""
    publish = script("publish_results")
    res = results_dir(tmp_path / "res", env='{"digest": "abc", "platform": "Linux-6.1"}')
    (res / "runs/listops/majority/main/seed0/environment.json").write_text(
        '{"digest": "abc", "platform": "Linux-6.2"}')
    assert publish.main([str(res), str(tmp_path / "d")]) == 0
    assert json.loads((tmp_path / "d/environment.json").read_text())["digest"] == "abc"
    (res / "runs/listops/majority/main/seed0/environment.json").write_text('{"digest": "def"}')
    with pytest.raises(SystemExit, match="2 different environments"):
        publish.main([str(res), str(tmp_path / "d"), "--replace"])
    assert (tmp_path / "d/summary.md").exists()  # the earlier copy stays


def test_a_release_of_hkt_bench_is_no_other_environment_but_another_torch_is(tmp_path):
    """Runs made before and after a version bump of this project (0.1.0 -> 0.2.0; their commits
    say the code differs) publish as one environment; another torch build does not."""
    from hkt.environment import digest

    publish = script("publish_results")

    def env(**packages: str) -> str:
        e = {"python_implementation": "CPython", "python_version": "3.11.7", "system": "Linux",
             "machine": "x86_64", "packages": {"numpy": "2.3.4", **packages}}
        return json.dumps({**e, "digest": digest(e)})

    res = results_dir(tmp_path / "res", env=env(**{"hkt-bench": "0.1.0", "torch": "2.13.0"}))
    (res / "runs/listops/majority/main/seed0/environment.json").write_text(
        env(**{"hkt-bench": "0.2.0", "torch": "2.13.0"}))
    assert publish.main([str(res), str(tmp_path / "d")]) == 0
    (res / "runs/listops/majority/main/seed0/environment.json").write_text(
        env(**{"hkt-bench": "0.2.0", "torch": "2.12.0"}))
    with pytest.raises(SystemExit, match="2 different environments"):
        publish.main([str(res), str(tmp_path / "d"), "--replace"])


def test_identity_check_sees_one_changed_step_and_ignores_timings(tmp_path, capsys):
    check = script("identity_check")
    a = results_dir(tmp_path / "a")
    b = results_dir(tmp_path / "b")
    hist = b / "runs/listops/hkt/main/seed0/history.csv"
    hist.write_text(hist.read_text().replace("40.1", "55.5"))  # a timing: differs by nature
    assert check.main(a, b) == 0
    assert "identical" in capsys.readouterr().out
    c = results_dir(tmp_path / "c")
    h = c / "runs/listops/hkt/main/seed0/history.csv"
    h.write_text(h.read_text().replace("6,2.3", "6,2.4"))  # one training loss
    assert check.main(a, c) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT  runs/listops/hkt/main/seed0/history.csv" in out and "same  main.csv" in out
    d = results_dir(tmp_path / "d", val=0.36)
    assert check.main(a, d) == 1
    assert "DIFFERENT  main.csv" in capsys.readouterr().out
    # one example predicted otherwise; predictions B lacks; a run of A that has none (made
    # before they were kept) whose B has them: named, not counted
    g = results_dir(tmp_path / "g", pred=2)  # another wrong answer: the accuracy stays
    assert check.main(a, g) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT  runs/listops/hkt/main/seed0/predictions.parquet" in out
    assert "DIFFERENT  1 runs' predictions" in out and "same  main.csv" in out
    (g / "runs/listops/hkt/main/seed0/predictions.parquet").unlink()
    assert check.main(a, g) == 1
    assert "missing in B  runs/listops/hkt/main/seed0/predictions.parquet" in capsys.readouterr().out
    assert check.main(g, a) == 0
    assert ("only in B (new, not compared): runs/listops/hkt/main/seed0/predictions.parquet"
            in capsys.readouterr().out)
    # a column a change adds, or a data warning it rewords, is named, not counted
    e = results_dir(tmp_path / "e")
    (e / "tables/main.csv").write_text("task,model,val,budget\nlistops,hkt,0.35,cpu: 10 steps\n")
    assert check.main(a, e) == 0
    assert "same  main.csv (1, 3) (columns only in B: budget)" in capsys.readouterr().out
    # the device's description (a CPU's model, named in records since issue 59) is wording too
    for side, device in (("a2", "cpu (x86_64, 2 cores, 2 threads)"),
                         ("e2", "cpu (AMD EPYC 7B13, x86_64, 2 cores, 2 threads)")):
        (results_dir(tmp_path / side) / "tables/main.csv").write_text(
            f"task,model,val,device\nlistops,hkt,0.35,\"{device}\"\n")
    assert check.main(tmp_path / "a2", tmp_path / "e2") == 0
    assert "same  main.csv (1, 4) (reworded: device)" in capsys.readouterr().out
    # runs only B has (a change that adds a model to the grid) are named, not counted; a run of A
    # missing in B is a difference
    f = results_dir(tmp_path / "f")
    new = f / "runs/listops/s4d/main/seed0"
    new.mkdir(parents=True)
    (new / "history.csv").write_text("step,train_loss,samples_per_s,val_acc\n10,2.0,40.0,0.5\n")
    (f / "tables/main.csv").write_text("task,model,val\nlistops,hkt,0.35\nlistops,s4d,0.5\n")
    assert check.main(a, f) == 0
    out = capsys.readouterr().out
    assert "only in B (new, not compared): runs/listops/s4d/main/seed0/history.csv" in out
    assert "same  main.csv (1, 3) (1 row(s) only in B, not compared)" in out
    assert check.main(f, a) == 1
    out = capsys.readouterr().out
    assert "missing in B" in out and "DIFFERENT  main.csv" in out


def quick_without_s4d(tmp_path: Path) -> tuple[Path, Path, Path, list[Path]]:
    """docs/results/quick copied without S4D's runs (listed pending, not sealed yet), and a
    results directory holding them with their environment: (published, dest, results, runs)."""
    import shutil

    published = ROOT / "docs" / "results" / "quick"
    added = sorted(p.relative_to(published / "runs") for p in (published / "runs").glob("*/s4d/*/seed*"))
    if not added:
        pytest.skip("docs/results/quick/ holds no S4D runs")
    dest = tmp_path / "quick"
    shutil.copytree(published, dest)
    results = tmp_path / "results"
    for run in added:
        shutil.move(dest / "runs" / run, results / "runs" / run)
        shutil.copy(published / "environment.json", results / "runs" / run / "environment.json")
    (dest / "pending.json").write_text(json.dumps({"why": "a test", "runs": [str(r) for r in added]}))
    return published, dest, results, added


def test_add_takes_the_finished_runs_of_a_results_directory_a_workflow_runs_in(tmp_path, capsys):
    """Issue 59: the long suite publishes each run as it lands while the next one trains in the
    same results directory, whose lock a workflow holds. `--add` takes the finished runs (a
    record: the last file a run writes); a run whose record changes while it is copied (the
    workflow runs it again) is refused and nothing is added; a run the suite also analyses
    waits for the workflow's end."""
    import socket
    import subprocess
    import sys
    from types import SimpleNamespace

    published, dest, results, added = quick_without_s4d(tmp_path)
    publish = script("publish_results")
    publish.write_manifest(dest)
    before = {f: f.read_bytes() for f in sorted(dest.rglob("*")) if f.is_file()}
    holder = subprocess.Popen(  # a workflow's hold: another process has the lock
        [sys.executable, "-c", "import sys, time\nfrom hkt.workflow.results_lock import "
         f"claim_results_dir\nclaim_results_dir({str(results)!r}, '/work/long')\n"
         "print('held', flush=True)\ntime.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        copy2 = publish.shutil.copy2

        def rerun_while_copied(src, dst, *a, **k):  # the workflow starts the run over meanwhile
            if Path(src).name == "history.csv":
                record = Path(src).with_name("record.json")
                record.write_text(record.read_text() + " ")
            return copy2(src, dst, *a, **k)

        publish.shutil.copy2 = rerun_while_copied
        try:
            with pytest.raises(SystemExit, match=r"its record changed while it was copied .*"
                               r"nothing was added"):
                publish.add_runs(results, dest)
        finally:
            publish.shutil.copy2 = copy2
        after = {f: f.read_bytes() for f in sorted(dest.rglob("*")) if f.is_file()}
        assert after == before  # not one file
        for run in added:  # the record as the run wrote it again
            record = results / "runs" / run / "record.json"
            record.write_text(record.read_text().rstrip(" "))
        assert publish.add_runs(results, dest) == [str(r) for r in added]
        assert (f"a workflow is running in {results} (pid {holder.pid} on host "
                f"{socket.gethostname()}, from /work/long): adding only its finished runs ({len(added)})"
                in capsys.readouterr().out)
        assert all((dest / "runs" / r / "record.json").read_bytes()
                   == (results / "runs" / r / "record.json").read_bytes() for r in added)
        assert not (dest / "pending.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # a run the suite analyses, while the workflow runs: left for its end
    grid = SimpleNamespace(analyses=lambda: [f"results/analysis/{added[0]}/analysis.parquet"])
    assert publish.finished_runs(results, added, grid) == added[1:]
    assert f"left for the workflow's end, as the suite analyses them: {added[0]}" in \
        capsys.readouterr().out
    with pytest.raises(SystemExit, match="every run it has finished is one the suite also analyses"):
        publish.finished_runs(results, added[:1], grid)


def test_add_grows_a_publication_by_its_suites_new_runs_to_what_was_published(tmp_path, capsys):
    """`publish_results.py --add`: docs/results/quick without S4D's runs (pending), plus a results
    directory holding them, becomes docs/results/quick again, tables byte for byte; runs of
    another environment are refused before anything is copied."""
    import shutil

    published, dest, results, added = quick_without_s4d(tmp_path)
    with_predictions = len(list(published.glob("runs/**/predictions.parquet")))
    if not (results / "runs" / added[0] / "predictions.parquet").is_file():
        write_predictions(results / "runs" / added[0])  # a run with predictions, beside ones without
        with_predictions = 1
    publish = script("publish_results")
    with pytest.raises(SystemExit, match=r"s4d/main/seed0/\S+ is in .*SHA256SUMS but missing"):
        publish.add_runs(results, dest)  # the copy is not the publication: refused before adding
    # the per-example facts come with the added runs' results, as the long suite's will (issue 59:
    # its publication has none until its first runs with predictions join it)
    facts = Path("data/listops/examples.parquet")
    if (dest / facts).is_file():
        (results / facts).parent.mkdir(parents=True)
        shutil.move(dest / facts, results / facts)
    publish.write_manifest(dest)  # sealed as it is: a publication without S4D's runs

    other = tmp_path / "other"
    shutil.copytree(results, other)
    (other / "runs" / added[0] / "environment.json").unlink()
    with pytest.raises(SystemExit, match=r"runs that record no software environment \(.*s4d/main/seed0"):
        publish.add_runs(other, dest)
    assert not (dest / "runs" / added[0]).exists()

    # a run of another environment (the lock moved between sessions) joins with its own beside it
    env = json.loads((published / "environment.json").read_text())
    env["packages"] = {**env["packages"], "a-new-package": "1.0"}
    (other / "runs" / added[0] / "environment.json").write_text(json.dumps(env))
    record = other / "runs" / added[0] / "record.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "env_digest": "f00dfeedcafe"}))
    elsewhere = tmp_path / "elsewhere" / "quick"  # a publication is named by its suite
    shutil.copytree(dest, elsewhere)
    assert publish.add_runs(other, elsewhere) == [str(r) for r in added]
    assert json.loads((elsewhere / "runs" / added[0] / "environment.json").read_text()) == env
    assert not (elsewhere / "runs" / added[1] / "environment.json").exists()  # the publication's
    assert f"runs/{added[0]}/environment.json" in (elsewhere / "SHA256SUMS").read_text()
    summary = (elsewhere / "summary.md").read_text()
    assert "Packages that differ between the environments (1)" in summary
    assert "| a-new-package | — | 1.0 |" in summary and "No environment.json found" not in summary

    assert publish.add_runs(results, dest) == [str(r) for r in added]
    assert not (dest / "pending.json").exists()
    assert (dest / "runs" / added[0] / "predictions.parquet").read_bytes() == \
        (results / "runs" / added[0] / "predictions.parquet").read_bytes()
    assert publish.check_predictions(dest) == with_predictions
    if (published / facts).is_file():  # carried, sealed (below) and read by the tables
        assert (dest / facts).read_bytes() == (published / facts).read_bytes()
    # sealed as published, but for a run given predictions here (its record names them)
    sealed = set((dest / "SHA256SUMS").read_text().splitlines())
    differ = sealed ^ set((published / "SHA256SUMS").read_text().splitlines())
    assert all(f"runs/{added[0]}/" in line for line in differ), differ
    assert any(line.endswith(f"runs/{added[0]}/predictions.parquet") for line in sealed)
    for f in sorted((published / "tables").iterdir()):
        if f.name.startswith("mlflow_check."):  # the MLflow audit is not regenerated
            continue
        assert (dest / "tables" / f.name).read_bytes() == f.read_bytes(), f.name
    with pytest.raises(SystemExit, match="holds no run of suite quick"):
        publish.add_runs(results, dest)


def test_a_suite_borrowing_two_publications_lays_both_beside_its_records(tmp_path):
    """The long suite sets its runs beside two publications (cpu and sensitivity): regenerating
    its tables copies both borrowed trees where the aggregate (run from the root) reads them."""
    publish = script("publish_results")
    results = tmp_path / "results"
    results.mkdir()
    args = publish._aggregate_inputs("long", results)
    borrowed = [args[i + 1] for i, word in enumerate(args) if word == "--borrow"]
    assert borrowed == ["docs/results/cpu/runs", "docs/results/sensitivity/runs"]
    for path in borrowed:
        published = sorted(p.relative_to(ROOT / path) for p in (ROOT / path).rglob("record.json"))
        assert published and published == sorted(
            p.relative_to(tmp_path / path) for p in (tmp_path / path).rglob("record.json"))
    suite = yaml.safe_load((ROOT / "config/suites/long.yaml").read_text("utf-8"))["sweep"]
    jobs = 2 * len(suite["variants"]) * len(suite["seeds"])  # MHA and HKT, each variant and seed
    assert sum(a.endswith("/record.json") for a in args) == jobs  # the suite's own jobs


def test_publish_carries_each_tasks_per_example_facts_beside_its_metadata(tmp_path):
    """data/TASK/examples.parquet goes with the publication (what its per-example readings group
    predictions by), the splits do not."""
    publish = script("publish_results")
    res = results_dir(tmp_path / "res")
    facts = res / "data/listops/examples.parquet"
    pq.write_table(pa.table({"split": ["test"], "row": [0], "label": [3]}), facts)
    dest = tmp_path / "docs" / "cpu"
    assert publish.main([str(res), str(dest)]) == 0
    assert (dest / "data/listops/examples.parquet").read_bytes() == facts.read_bytes()
    assert not (dest / "data/listops/train.parquet").exists()


def test_added_runs_bring_the_sessions_that_made_them_only(tmp_path):
    """`--add` joins to the publication the sessions that worked on the runs it adds: one whose
    time overlaps a run's training, one whose command names the run (a first attempt, killed);
    not one still running here (another run's, in a copy of the results directory, issue 59),
    nor one of other work, nor one published already."""
    import os
    import socket

    publish = script("publish_results")
    run = "listops/mha/lr1e3_steps20k/seed0"
    target = ["snakemake", "--", f"results-long/runs/{run}/record.json"]
    span = (1000.0, 2000.0)

    def session(started, **more):
        return {"started": started, "pid": 4242, "host": "elsewhere", "argv": ["snakemake"], **more}

    made = session(900.0, ended=2001.0, ok=True)
    killed = session(100.0, last_seen=300.0, argv=target)  # no end written: its last heartbeat
    running = {**session(2002.0, argv=["snakemake", "--", "results-long/runs/other/record.json"]),
               "pid": os.getpid(), "host": socket.gethostname(), "last_seen": 2003.0}
    other = session(50.0, ended=60.0, ok=True)
    published = session(10.0, ended=20.0, ok=True)
    src, dest = tmp_path / "src.json", tmp_path / "dest.json"
    src.write_text(json.dumps({"sessions": [published, killed, other, made, running]}))
    dest.write_text(json.dumps({"sessions": [published]}))
    publish._add_sessions(src, dest, {run: span})
    joined = json.loads(dest.read_text())["sessions"]
    assert joined == [published, {**killed, "adds": [run]}, {**made, "adds": [run]}]
