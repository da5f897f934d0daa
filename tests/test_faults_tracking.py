"""Any crash ends the MLflow run as FAILED with an error tag, then propagates (issue 11: 2); a
tracking store that stops answering never stalls training, and what the MLflow run lacks is sent
later, by the resumed run or by the same command once the run is finished (issue 51: 1)."""

from __future__ import annotations

import json

import pytest
import torch.nn.functional as F
from mlflow.tracking import MlflowClient

from conftest import write_prepared_data
from hkt.cli.main import main


def test_a_crash_that_is_not_an_hkt_error_fails_the_mlflow_run(tmp_path, isolated_results, monkeypatch):
    data = write_prepared_data(tmp_path / "data", "listops")
    calls = {"n": 0}
    real = F.cross_entropy

    def crash_on_third_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated CUDA error: an illegal memory access")
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "cross_entropy", crash_on_third_step)
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="illegal memory access"):  # re-raised, not swallowed
        main(["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha",
              "profile=smoke", "--no-progress"])
    run_id = json.loads((run / "mlflow_run.json").read_text())["run_id"]
    info = MlflowClient(f"sqlite:///{isolated_results}/mlflow.db").get_run(run_id)
    assert info.info.status == "FAILED" and info.info.end_time is not None
    assert info.data.tags["hkt.error"].startswith("RuntimeError: simulated CUDA error")


def test_a_final_phase_killed_before_the_record_logs_each_summary_metric_once(tmp_path, isolated_results):
    from hkt.run_record import RECORD_NAME

    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    args = ["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha",
            "profile=smoke", "--no-progress"]
    assert main(args) == 0
    (run / RECORD_NAME).unlink()  # killed after the final metrics were logged, before the record
    assert main(args) == 0        # the rerun redoes the final phase
    run_id = json.loads((run / "mlflow_run.json").read_text())["run_id"]
    client = MlflowClient(f"sqlite:///{isolated_results}/mlflow.db")
    assert client.get_run(run_id).info.status == "FINISHED"
    for key in ("test_accuracy", "test_loss", "n_params", "wall_time_s", "best_step"):
        assert len(client.get_metric_history(run_id, key)) == 1, key
    # the validation curve: each evaluation once (the best is the tag best_val_accuracy)
    assert [m.step for m in client.get_metric_history(run_id, "val_accuracy")] == [6, 12]


def test_a_tracking_server_stopped_mid_run_costs_seconds_and_the_rerun_completes_its_run(
        tmp_path, isolated_results, monkeypatch, capsys):
    """Issue 51, 1: a real `mlflow server` on 127.0.0.1, stopped after the run's first checkpoint.
    Training goes on after one bounded wait and one warning, and ends with its record naming the
    gap; the same command, once a server answers again on the same store, completes the MLflow
    run: every history.csv step, the test metrics, the model, the record."""
    from conftest import mlflow_server, stop_server
    from hkt.run_record import RECORD_NAME, read_history
    from hkt.train.checkpoint import Checkpoint

    data = write_prepared_data(tmp_path / "data", "listops")
    run, root = tmp_path / "run", tmp_path / "server"
    args = ["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha",
            "profile=smoke", "--no-progress"]
    save = Checkpoint.save_last
    with mlflow_server(root) as (uri, proc):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

        def stop_after_first_checkpoint(self, *a, **kw):
            save(self, *a, **kw)
            stop_server(proc)

        monkeypatch.setattr(Checkpoint, "save_last", stop_after_first_checkpoint)
        capsys.readouterr()
        assert main(args) == 0
        err = capsys.readouterr().err
    monkeypatch.setattr(Checkpoint, "save_last", save)
    warnings = [line for line in err.splitlines() if line.startswith("hkt: warning: MLflow")]
    assert len(warnings) == 1, err
    assert f"MLflow tracking at {uri} lost while logging" in warnings[0]
    assert "MLflow holds this run's steps up to 3" in warnings[0]
    record = json.loads((run / RECORD_NAME).read_text())
    gap = record["mlflow_gap"]
    assert gap["logged_to_step"] == 3 and gap["model_logged"] is False
    # a refused connection fails at once: retried for config/train.yaml's server_wait_s (5 s),
    # and no retry begins after it; a server that stops answering mid-request would cost
    # server_timeout_s (10 s) instead
    assert 0 < gap["waited_s"] <= 5 + 1
    assert record["steps"] == 12 and (run / "checkpoints" / "last.pt").exists()

    with mlflow_server(root, port=int(uri.rsplit(":", 1)[1])):  # back, on the same store
        capsys.readouterr()
        assert main(args) == 0
        err = capsys.readouterr().err
        assert f"its MLflow run {record['mlflow_run_id']} is now complete: 12 logged steps" in err
        client = MlflowClient(uri)
        mlflow_run = client.get_run(record["mlflow_run_id"])
        done = json.loads((run / RECORD_NAME).read_text())
        assert "mlflow_gap" not in done
        assert done == {k: v for k, v in record.items() if k != "mlflow_gap"}  # numbers untouched
        assert mlflow_run.info.status == "FINISHED"
        assert mlflow_run.data.metrics["test_accuracy"] == record["test_accuracy"]
        history = read_history(run)
        for key, metric in (("train_loss", "train_loss"), ("val_acc", "val_accuracy")):
            logged = sorted((m.step, m.value) for m in client.get_metric_history(mlflow_run.info.run_id, metric))
            assert logged == [(r["step"], r[key]) for r in history if r[key] is not None], key
        assert {m.source_run_id for m in client.search_logged_models(
            [mlflow_run.info.experiment_id])} == {mlflow_run.info.run_id}
        assert {a.path for a in client.list_artifacts(mlflow_run.info.run_id)} >= {
            "record.json", "history.csv", "learning_curve.png"}


def test_a_run_stopped_during_a_gap_sends_the_missing_steps_when_it_resumes(
        tmp_path, isolated_results, monkeypatch, capsys):
    """The store stops taking metrics after step 6 (the run goes on, with one warning); a
    SIGTERM stops the run at step 10; resumed with the store back, the run sends steps 7-10
    from its history before training on, so the MLflow run ends whole, with no gap."""
    import os
    import signal

    from mlflow.exceptions import MlflowException

    from hkt.run_record import RECORD_NAME, read_history
    from hkt.train.checkpoint import Checkpoint

    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    args = ["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha",
            "profile=smoke", "--no-progress"]
    save, log_batch, gone = Checkpoint.save_last, MlflowClient.log_batch, []

    def refusing(self, run_id, metrics=(), *a, **kw):
        if gone and metrics:
            raise MlflowException("the store went away")
        return log_batch(self, run_id, metrics, *a, **kw)

    def then_stop(self, state, *a, **kw):
        save(self, state, *a, **kw)
        if state.step == 6:
            gone.append(True)
        if state.step == 9:
            os.kill(os.getpid(), signal.SIGTERM)  # stops at the next step boundary, 10

    monkeypatch.setattr(MlflowClient, "log_batch", refusing)
    monkeypatch.setattr(Checkpoint, "save_last", then_stop)
    assert main(args) == 143
    err = capsys.readouterr().err
    assert err.count("hkt: warning: MLflow tracking") == 1 and "steps up to 6" in err
    monkeypatch.setattr(MlflowClient, "log_batch", log_batch)
    monkeypatch.setattr(Checkpoint, "save_last", save)
    assert main(args) == 0
    assert "resuming from" in capsys.readouterr().err
    record = json.loads((run / RECORD_NAME).read_text())
    assert "mlflow_gap" not in record
    client = MlflowClient(f"sqlite:///{isolated_results}/mlflow.db")
    logged = sorted((m.step, m.value) for m in client.get_metric_history(record["mlflow_run_id"],
                                                                         "train_loss"))
    assert logged == [(r["step"], r["train_loss"]) for r in read_history(run)]
    assert client.get_run(record["mlflow_run_id"]).info.status == "FINISHED"
