"""Any crash ends the MLflow run as FAILED with an error tag, then propagates (issue 11: 2)."""

from __future__ import annotations

import json

import pytest
import torch.nn.functional as F
from mlflow.tracking import MlflowClient

from conftest import write_prepared_data
from hkt.cli import main


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
    from hkt.record import RECORD_NAME

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
    for key in ("val_accuracy", "test_accuracy", "test_loss", "n_params", "wall_time_s", "best_step"):
        assert len(client.get_metric_history(run_id, key)) == 1, key
