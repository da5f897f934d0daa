"""MLflow tracking: store location, retries on a locked SQLite store, concurrent writers."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from hkt.mlflow_store import TrackingError, default_tracking_uri, with_retry
from hkt.train.tracking import tracking_uri


def test_default_store_is_sqlite_under_results_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # else the store is the variable's
    assert default_tracking_uri(tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert tracking_uri({"uri": None, "results_dir": str(tmp_path)}) == default_tracking_uri(tmp_path)
    assert tracking_uri({"uri": "http://127.0.0.1:5000", "results_dir": "x"}) == "http://127.0.0.1:5000"


def test_retry_on_database_locked_then_success():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return "ok"

    assert with_retry(flaky, base_delay=0.001) == "ok" and len(calls) == 3


def test_retry_wraps_cause_and_gives_up():
    def locked():
        try:
            raise sqlite3.OperationalError("database is locked")
        except sqlite3.OperationalError as exc:
            raise RuntimeError("store call failed") from exc

    with pytest.raises(TrackingError, match="database is locked"):
        with_retry(locked, attempts=3, base_delay=0.001)


def test_no_retry_starts_later_than_within_s_after_the_first_call(monkeypatch):
    """A server that refuses connections while training: retried with backoff, but no retry
    begins more than ``within_s`` after the first call (a fake clock: each sleep advances it)."""
    import hkt.mlflow_store

    class Clock:
        now = 0.0

        def monotonic(self):
            return self.now

        def sleep(self, s):
            self.now += s

    clock = Clock()
    monkeypatch.setattr(hkt.mlflow_store, "time", clock)
    starts = []

    def refused():
        starts.append(clock.now)
        raise ConnectionError("[Errno 111] Connection refused")

    with pytest.raises(TrackingError, match=r"after \d+ attempts: \[Errno 111\] Connection refused"):
        with_retry(refused, base_delay=0.1, max_delay=1.0, within_s=2.0)
    assert len(starts) > 2 and max(starts) <= 2.0  # retried, never after the bound
    starts.clear()
    with pytest.raises(TrackingError, match="after 12 attempts"):  # without it: the full policy
        with_retry(refused, base_delay=0.1, max_delay=1.0)
    assert len(starts) == 12


def test_other_errors_are_not_retried():
    calls = []

    def bad():
        calls.append(1)
        raise ValueError("RESOURCE_DOES_NOT_EXIST: run 'a503' not found")

    with pytest.raises(ValueError):
        with_retry(bad, base_delay=0.001)
    assert len(calls) == 1


WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from hkt.mlflow_store import RETRIES
    from hkt.train.tracking import Tracker
    uri, i, n, barrier = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    barrier.joinpath(f"ready{i}").touch()
    while len(list(barrier.glob("ready*"))) < 4:   # start together on a fresh store
        time.sleep(0.01)
    t = Tracker(uri, "concurrency", f"worker-{i}", flush_every=1)
    t.start(params={f"p{k}": k for k in range(30)}, tags={"worker": str(i)})
    for step in range(1, n + 1):
        t.log_metrics({"train_loss": 1.0 / step, "lr": i + step / 1000}, step)  # one write each
    art = barrier / f"artifact{i}.txt"
    art.write_text(f"worker {i}")
    t.log_artifact(art)
    t.log_final({"test_accuracy": i / 10}, n)
    t.finish()
    print(t.run_id)
    print(f"retries {RETRIES['count']}", file=sys.stderr)
""")


@pytest.mark.slow
def test_four_concurrent_processes_lose_nothing(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    n = 25
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, uri, str(i), str(n), str(barrier)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(4)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    run_ids = {out.strip().splitlines()[-1] for out, _ in results}
    retries = sum(int(err.rsplit("retries ", 1)[-1].split()[0]) for _, err in results)
    print(f"{retries} transient store errors retried")
    assert len(run_ids) == 4

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("concurrency")
    runs = client.search_runs([exp.experiment_id])
    assert {r.info.run_id for r in runs} == run_ids
    for r in runs:
        i = int(r.data.tags["worker"])
        assert r.info.status == "FINISHED" and r.info.run_name == f"worker-{i}"
        assert len(r.data.params) == 30
        for key in ("train_loss", "lr"):
            hist = client.get_metric_history(r.info.run_id, key)
            assert sorted(m.step for m in hist) == list(range(1, n + 1))
        assert r.data.metrics["test_accuracy"] == pytest.approx(i / 10)
        assert [a.path for a in client.list_artifacts(r.info.run_id)] == [f"artifact{i}.txt",
                                                                          "environment.json"]


def test_experiments_open_on_their_runs_in_the_mlflow_ui(tmp_path):
    """MLflow 3 shows an experiment without `mlflow.experimentKind` in GenAI mode (traces)."""
    from mlflow.tracking import MlflowClient

    from hkt.train.tracking import Tracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    old = client.create_experiment(  # no kind tag yet; artifacts in tmp, not in the cwd's mlruns/
        "made-by-an-older-version", artifact_location=(tmp_path / "artifacts").as_uri())
    for name in ("fresh", "made-by-an-older-version"):
        t = Tracker(uri, name, "run")
        t.start()
        t.finish()
        exp = client.get_experiment_by_name(name)
        assert exp.tags.get("mlflow.experimentKind") == "custom_model_development", name
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_store_we_create_lists_only_the_experiments_runs_went_to(tmp_path, monkeypatch):
    """MLflow's schema makes an empty `Default` experiment (id 0) in every new store: one that
    hkt creates has it deleted, and it stays so; runs are still created and found. Each
    experiment holds the runs list's comparison view, as MLflow's UI reads a shared view."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from hkt.mlflow_store import DEFAULT_EXPERIMENT_ID, open_client
    from hkt.train.run_metadata import COMPARISON_VIEW
    from hkt.train.tracking import Tracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert open_client(uri).search_experiments() == []
    t = Tracker(uri, "hkt-smoke-listops", "listops-mha-main-s0")
    t.start()
    t.log_final({"test_accuracy": 0.5}, 12)
    t.finish()
    client = MlflowClient(uri)  # a new client: MLflow makes experiment 0 only where none is
    assert [e.name for e in client.search_experiments()] == ["hkt-smoke-listops"]
    assert client.get_experiment(DEFAULT_EXPERIMENT_ID).lifecycle_stage == "deleted"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    found = mlflow.search_runs(search_all_experiments=True)
    assert found["tags.mlflow.runName"].tolist() == ["listops-mha-main-s0"]
    assert found["metrics.test_accuracy"].tolist() == [0.5]
    assert mlflow.search_runs().empty  # the deleted Default's, as MLflow searches by default
    with pytest.raises(Exception, match="experiment 0 must be in the 'active' state"):
        mlflow.start_run()  # docs/tracking.md: choose an experiment first
    # (an experiment chosen by id: mlflow.set_experiment would stay set for later tests)
    mine = client.create_experiment("by-hand", artifact_location=(tmp_path / "art").as_uri())
    with mlflow.start_run(experiment_id=mine):
        mlflow.log_metric("x", 1.0)
    assert len(mlflow.search_runs(experiment_names=["by-hand"])) == 1

    view = json.loads(client.get_experiment(t.experiment_id).tags[
        f"mlflow.sharedViewState.{COMPARISON_VIEW['key']}"])
    assert {"attributes.`Models`", "metrics.`test_accuracy`", "tags.`best_val_accuracy`",
            "metrics.`best_step`"} <= set(view["selectedColumns"])
    assert view["orderByKey"] == "metrics.`test_accuracy`" and view["orderByAsc"] is False


def test_an_experiment_another_job_creates_meanwhile_is_used(tmp_path):
    """Jobs that start together on a tracking server all find no experiment, then all create it:
    the ones that lose the race use the winner's (found by the cluster test on a real server)."""
    from mlflow.tracking import MlflowClient

    from hkt.train.tracking import Tracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    other = MlflowClient(uri).create_experiment(  # the other job's, made after our lookup
        "shared", artifact_location=(tmp_path / "artifacts").as_uri())
    t = Tracker(uri, "shared", "run")
    lookups = []
    real = t.client.get_experiment_by_name

    def late(name):  # our first lookup ran before the other job's create
        lookups.append(name)
        return None if len(lookups) == 1 else real(name)

    t.client.get_experiment_by_name = late
    t.start()
    t.finish()
    assert t.experiment_id == other and len(lookups) == 2


def test_external_commands_and_hkt_train_share_the_experiment_name():
    """Baselines outside `hkt train` learn the experiment from experiment_name (the workflow
    exports it as $HKT_MLFLOW_EXPERIMENT): the name config/train.yaml composes."""
    from hkt.train.run_config import load_config
    from hkt.mlflow_store import experiment_name

    cfg = load_config(["task=listops", "model=mha", "profile=smoke"])
    assert cfg.tracking.experiment == experiment_name("smoke", "listops") == "hkt-smoke-listops"


def test_run_duration_starts_when_the_session_started(tmp_path):
    """MLflow's Duration is end - start: a run started at the session start spans the setup."""
    import time

    from mlflow.tracking import MlflowClient

    from hkt.train.tracking import Tracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    began = time.time() - 30.0  # data loading and model building took 30 s before start()
    t = Tracker(uri, "e", "run")
    t.start(start_time=began)
    t.finish()
    info = MlflowClient(uri).get_run(t.run_id).info
    assert info.start_time == int(began * 1000)
    assert (info.end_time - info.start_time) / 1000 >= 30.0


def test_params_and_tags_describe_the_data_actually_used():
    """task.prepare.* come from the data's metadata (what `hkt prepare` did), not the task
    config's defaults; data from an alternative archive tags the run with a warning."""
    from hkt.train.run_metadata import data_tags, run_params

    cfg = {"task": {"family": "listops", "prepare": {"splits": {"train": 96000}, "seed": 0}},
           "tracking": {"uri": "x"}, "seed": 1}
    params = run_params(cfg, 10, {"splits": {"train": 2000, "val": 50}})
    assert params["task.prepare.splits.train"] == 2000 and params["task.prepare.splits.val"] == 50
    assert "task.prepare.seed" not in params  # the config's, not the data's
    assert run_params(cfg, 10)["task.prepare.splits.train"] == 96000  # no metadata: the config
    alt = {"task": "imdb", "task_config": "imdb",
           "source": {"file": "aclImdb_mirror.tar.gz", "official": False, "sha256": "ab" * 32}}
    tags = data_tags(alt)
    assert tags["data_official"] == "false"
    assert "aclImdb_mirror.tar.gz" in tags["data_warning"] and "ab" * 32 in tags["data_warning"]
    assert data_tags({"source": {"file": "x.tar.gz", "official": True}}) == {"data_official": "true"}
    assert data_tags({"source": {"generator": "lra"}}) == {}


def test_two_runs_creating_one_dataset_at_once_both_log_it(tmp_path):
    """The loser of the race to create a dataset's row (two jobs side by side on one server) gets
    the store's unique-key error once; its retry finds the row and logs the input."""
    from hkt.train.tracking import log_dataset

    calls = []

    class Client:
        def log_inputs(self, run_id, datasets):
            calls.append(run_id)
            if len(calls) == 1:
                raise RuntimeError("BAD_REQUEST: (sqlite3.IntegrityError) UNIQUE constraint "
                                   "failed: datasets.experiment_id, datasets.name, datasets.digest")

    log_dataset(Client(), "run1", "listops", tmp_path, {"train": "ab" * 32}, {"train": 10})
    assert calls == ["run1", "run1"]

    class Broken:
        def log_inputs(self, run_id, datasets):
            raise RuntimeError("UNIQUE constraint failed: runs.run_uuid")  # not the race

    with pytest.raises(RuntimeError, match="runs.run_uuid"):
        log_dataset(Broken(), "run1", "listops", tmp_path, {"train": "ab" * 32}, None)


def test_a_run_learns_its_suite_from_the_environment_only(tmp_path, monkeypatch):
    """$HKT_SUITE is the one channel (hkt.provenance.SUITE_ENV); the Hydra key that was another
    is refused, saying what replaced it; unset, a run is of no suite (the one stand-in)."""
    from hkt.errors import ConfigError
    from hkt.provenance import NO_SUITE, SuiteRun
    from hkt.train.run_config import load_config
    from hkt.train.run_metadata import suite_run

    cfg = load_config(["profile=smoke", f"tracking.results_dir={tmp_path}"])
    assert "suite" not in cfg.tracking
    monkeypatch.setenv("HKT_SUITE", "quick")
    assert suite_run(cfg.tracking) == SuiteRun("quick", str(tmp_path.resolve()))
    monkeypatch.delenv("HKT_SUITE")
    assert suite_run(cfg.tracking).suite == NO_SUITE
    with pytest.raises(ConfigError, match=r"'tracking.suite=cpu': a run learns its suite from "
                                          r"\$HKT_SUITE.*HKT_SUITE=NAME hkt train"):
        load_config(["tracking.suite=cpu"])
