"""The real workflow end to end on the smoke profile, in a temporary directory.

ListOps (generated, small counts), MHA and HKT, one seed, a two-point ablation (L=1 against the
main L=3), the shipped external baselines, and one more external baseline added by docs/extending.md's
recipe (b) (a program that is not ours: its config entry and command alone). Checks the tables, figures,
summary, MLflow runs and audit, that an up-to-date tree does nothing, and that editing one
model's config re-runs only that model's jobs. The workflow, config and environment file are
copied first, so the test never touches the repository's own files. The run is made once
(`workflow_run`); the MHA-only replay runs another suite on a copy of it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from hkt.report.aggregate_outputs import aggregate_files
from hkt.workflow.next_steps import published_form
from test_faults_workflow import files_under
from test_workflow import ROOT, job_stats, snakemake, user_env
from conftest import load_script

pytestmark = pytest.mark.slow

# Recipe (b): any command that writes a run record. Here a stand-alone script (no hkt import)
# that predicts the first training example's label and writes the record as plain JSON.
TOY_SCRIPT = '''
import hashlib, json, sys
from datetime import datetime, timezone
from pathlib import Path
import pyarrow.parquet as pq

data, out = Path(sys.argv[1]), Path(sys.argv[2])
label = pq.read_table(data / "train.parquet").column("label")[0].as_py()
acc = {s: sum(int(v == label) for v in pq.read_table(data / f"{s}.parquet").column("label").to_pylist())
          / pq.read_metadata(data / f"{s}.parquet").num_rows for s in ("val", "test")}
meta = json.loads(pq.read_metadata(data / "train.parquet").metadata[b"hkt"])
out.mkdir(parents=True, exist_ok=True)
record = {
    "schema_version": 1, "task": meta["task"], "model": "toy", "variant": "main", "seed": 0,
    "profile": "smoke", "config": {"task": {"family": meta["task"], "max_length": meta["max_length"]}},
    "n_params": 0, "steps": 0, "best_step": None, "val_accuracy": acc["val"],
    "test_accuracy": acc["test"], "wall_time_s": 0.0, "ms_per_step": None, "samples_per_s": None,
    "device": "cpu", "git_commit": None, "git_dirty": None, "data_dir": str(data),
    "data_checksums": {s: hashlib.sha256((data / f"{s}.parquet").read_bytes()).hexdigest()
                       for s in ("train", "val", "test")},
    "mlflow_run_id": None, "mlflow_tracking_uri": None, "mlflow_experiment": None,
    "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "hkt_version": "toy",
}
(out / "record.json").write_text(json.dumps(record))
'''

# spaces and non-ASCII letters: every path the rules pass is quoted (issue 23, fault 4)
RESULTS = "my results é/wf ñ"

CONFIG = {
    "results_dir": RESULTS,
    "profile": "smoke",
    "seeds": [0],
    "train_overrides": ["train.test_batches=2"],
    "tasks": {"listops": {"config": "listops", "prepare": [
        "prepare.splits.train=256", "prepare.splits.val=32", "prepare.splits.test=32"]}},
    "main": {"tasks": ["listops"], "models": ["mha", "hkt"]},
    "ablation": {"enabled": True, "task": "listops", "include": ["levels1"]},
    "external": {"majority": {"enabled": True, "seeds": [0]},
                 "ngram": {"enabled": True, "seeds": [0],
                           "options": {"orders": [1, 2], "buckets": 4096, "epochs": 1}},
                 # recipe (b): the script's path is set by the fixture
                 "toy": {"enabled": True, "seeds": [0], "command": "python TOY_SCRIPT {data} {out}"}},
    "analyze": {"enabled": True, "models": ["hkt", "mha"], "variants": ["main"],
                "args": ["examples=16", "truncation_examples=32"]},
    "bench": {"enabled": True, "args": ["--lengths", "64", "--repeats", "1",
                                        "--variants", "mha", "hkt-fused"]},
    "resources": {"train": {"threads": 1, "gpu": 0}, "prepare": {"threads": 1},
                  "analyze": {"threads": 1, "gpu": 0}, "bench": {"threads": 1, "gpu": 0}},
}


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory):
    """The workflow of CONFIG, run to the end in a temporary directory once: the tests below read
    it, and the MHA-only replay runs another suite on a copy of it."""
    tmp = tmp_path_factory.mktemp("e2e")
    repo = tmp / "repo"
    for part in ("workflow", "config"):
        shutil.copytree(ROOT / part, repo / part)
    shutil.copy(ROOT / "environment.yml", repo)  # the rules' conda environment
    script = tmp / "toy_baseline.py"
    script.write_text(TOY_SCRIPT)
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG).replace("TOY_SCRIPT", str(script)))
    work = tmp / "work"
    work.mkdir()
    snakefile = repo / "workflow" / "Snakefile"
    r = snakemake("--cores", "2", "--configfile", str(cfg), cwd=work, snakefile=snakefile,
                  timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return {"repo": repo, "cfg": cfg, "work": work, "results": work / RESULTS,
            "snakefile": snakefile, "output": r.stdout + r.stderr}


def test_a_finished_suite_ends_by_naming_its_summary_report_and_mlflow_ui(workflow_run):
    """Issue 64: the last lines, after Snakemake's `Elapsed time`, say where the summary is, the
    command that builds the report (the one summary.md prints) and the MLflow UI's."""
    out = workflow_run["output"].rstrip().splitlines()
    summary = (workflow_run["results"] / "summary.md").read_text()
    report = re.search(r"^- Report: .*?`([^`]+)`", summary, re.M).group(1)
    assert out[-3] == f"hkt: suite complete: results in {RESULTS}/, read {RESULTS}/summary.md first"
    # the closing line names the venv's Snakemake by path (it works where the workflow ran);
    # summary.md, which may be published, names a program outside the work dir by its name
    terminal = out[-2].rsplit("`", 2)[-2]
    assert shlex.split(terminal)[0] == str(Path(sys.executable).parent / "snakemake")
    assert published_form(terminal) == report
    db = shlex.quote(f"sqlite:///{RESULTS}/mlflow.db")
    assert f"ui --backend-store-uri {db} --host 127.0.0.1 --port 5000`" in out[-1]
    assert any(line.startswith("Elapsed time:") for line in out[-8:-3])


def test_plan_and_log_advice_come_before_the_first_job(workflow_run):
    out = workflow_run["output"]
    plan = out.index("estimated wall time on this machine:")
    assert out.index("hkt: suite none (from the config files given)") < plan
    assert "jobs: " in out and "train " in out and "(measured, at the job's batch)" in out
    assert f"tail -f '{RESULTS}'/logs/train/" in out
    assert plan < out.index("rule prepare:")
    assert plan < out.index("hkt: from Snakemake's start, as its `Elapsed time` and `hkt status` "
                            "count: about ") < out.index("rule prepare:")
    assert (workflow_run["results"] / "plan" / "calibration.json").is_file()
    assert f"where it stands, any time: `hkt status '{RESULTS}'`" in out


def test_status_reads_the_finished_suite(workflow_run):
    r = subprocess.run([sys.executable, "-m", "hkt.cli.main", "status", str(workflow_run["results"])],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # prepare, 3 trainings, 8 external (majority, ngram, toy, 5 rule references), 2 analyses,
    # bench, aggregate
    assert "jobs: 16: done 16, running 0, waiting 0, failed 0" in r.stdout, r.stdout
    assert "finished: every job is done" in r.stdout
    assert "workflow: not running" in r.stdout
    (session,) = json.loads((workflow_run["results"] / "plan" / "sessions.json").read_text())["sessions"]
    assert session["ok"] is True and session["ended"] >= session["started"] and session["estimate_s"] > 0
    # one span (issue 64): the session is Snakemake's `Elapsed time` (from its start, not the
    # first job's), and its estimate counts the time before the first job as well as the plan's
    h, m, sec = re.search(r"^Elapsed time: (\d+):(\d+):([\d.]+)$", workflow_run["output"], re.M).groups()
    assert abs(session["ended"] - session["started"] - (3600 * int(h) + 60 * int(m) + float(sec))) < 5
    plan = json.loads((workflow_run["results"] / "plan" / "suite.json").read_text())
    before = plan["started"] - session["started"]  # the plan is written when the jobs start
    assert before > 0 and session["estimate_s"] == pytest.approx(before + plan["estimate_s"], abs=2)
    assert "wall time: " in r.stdout and " over 1 run of the workflow, against " in r.stdout


def test_the_finished_suite_publishes_every_run_it_counts(workflow_run, tmp_path):
    """scripts/publish_results.py on a real finished suite: every run of tables/runs.csv with its
    record, history and config, its analyses' tables, the data cards; no checkpoint, no data."""
    res, dest = workflow_run["results"], tmp_path / "published"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), str(res), str(dest)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    counted = {str(Path(s).parent.relative_to(Path(RESULTS) / "runs"))
               for s in pl.read_csv(res / "tables" / "runs.csv")["source"]}
    published = {str(f.parent.relative_to(dest / "runs")) for f in dest.glob("runs/**/record.json")}
    assert published == counted and len(counted) >= 6
    trained = [run for run in counted if (res / "runs" / run / "history.csv").is_file()]
    assert trained and all((dest / "runs" / run / "history.csv").is_file() for run in trained)
    assert (dest / "analysis/listops/hkt/main/seed0/analysis.parquet").is_file()
    assert (dest / "data/listops/README.md").is_file() and (dest / "environment.json").is_file()
    assert not list(dest.rglob("*.pt"))
    # no split of the data, only its per-example facts (the readings group predictions by them)
    assert {p.name for p in dest.glob("data/*/*.parquet")} == {"examples.parquet"}
    # every run's predictions, trained and baseline alike (issue 58), checked against its record;
    # the toy program (not ours) writes a record alone
    assert load_script("publish_results").check_predictions(dest) == len(counted) - 1
    assert {run for run in counted if (dest / "runs" / run / "predictions.parquet").is_file()} \
        == counted - {"listops/toy/main/seed0"}


def test_tables_figures_and_summary(workflow_run):
    res = workflow_run["results"]
    main = pl.read_csv(res / "tables" / "main.csv")
    # the ListOps rule references (config.yaml's `external:`) run beside the named baselines
    assert main["model"].to_list() == ["mha", "hkt", "ngram", "majority", "root_op_prior",
                                       "depth1_rule", "depth2_rule", "depth3_rule", "exact_rule",
                                       "toy"]
    assert main.filter(pl.col("model") == "exact_rule")["test_mean"].to_list() == [100.0]
    assert set(main["task"]) == {"listops"} and set(main["length"]) == {512}
    hkt = main.filter(pl.col("model") == "hkt").row(0, named=True)
    assert hkt["paper_mean"] == pytest.approx(55.10) and hkt["seeds"] == 1
    assert 0 <= hkt["test_mean"] <= 100
    abl = pl.read_csv(res / "tables" / "ablation.csv")
    assert abl["variant"].to_list() == ["main", "levels1", "main"]
    assert abl.row(1, named=True)["paper_delta_pp"] == pytest.approx(-18.4)
    for t in ("main", "gap", "ablation"):
        for ext in ("md", "tex"):
            assert (res / "tables" / f"{t}.{ext}").stat().st_size > 0
    for f in ("val_curves", "accuracy_vs_levels", "main_bar"):
        assert (res / "figures" / f"{f}.png").read_bytes()[:4] == b"\x89PNG"
    summary = (res / "summary.md").read_text()
    assert "profile: smoke" in summary and "[main](tables/main.md)" in summary
    # config files that name no suite; the suite run is named by its results directory
    assert "suite: none named, in this results directory;" in summary  # null in records: no suite
    for table in (res / "tables").glob("*.md"):  # every table and figure is linked
        assert f"(tables/{table.name})" in summary, table.name
    for figure in (res / "figures").glob("*.png"):
        assert f"(figures/{figure.name})" in summary, figure.name
    assert {"kurtosis.md", "approximation.md", "cost.md"} <= {p.name for p in (res / "tables").glob("*.md")}
    assert f"snakemake --report '{RESULTS}/report.html'" in summary  # its own results_dir
    runs = pl.read_csv(res / "tables" / "runs.csv")
    assert len(runs) == 11  # mha, hkt, hkt levels1, majority, ngram, toy, 5 rule references
    log = (res / "logs" / "train" / "listops" / "hkt" / "levels1" / "seed0.log").read_text()
    assert log.startswith("===== hkt train --data ")  # each attempt under its own header
    for model in ("hkt", "mha"):
        assert (res / "analysis" / "listops" / model / "main" / "seed0" / "analysis.parquet").is_file()
    kurt = pl.read_csv(res / "tables" / "kurtosis.csv")
    assert set(kurt["model"]) == {"hkt", "mha"}
    assert set(kurt.filter(pl.col("model") == "hkt")["level"]) == {0, 1, 2}
    assert set(kurt.filter(pl.col("quantity") == "scores")["paper"]) == {33.0}
    kernel = pl.read_csv(res / "tables" / "kernel.csv")
    assert ((kernel["antisym_mean"] >= 0) & (kernel["antisym_mean"] <= 1)).all()
    trunc = pl.read_csv(res / "tables" / "truncation.csv")
    assert trunc["level"].to_list() == [1, 2, 3] and trunc["delta_pp"][-1] == 0
    cost = pl.read_csv(res / "tables" / "cost.csv")
    assert cost["ratio"][0] == pytest.approx(1.3125)
    assert "attention fwd+bwd time, measured" in cost["what"].to_list()
    assert "training ms/step, measured" in cost["what"].to_list()
    for name in ("kappa_by_level", "truncation"):
        assert (res / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_the_smoke_summary_reads_every_claim_at_its_budget_and_links_only_files(workflow_run):
    """12 smoke steps on one seed (issue 52): every claim read from runs, kurtosis and
    approximation among them, reads "cannot tell at this budget"; every link of summary.md
    reaches a file the workflow wrote."""
    from test_report_budget import COST_CLAIM, LINK, claim_rows

    res = workflow_run["results"]
    summary = (res / "summary.md").read_text()
    readings = {claim: reading for claim, _, _, reading in claim_rows(summary)
                if not claim.startswith(COST_CLAIM)}  # an operation count: any budget
    assert any("Mardia" in c for c in readings) and any("geometrically" in c for c in readings)
    assert any(c.startswith("HKT beats MHA") for c in readings), readings
    wrong = {c: r for c, r in readings.items() if not r.startswith("cannot tell at this budget (")}
    assert not wrong
    # the trained models' rows name what falls short (the toy baseline's record says 0 steps)
    assert all(r == "cannot tell at this budget (12 steps, 1 seed)"
               for c, r in readings.items() if "TOY" not in c)
    links = LINK.findall(summary)
    assert len(links) > 10 and [t for t in links if not (res / t).is_file()] == []


def test_mlflow_holds_every_run(workflow_run):
    from mlflow.tracking import MlflowClient

    res = workflow_run["results"]
    client = MlflowClient(tracking_uri=f"sqlite:///{res.resolve() / 'mlflow.db'}")
    records = [json.loads(p.read_text()) for p in sorted((res / "runs").rglob("record.json"))]
    assert len(records) == 11  # 3 trained, majority, ngram, toy, 5 rule references
    for rec in records:
        if rec["model"] == "toy":
            assert rec["mlflow_run_id"] is None
            continue
        run = client.get_run(rec["mlflow_run_id"])
        assert run.info.status == "FINISHED"
        assert run.data.metrics["test_accuracy"] == pytest.approx(rec["test_accuracy"])
        assert run.data.tags["model"] == rec["model"]
    # one experiment per profile and task: external baselines beside the trained models
    experiments = {rec["task"]: set() for rec in records}
    for rec in records:
        if rec["mlflow_run_id"]:
            experiments[rec["task"]].add(client.get_experiment(
                client.get_run(rec["mlflow_run_id"]).info.experiment_id).name)
    assert all(len(names) == 1 for names in experiments.values()), experiments
    check = pl.read_csv(res / "tables" / "mlflow_check.csv")
    assert sorted(check["status"].to_list()) == ["no mlflow"] + ["ok"] * 10
    # every run logged its data; every training run its model; the suite is one run
    logged = [r for r in records if r["mlflow_run_id"]]
    for rec in logged:
        run = client.get_run(rec["mlflow_run_id"])
        assert [d.dataset.name for d in run.inputs.dataset_inputs] == [rec["task"]], rec["model"]
    trained = {r["mlflow_run_id"] for r in logged if r["model"] in ("mha", "hkt")}
    exp_ids = [client.get_experiment_by_name("hkt-smoke-listops").experiment_id]
    assert {m.source_run_id for m in client.search_logged_models(exp_ids)} == trained
    suite = client.search_runs([client.get_experiment_by_name("hkt-suite-none").experiment_id])
    assert len(suite) == 1 and suite[0].data.tags["hkt.kind"] == "suite"
    assert "listops_T512.hkt_minus_mha_pp" in suite[0].data.metrics
    assert all(client.get_run(r["mlflow_run_id"]).data.tags["hkt.suite_run_id"]
               == suite[0].info.run_id for r in logged)


def test_up_to_date_tree_does_nothing(workflow_run):
    w = workflow_run
    r = snakemake("-n", "--configfile", str(w["cfg"]), cwd=w["work"], snakefile=w["snakefile"])
    assert r.returncode == 0
    assert "Nothing to be done" in r.stdout + r.stderr


def test_editing_one_model_config_reruns_only_its_jobs(workflow_run):
    w = workflow_run
    path = w["repo"] / "config" / "model" / "hkt.yaml"
    text = path.read_text()
    path.write_text(text + "dropout: 0.2\n")  # the file only selects/overrides the dataclass
    try:
        r = snakemake("-n", "--configfile", str(w["cfg"]), cwd=w["work"], snakefile=w["snakefile"])
    finally:
        path.write_text(text)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    stats = job_stats(out)
    assert stats["train"] == 2  # hkt main and hkt levels1; not mha
    assert "runs/listops/hkt/main/seed0/record.json" in out
    assert f"output: {RESULTS}/runs/listops/mha" not in out
    assert "prepare" not in stats and "external" not in stats


def test_adding_an_external_baseline_reruns_only_what_reads_its_record(workflow_run, tmp_path):
    """A new baseline adds its job, the MLflow audit and the aggregate; the benchmark, which
    only waits for the records, stays (it reran for every new record before)."""
    w = workflow_run
    cfg = yaml.safe_load(w["cfg"].read_text())
    cfg["external"]["toy2"] = {**cfg["external"]["toy"]}
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump(cfg))
    r = snakemake("-n", "--configfile", str(more), cwd=w["work"], snakefile=w["snakefile"])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    stats = job_stats(out)
    assert stats.get("external") == 1 and "runs/listops/toy2/main/seed0/record.json" in out
    assert "bench_attention" not in stats and "train" not in stats and "analyze" not in stats
    assert stats.get("aggregate") == 1


def test_the_report_command_summary_md_prints_builds_the_report_as_printed(workflow_run):
    """Issue 64: the command summary.md prints, run as printed where the workflow ran (the venv's
    Snakemake, its Snakefile and config), builds report.html, with the captions; it writes into
    no other results directory (nor times anything: no plan/ written anywhere)."""
    w = workflow_run
    summary = (w["results"] / "summary.md").read_text()
    (printed,) = re.findall(r"^- Report: .*?`([^`]+)`, run where the workflow ran", summary, re.M)
    words = shlex.split(printed)
    assert words[0] == "snakemake"  # the venv lies outside the work dir: by name, on PATH
    assert words[1:3] == ["--report", f"{RESULTS}/report.html"]
    before = sorted(p.name for p in w["work"].iterdir())
    plan_files = sorted(str(p) for p in w["work"].rglob("plan/*"))
    env = user_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    r = subprocess.run(words, cwd=w["work"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert sorted(p.name for p in w["work"].iterdir()) == before
    assert sorted(str(p) for p in w["work"].rglob("plan/*")) == plan_files
    html = (w["results"] / "report.html").read_text()
    for caption in ("Main table.", "Ablations", "Accuracy vs pyramid levels", "MLflow audit"):
        assert caption in html
    assert "['" not in html.split("This run:", 1)[-1][:400]  # lists read as lists, not Python


def test_the_workflow_runs_a_suite_of_mha_only_with_analyses(workflow_run, tmp_path):
    """The issue's replay: `main.models: [mha]` with analyses on declared tables/truncation.*,
    which only HKT runs produce, and Snakemake deleted every aggregate output.

    Run on a copy of the finished suite above (MHA and HKT, the same data and
    budget): its data, MHA run and MHA analysis are up to date for this suite too, so what runs
    is what the replay is about, the aggregate of an MHA-only suite (and the majority baseline,
    whose command names the copy's store)."""
    cfg = {**CONFIG, "main": {"tasks": ["listops"], "models": ["mha"]},
           "ablation": {"enabled": False}, "bench": {"enabled": False},
           "external": {"majority": {"enabled": True, "seeds": [0]},
                        "ngram": {"enabled": False}}}
    path = tmp_path / "mha-only.yaml"
    path.write_text(yaml.safe_dump(cfg))
    work = tmp_path / "work"
    shutil.copytree(workflow_run["work"], work, symlinks=True)
    r = snakemake("--cores", "2", "--configfile", str(path), cwd=work,
                  snakefile=workflow_run["snakefile"], timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert job_stats(out)["aggregate"] == 1  # the aggregate of this suite wrote what is checked
    res = work / RESULTS
    truncation = (res / "tables" / "truncation.md").read_text()
    assert "Empty: level truncation applies to HKT only, and no HKT run was analysed." in truncation
    assert files_under(res / "tables") | files_under(res / "figures") | {res / "summary.md"} >= \
        set(aggregate_files(res, analyses=True))


def test_a_results_directory_of_before_0_2_0_is_up_to_date_once_migrated(workflow_run):
    """What Snakemake recorded of the training jobs before 0.2.0 (the overrides spelt with
    `experiment=` and `tracking.suite=`, the digest of the old key names) reruns every training
    job; scripts/migrate_results.py makes the tree up to date again, with nothing rerun."""
    import ast

    w = workflow_run
    meta = w["work"] / ".snakemake" / "metadata"
    migrate = load_script("migrate_results")
    old_names = {"variant": "experiment", "model.mixer": "model.attention",
                 "model.mixer_dropout": "model.attn_dropout"}

    def old_spelling(words: list[str]) -> list[str]:
        out = []
        for word in words:
            key, eq, value = word.partition("=")
            key = next((o + key[len(n):] for n, o in old_names.items()
                        if key == n or key.startswith(n + ".")), key)
            out.append(f"{key}{eq}{value}")
            if key == "experiment":
                out.append("tracking.suite=custom")  # no suite, as the workflow named it then
        return out

    saved = {}
    try:
        for f in (p for p in meta.rglob("*") if p.is_file()):
            data = json.loads(f.read_text())
            if data.get("rule") != "train":
                continue
            saved[f] = f.read_text()
            values = [ast.literal_eval(p) for p in data["params"]]
            words = next(v for v in values if isinstance(v, list))
            digest = migrate._digests(tuple(x for x in words if not x.startswith("seed=")))[1]
            old = [v for v in values if not isinstance(v, list) and v != "none"
                   and not (isinstance(v, str) and len(v) == 32 and v.isalnum())]
            data["params"] = sorted(map(repr, [*old, old_spelling(words), digest]))
            f.write_text(json.dumps(data))
        assert len(saved) >= 3
        r = snakemake("-n", "--configfile", str(w["cfg"]), cwd=w["work"], snakefile=w["snakefile"])
        assert job_stats(r.stdout + r.stderr)["train"] == len(saved), (r.stdout + r.stderr)[-3000:]
        assert migrate.main([str(w["results"]), "--snakemake-dir", str(w["work"])]) == 0
        r = snakemake("-n", "--configfile", str(w["cfg"]), cwd=w["work"], snakefile=w["snakefile"])
        assert "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    finally:
        for f, text in saved.items():
            f.write_text(text)
