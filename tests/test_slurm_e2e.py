"""The workflow on a real one-node SLURM cluster (scripts/slurm-local.sh) with every run on a real
MLflow tracking server (`mlflow server` on 127.0.0.1), through workflow/executors/slurm-local.

- The smoke workflow (ListOps: MHA, HKT, the baselines, HKT's analysis): every job that is not a
  local rule ran as a SLURM job; every run, its metrics and its artifacts are on the server,
  baselines included; `hkt aggregate --mlflow` rebuilds the tables the records give.
- A training job cancelled with `scancel` mid-run is resubmitted by Snakemake's retry, resumes
  from its checkpoint and ends with the record of an uninterrupted run.

- `scripts/slurm-local.sh up` replaces the /etc/slurm link a cluster killed before `down` left,
  and refuses one whose cluster still runs.

The cluster: one already up, else one these tests start and stop (as root, with slurm-wlm and
munge installed: `.ci/run` installs them), else the tests skip and say how to get one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest
import torch
import yaml

from conftest import mlflow_server
from hkt.rule_references import RULE_REFERENCES
from test_workflow import ROOT, job_stats, snakemake_cmd, user_env
from test_workflow_e2e import CONFIG as E2E_CONFIG

pytestmark = pytest.mark.slow

CLUSTER = ROOT / "scripts" / "slurm-local.sh"
PROFILE = ROOT / "workflow" / "executors" / "slurm-local"
SUBMITTER = Path(__file__).parent / "slurm_snakemake.py"  # Snakemake, checking jobs each second
LOCAL_RULES = {"all", "aggregate", "check_mlflow", "bench_queue"}  # workflow/Snakefile `localrules`

# The small smoke workflow of test_workflow_e2e (ListOps: MHA, HKT, the two shipped baselines),
# without its ablation, its toy baseline and the benchmark; only HKT analysed. Tiny requests:
# the one-node cluster runs the jobs side by side.
SMOKE = {
    **E2E_CONFIG,
    "results_dir": "results",
    "suite": "slurmtest",
    "ablation": {"enabled": False},
    "external": {**{k: v for k, v in E2E_CONFIG["external"].items() if k != "toy"},
                 **{k: {"enabled": False} for k in RULE_REFERENCES}},  # the shipped two only
    "analyze": {**E2E_CONFIG["analyze"], "models": ["hkt"],
                "args": ["examples=8", "truncation_examples=16", "approximation_examples=2"]},
    "bench": {"enabled": False},
    # the one-node cluster has no GPU: its GPU rules run on CPUs, said as docs/clusters.md says
    # (left unset, a cluster run whose rules ask for GPUs, none in view, is refused)
    "node": {"gpus": 0},
    "resources": {rule: {"threads": 1, "mem_mb": 1000, "runtime": 10}
                  for rule in ("prepare", "train", "external", "analyze", "bench", "aggregate")},
}
# What differs between tables built from records and from MLflow by nature: where a run was read
# (hkt/report/mlflow_runs.py says why). Every other column of every table must agree.
BY_NATURE = {"source"}


# --- the cluster and the server ---------------------------------------------------------------

def _cluster(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CLUSTER), *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A running one-node cluster: the one already up, or one started (and stopped) here, in
    $HKT_SLURM_DIR where set (.ci/run sets it, to stop what a killed run leaves)."""
    if _cluster("status").returncode == 0:
        yield None
        return
    if not shutil.which("slurmctld") or not shutil.which("munged"):
        pytest.skip("Slurm is not installed: `sudo scripts/slurm-local.sh install` (Debian/Ubuntu; "
                    ".ci/run installs it) gives the one-node cluster these tests run on")
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm cluster needs root (slurmd runs jobs as their user): "
                    "`sudo scripts/slurm-local.sh up`, then run the tests")
    env = {**os.environ,
           "HKT_SLURM_DIR": os.environ.get("HKT_SLURM_DIR") or str(tmp_path_factory.mktemp("slurm"))}
    try:
        up = _cluster("up", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        yield env["HKT_SLURM_DIR"]
    finally:
        _cluster("down", env=env)


ETC_CONF = Path("/etc/slurm/slurm.conf")  # the link `up` makes (scripts/slurm-local.sh says why)


def _dead_pid() -> int:
    """The PID of a process that has ended (as a killed cluster's PID files hold)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_up_replaces_the_link_of_a_killed_cluster_and_refuses_a_running_ones(tmp_path):
    """A cluster killed before `down` (a CI run ended mid-way) leaves /etc/slurm/slurm.conf
    linked to its directory: the next `up` takes the link over. A link to a cluster whose
    daemons still run is refused, untouched, with the command that stops that cluster."""
    if not shutil.which("slurmctld") or not shutil.which("munged"):
        pytest.skip("Slurm is not installed: `sudo scripts/slurm-local.sh install`")
    if os.geteuid() != 0:
        pytest.skip("`up` needs root")
    if _cluster("status").returncode == 0:
        pytest.skip("a one-node cluster is up: this test would have to unlink its config")
    if ETC_CONF.exists() and not ETC_CONF.is_symlink():
        pytest.skip(f"{ETC_CONF} is this machine's own Slurm configuration")
    before = os.readlink(ETC_CONF) if ETC_CONF.is_symlink() else None
    killed, running, ours = tmp_path / "killed", tmp_path / "running", tmp_path / "ours"
    for cluster, pid in ((killed, _dead_pid()), (running, os.getpid())):
        (cluster / "munge").mkdir(parents=True)
        (cluster / "slurm.conf").write_text("# a cluster's config\n")
        (cluster / "slurmctld.pid").write_text(f"{pid}\n")
    env = {**os.environ, "HKT_SLURM_DIR": str(ours)}
    ETC_CONF.parent.mkdir(parents=True, exist_ok=True)
    try:
        ETC_CONF.unlink(missing_ok=True)
        ETC_CONF.symlink_to(running / "slurm.conf")
        refused = _cluster("up", env=env)
        assert refused.returncode == 1
        assert (f"{ETC_CONF} links to {running}/slurm.conf, another one-node cluster, still "
                f"running: stop it first (HKT_SLURM_DIR={running} scripts/slurm-local.sh down)"
                in refused.stderr)
        assert os.readlink(ETC_CONF) == str(running / "slurm.conf")
        assert not ours.exists()

        ETC_CONF.unlink()
        ETC_CONF.symlink_to(killed / "slurm.conf")
        up = _cluster("up", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"linked to {killed}, a cluster no longer running" in up.stderr
        assert os.readlink(ETC_CONF) == str(ours / "slurm.conf")
        assert _cluster("status", env=env).returncode == 0
        assert (killed / "slurm.conf").exists()  # its directory is left, for its logs
    finally:
        _cluster("down", env=env)
        if ETC_CONF.is_symlink() and os.readlink(ETC_CONF).startswith(str(tmp_path)):
            ETC_CONF.unlink()
        if before is not None and not ETC_CONF.is_symlink():
            ETC_CONF.symlink_to(before)
    assert not ETC_CONF.is_symlink() or os.readlink(ETC_CONF) == before


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """A fresh `mlflow server` on 127.0.0.1 (SQLite, its own artifact store), stopped by PID."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as (uri, _):
        yield uri


def _repo_copy(tmp: Path) -> Path:
    """The workflow and config, copied: the tests never write into the repository."""
    repo = tmp / "repo"
    for part in ("workflow", "config"):
        shutil.copytree(ROOT / part, repo / part)
    shutil.copy(ROOT / "environment.yml", repo)
    return repo


def _slurm_cmd(*args: str, repo: Path, work: Path, uri: str) -> list[str]:
    """Snakemake on the cluster through the profile, as a user runs it, but for the seconds
    between its status checks (tests/slurm_snakemake.py says why)."""
    return snakemake_cmd(*args, "--profile", str(PROFILE), "--config", f"tracking_uri={uri}",
                         cwd=work, snakefile=repo / "workflow" / "Snakefile",
                         program=(str(SUBMITTER),))


def _on_slurm(*args: str, repo: Path, work: Path, uri: str,
              timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(_slurm_cmd(*args, repo=repo, work=work, uri=uri), capture_output=True,
                          text=True, timeout=timeout, env=user_env())


def _submitted(output: str) -> dict[str, list[str]]:
    """rule -> SLURM job ids, from the plugin's 'submitted with SLURM jobid N (log: …)' lines."""
    jobs: dict[str, list[str]] = {}
    for jobid, log in re.findall(r"submitted with SLURM jobid (\d+) \(log: ([^)]*)\)", output):
        rule = re.search(r"/rule_(\w+?)/", log).group(1)
        jobs.setdefault(rule, []).append(jobid)
    return jobs


# --- the smoke workflow on SLURM, tracked on the server -----------------------------------------

@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tracking_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm-smoke")
    repo, work = _repo_copy(tmp), tmp / "work"
    work.mkdir()
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump(SMOKE))
    t0 = time.monotonic()
    r = _on_slurm("--configfile", str(cfg), repo=repo, work=work, uri=tracking_server)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    return {"output": out, "results": work / "results", "work": work, "uri": tracking_server,
            "seconds": time.monotonic() - t0}


def test_every_job_but_the_local_rules_ran_as_a_slurm_job(slurm_run):
    stats = job_stats(slurm_run["output"])
    remote = {rule: n for rule, n in stats.items() if rule != "total" and rule not in LOCAL_RULES}
    assert remote == {"prepare": 1, "train": 2, "external": 2, "analyze": 1}
    submitted = _submitted(slurm_run["output"])
    assert {rule: len(ids) for rule, ids in submitted.items()} == remote
    ids = [i for v in submitted.values() for i in v]
    assert len(set(ids)) == len(ids)
    for rule, jobids in submitted.items():  # each left its SLURM log (slurm-keep-successful-logs)
        logs = {p.stem for p in (slurm_run["work"] / ".snakemake" / "slurm_logs").rglob("*.log")
                if f"rule_{rule}" in str(p)}
        assert set(jobids) <= logs, (rule, jobids, logs)


def test_every_run_metric_and_artifact_is_on_the_server(slurm_run):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=slurm_run["uri"])
    records = sorted((slurm_run["results"] / "runs").rglob("record.json"))
    models = set()
    for path in records:
        rec = json.loads(path.read_text())
        models.add(rec["model"])
        assert rec["mlflow_tracking_uri"] == slurm_run["uri"], path
        run = client.get_run(rec["mlflow_run_id"])
        assert run.info.status == "FINISHED", path
        assert run.data.metrics["test_accuracy"] == pytest.approx(rec["test_accuracy"])
        assert float(run.data.tags["best_val_accuracy"]) == pytest.approx(rec["val_accuracy"])
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "record.json" in artifacts, (path, artifacts)
        served = json.loads(Path(client.download_artifacts(
            run.info.run_id, "record.json", dst_path=str(path.parent.parent / "dl"))).read_text())
        assert served["test_accuracy"] == rec["test_accuracy"]
        if rec["model"] in {"mha", "hkt"}:  # trained runs: their curves and checkpoint record
            assert len(client.get_metric_history(run.info.run_id, "val_accuracy")) >= 1
            assert {"environment.json", "history.csv"} <= artifacts, artifacts
    assert models == {"mha", "hkt", "ngram", "majority"}
    check = pl.read_csv(slurm_run["results"] / "tables" / "mlflow_check.csv")
    assert check.height == len(records) and set(check["status"]) == {"ok"}


def test_aggregate_from_the_server_rebuilds_the_record_tables(slurm_run, tmp_path):
    out = tmp_path / "from-mlflow"
    r = subprocess.run([sys.executable, "-m", "hkt.cli.main", "aggregate", "--mlflow", slurm_run["uri"],
                        "--results-dir", str(slurm_run["results"]), "--out", str(out),
                        "--main-variant", "main", "--ablation-task", "listops",
                        "--ablation-length", "512"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ours = slurm_run["results"] / "tables"
    compared = 0
    for table in sorted((out / "tables").glob("*.csv")):
        theirs = pl.read_csv(table)
        records = pl.read_csv(ours / table.name)
        # `--mlflow` reads no predictions (docs/per-example.md): its "+ test set" intervals
        # (ts_*) are the unpaired ones, where the records' own are paired over the examples, and
        # the learning-rate gap's paired columns (paired_*) say why it has none
        paired = ("ts_", "paired_")
        keep = [c for c in records.columns if c not in BY_NATURE and not c.startswith(paired)]
        assert {c for c in theirs.columns if not c.startswith(paired)} - BY_NATURE == set(keep), \
            table.name
        assert theirs.select(keep).equals(records.select(keep)), (
            f"{table.name}:\n{theirs.select(keep)}\n{records.select(keep)}")
        compared += 1
    assert compared >= 4  # main, gap, ablation, runs at least


# --- a training job stopped on the cluster: resubmitted, it resumes to the uninterrupted record --

TARGET = "results/runs/listops/mha/main/seed0/record.json"
SLOW_STEPS = Path(__file__).parent / "slow_steps"  # its sitecustomize: each step sleeps first


def _checkpoint_step(path: Path) -> int:
    try:
        return int(torch.load(path, weights_only=True)["step"])
    except Exception:  # noqa: BLE001 - absent, or replaced while we read it
        return -1


@contextmanager
def _training_job(tmp_path: Path, uri: str, budget: list[str], *, runtime: int = 10,
                  env: dict | None = None) -> Iterator[dict]:
    """The MLflow-tracked MHA ListOps job of ``budget`` (train overrides) submitted to the
    cluster (``runtime``: its time limit in minutes; ``env``: the submitting Snakemake's), and
    beside it the same job run locally, uninterrupted: it shares nothing with the cluster's run
    (its own directory, store and data) and takes no time of the test's own. Yields ``proc``
    and ``reference`` (the two Snakemake processes), ``console`` (the first's output),
    ``run_dir``, ``ref_dir`` and ``log`` (the job's); at the end, what still runs is killed and
    the partition's jobs are cancelled. The caller stops the job and waits for both."""
    cfg = {**SMOKE, "train_overrides": budget, "main": {"tasks": ["listops"], "models": ["mha"]},
           "external": {}, "analyze": {"enabled": False},
           "resources": {**SMOKE["resources"],
                         "train": {"threads": 1, "mem_mb": 1000, "runtime": runtime}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    repo = _repo_copy(tmp_path)
    configfile = ["--configfile", str(tmp_path / "config.yaml")]
    work, ref = tmp_path / "work", tmp_path / "ref"  # on the cluster; the same job run locally
    work.mkdir()
    ref.mkdir()
    job = {"console": tmp_path / "snakemake.log", "ref_console": tmp_path / "reference.log",
           "run_dir": work / TARGET.replace("/record.json", ""),
           "ref_dir": ref / TARGET.replace("/record.json", ""),
           "log": work / "results" / "logs" / "train" / "listops" / "mha" / "main" / "seed0.log"}
    with open(job["console"], "w") as sink, open(job["ref_console"], "w") as ref_sink:
        job["reference"] = subprocess.Popen(
            snakemake_cmd(TARGET, "--cores", "2", "--config",
                          "tracking_uri=sqlite:///" + str(ref / "m.db"), *configfile,
                          cwd=ref, snakefile=repo / "workflow" / "Snakefile"),
            stdout=ref_sink, stderr=subprocess.STDOUT, text=True, env=user_env())
        job["proc"] = subprocess.Popen(
            _slurm_cmd(TARGET, *configfile, repo=repo, work=work, uri=uri),
            stdout=sink, stderr=subprocess.STDOUT, text=True, env=env or user_env())
        try:
            yield job
        finally:
            for p in (job["proc"], job["reference"]):
                if p.poll() is None:
                    p.kill()
                    p.wait()
            subprocess.run(["scancel", "--quiet", "--partition", "hkt"], capture_output=True)


def _running_job_at(job: dict, step: int, deadline: float) -> str:
    """The cluster's one running job, once the run has a checkpoint of ``step`` or later."""
    while _checkpoint_step(job["run_dir"] / "checkpoints" / "last.pt") < step:
        assert job["proc"].poll() is None, job["console"].read_text()[-4000:]
        assert time.monotonic() < deadline, f"no checkpoint at step {step} in time"
        time.sleep(0.05)
    jobs = subprocess.run(["squeue", "-h", "-p", "hkt", "-t", "RUNNING", "-o", "%i"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert len(jobs) == 1, jobs
    return jobs[0]


def _resubmitted_to_the_uninterrupted_record(job: dict, stopped: str) -> str:
    """Check that the cluster's run ended, its job ``stopped`` resubmitted once, with the
    record and losses of the uninterrupted reference; return the job's log."""
    out = job["console"].read_text()
    assert job["proc"].returncode == 0, out[-6000:]
    submitted = _submitted(out)["train"]
    assert len(submitted) == 2 and stopped == submitted[0], out[-4000:]  # the retry
    assert job["reference"].returncode == 0, job["ref_console"].read_text()[-4000:]
    got = json.loads((job["run_dir"] / "record.json").read_text())
    want = json.loads((job["ref_dir"] / "record.json").read_text())
    same = ("steps", "best_step", "val_accuracy", "test_accuracy", "val_loss", "test_loss",
            "test_examples", "n_params", "data_checksums")
    assert {k: got[k] for k in same} == {k: want[k] for k in same}
    losses = [pl.read_csv(d / "history.csv")["train_loss"].to_list()
              for d in (job["run_dir"], job["ref_dir"])]
    assert losses[0] == losses[1]
    return job["log"].read_text()


def test_a_cancelled_training_job_resumes_to_the_uninterrupted_record(slurm_cluster,
                                                                      tracking_server, tmp_path):
    budget = ["train.test_batches=2", "train.max_steps=300", "train.checkpoint_every=10",
              "train.eval_every=50", "train.log_every=10"]
    with _training_job(tmp_path, tracking_server, budget) as job:
        deadline = time.monotonic() + 240
        cancelled = _running_job_at(job, 20, deadline)  # early: 20/300
        subprocess.run(["scancel", cancelled], check=True)
        state = ""
        while state != "CANCELLED":  # it really ended cancelled, not finished first
            state = subprocess.run(["squeue", "-h", "-t", "all", "-j", cancelled, "-o", "%T"],
                                   capture_output=True, text=True).stdout.strip()
            assert state in {"RUNNING", "COMPLETING", "CANCELLED"}, state
            assert time.monotonic() < deadline + 60, f"job {cancelled} still {state}"
            time.sleep(0.1)
        job["proc"].wait(timeout=300)
        job["reference"].wait(timeout=300)
    log = _resubmitted_to_the_uninterrupted_record(job, cancelled)
    resumed = re.search(r"resuming from \S+last\.pt at step (\d+)", log)
    assert resumed and 20 <= int(resumed.group(1)) < 300, log[-3000:]
    # Snakemake deleted the log before the retry; it still holds the cancelled attempt
    assert log.count("===== hkt train ") == 2, log[-3000:]


def test_a_training_job_at_its_time_limit_checkpoints_at_the_signal_and_resumes(
        slurm_cluster, tracking_server, tmp_path):
    """Issue 51, 3: the executor settings as shipped (SIGTERM 120 s before the limit, one retry).
    Once training is under way, the job's time limit is cut to one minute (`scontrol update`), so
    Slurm's next check of limits (every 30 s) finds it within 120 s of its end and sends the
    signal: the job writes a checkpoint of its step and stops, the retry resumes from that step,
    and the record is that of the same job run uninterrupted. Each step sleeps 0.05 s
    (tests/slow_steps), so the run lasts longer than the wait for Slurm's check in wall time,
    not in CPU; the reference runs without the sleep."""
    budget = ["train.test_batches=2", "train.max_steps=800", "train.checkpoint_every=50",
              "train.eval_every=400", "train.log_every=50"]
    slow = {**user_env(), "PYTHONPATH": str(SLOW_STEPS), "HKT_TEST_STEP_SLEEP": "0.05"}
    with _training_job(tmp_path, tracking_server, budget, runtime=5, env=slow) as job:
        limited = _running_job_at(job, 50, time.monotonic() + 240)
        subprocess.run(["scontrol", "update", f"JobId={limited}", "TimeLimit=1"], check=True)
        job["proc"].wait(timeout=400)
        job["reference"].wait(timeout=300)
    log = _resubmitted_to_the_uninterrupted_record(job, limited)
    stopped = re.findall(r"hkt: stopped by SIGTERM at step (\d+)/800: checkpoint written at step "
                         r"(\d+) \(\S+last\.pt\); the same command resumes it", log)
    resumed = re.findall(r"resuming from \S+last\.pt at step (\d+)/800", log)
    assert len(stopped) == 1 and len(resumed) == 1, log[-4000:]
    assert int(stopped[0][0]) == int(stopped[0][1]) == int(resumed[0]) > 50  # its own step
