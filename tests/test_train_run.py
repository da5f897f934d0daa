"""End-to-end training runs on tiny fixtures: smoke runs, determinism, resume after kill -9,
divergence, the run record and what MLflow holds for the run."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import check_predictions

from hkt.data.parquet import content_checksums
from hkt.errors import DataError, RunMismatch, TrainingError
from hkt.train.run_config import load_config
from hkt.train.loop import train
from hkt.run_record import load_record, validate_record

METRICS = ("steps", "best_step", "val_accuracy", "test_accuracy", "val_loss", "test_loss",
           "n_params")


def run(data: Path, out: Path, *overrides: str, tracking: bool = False) -> dict:
    ov = ["profile=smoke", *overrides]
    if not tracking:
        ov.append("tracking.enabled=false")
    if not any(o.startswith("task=") for o in ov):
        import pyarrow.parquet as pq

        meta = json.loads(pq.read_schema(Path(data) / "train.parquet").metadata[b"hkt"])
        ov.append(f"task={meta['task']}")
    return train(load_config(ov), data, out, stream=io.StringIO(), progress=False)


def history(run_dir: Path) -> list[dict]:
    with open(run_dir / "history.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("task", ["listops", "imdb", "cifar10"])
@pytest.mark.parametrize("model", ["mha", "hkt"])
def test_smoke_run_writes_a_valid_record(prepared_data, tmp_path, task, model):
    rec = run(prepared_data(task), tmp_path / "run", f"model={model}")
    validate_record(rec)
    assert load_record(tmp_path / "run") == json.loads((tmp_path / "run/record.json").read_text())
    assert rec["task"] == task and rec["model"] == model and rec["profile"] == "smoke"
    assert rec["steps"] == 12 and 0 <= rec["test_accuracy"] <= 1
    assert rec["device"].startswith("cpu") and rec["mlflow_run_id"] is None
    assert set(rec["data_checksums"]) == {"train", "val", "test"}
    assert rec["data_content_checksums"] == content_checksums(prepared_data(task))  # issue 58
    check_predictions(tmp_path / "run", prepared_data(task))  # the record's accuracies, exactly
    # checkpoints load without unpickling arbitrary objects; best.pt has model + config
    for name in ("last.pt", "best.pt"):
        ck = torch.load(tmp_path / "run/checkpoints" / name, weights_only=True)
        assert "model" in ck and ck["config"]["model"]["name"] == model
    rows = history(tmp_path / "run")
    assert list(rows[0]) == ["step", "train_loss", "train_acc", "lr", "samples_per_s",
                             "val_loss", "val_acc"]
    assert [r["step"] for r in rows] == [str(i) for i in range(1, 13)]
    assert rows[0]["val_acc"] == "" and rows[5]["val_acc"] != ""
    assert (tmp_path / "run/learning_curve.png").stat().st_size > 1000


def test_same_seed_same_metrics_and_other_seed_differs(prepared_data, tmp_path):
    data = prepared_data("listops")
    a = run(data, tmp_path / "a", "seed=3")
    b = run(data, tmp_path / "b", "seed=3")
    run(data, tmp_path / "c", "seed=4")
    assert {k: a[k] for k in METRICS} == {k: b[k] for k in METRICS}
    assert [r["train_loss"] for r in history(tmp_path / "a")] == \
           [r["train_loss"] for r in history(tmp_path / "b")]
    assert [r["train_loss"] for r in history(tmp_path / "a")] != \
           [r["train_loss"] for r in history(tmp_path / "c")]


def test_finished_run_only_reports(prepared_data, tmp_path):
    data = prepared_data("listops")
    rec = run(data, tmp_path / "r")
    stamp = (tmp_path / "r/record.json").stat().st_mtime_ns
    again = run(data, tmp_path / "r")
    assert again == rec and (tmp_path / "r/record.json").stat().st_mtime_ns == stamp
    with pytest.raises(TrainingError, match="seed"):
        run(data, tmp_path / "r", "seed=9")


def test_restart_if_changed_starts_over_on_other_config_or_data(prepared_data, tmp_path):
    """What the workflow relies on when a config file or the data changed under a run."""
    data, other_data = prepared_data("listops"), prepared_data("listops", seed=1)
    out = tmp_path / "r"

    def again(data_dir: Path, *overrides: str) -> dict:
        cfg = load_config(["profile=smoke", "task=listops", "tracking.enabled=false", *overrides])
        return train(cfg, data_dir, out, stream=io.StringIO(), progress=False, restart_if_changed=True)

    rec = run(data, out)
    assert again(data) == rec  # same config and data: nothing to do
    with pytest.raises(RunMismatch, match="restart-if-changed"):
        run(data, out, "seed=9")
    assert again(data, "seed=9")["seed"] == 9
    moved = again(other_data, "seed=9")
    assert moved["data_checksums"] != rec["data_checksums"] and moved["seed"] == 9


def test_data_of_another_task_is_refused(prepared_data, tmp_path):
    with pytest.raises(DataError, match="imdb"):
        run(prepared_data("imdb"), tmp_path / "r", "task=listops")


def test_divergence_stops_and_keeps_last_good_checkpoint(prepared_data, tmp_path, monkeypatch):
    import hkt.train.loop as loop

    real = loop.model_for

    class NaNAfter(torch.nn.Module):
        def __init__(self, inner, n):
            super().__init__()
            self.inner, self.n, self.calls = inner, n, 0

        def forward(self, tokens, mask):
            out = self.inner(tokens, mask)
            if self.training:
                self.calls += 1
                if self.calls > self.n:
                    out = out * float("nan")
            return out

    monkeypatch.setattr(loop, "model_for", lambda *a, **k: NaNAfter(real(*a, **k), 7))
    with pytest.raises(TrainingError, match="non-finite loss") as err:
        run(prepared_data("listops"), tmp_path / "r")
    assert "step 8" in str(err.value) and "last.pt" in str(err.value)
    ck = torch.load(tmp_path / "r/checkpoints/last.pt", weights_only=True)
    assert ck["step"] == 6
    assert all(torch.isfinite(v).all() for v in ck["model"].values() if v.is_floating_point())
    assert not (tmp_path / "r/record.json").exists()


def test_record_matches_mlflow(prepared_data, tmp_path, isolated_results):
    from mlflow.tracking import MlflowClient

    rec = run(prepared_data("listops"), tmp_path / "r", "model=mha", tracking=True)
    assert rec["mlflow_tracking_uri"] == f"sqlite:///{isolated_results.resolve()}/mlflow.db"
    client = MlflowClient(rec["mlflow_tracking_uri"])
    r = client.get_run(rec["mlflow_run_id"])
    assert r.info.status == "FINISHED" and r.info.run_name == "listops-mha-main-s0"
    assert client.get_experiment(r.info.experiment_id).name == rec["mlflow_experiment"] == "hkt-smoke-listops"
    m = r.data.metrics
    # the comparison of runs (the runs list's view, hkt.train.run_metadata.COMPARISON_VIEW): test
    # accuracy, the best validation accuracy (a tag: the one validation-accuracy metric is the
    # curve) and its step
    assert m["test_accuracy"] == rec["test_accuracy"] and m["best_step"] == rec["best_step"]
    assert float(r.data.tags["best_val_accuracy"]) == rec["val_accuracy"]
    assert m["n_params"] == rec["n_params"]
    assert [k for k in m if "val" in k and "acc" in k] == ["val_accuracy"]  # one, not two
    from hkt.train.run_metadata import COMPARISON_VIEW  # the runs list's view: each column is there

    for kind, name in COMPARISON_VIEW["columns"]:
        assert kind == "attributes" or name in {"metrics": m, "tags": r.data.tags}[kind], name
    curve = {x.step: x.value for x in client.get_metric_history(r.info.run_id, "val_accuracy")}
    assert curve[rec["best_step"]] == rec["val_accuracy"] == max(curve.values())
    assert r.data.params["model.d_model"] == str(rec["config"]["model"]["d_model"])
    assert r.data.params["seed"] == "0" and "tracking.uri" not in r.data.params
    tags = r.data.tags
    assert tags["profile"] == "smoke" and tags["suite"] == "none" and tags["device"] == rec["device"]
    assert tags["precision"] == rec["precision"] == "fp32" and tags["threads"] == str(rec["threads"])
    assert not any(k.startswith("gpu_sharing") for k in tags) and "gpu_sharing" not in rec  # a CPU
    # the suite run, in the record and as tags (hkt.provenance.SuiteRun); what the MLflow
    # reader needs to give the record's steps and time of writing
    assert rec["suite"] is None and rec["results_dir"] == str(isolated_results.resolve())
    assert tags["results_dir"] == rec["results_dir"] and tags["created_at"] == rec["created_at"]
    assert m["steps"] == rec["steps"] == 12
    assert tags["torch_version"] == torch.__version__ and "hostname" in tags
    assert tags["data_sha256.train"] == rec["data_checksums"]["train"]
    assert tags["git_commit"] == str(rec["git_commit"])
    arts = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"config.yaml", "record.json", "learning_curve.png", "history.csv",
            "environment.json", "predictions.parquet"} <= arts
    local = client.download_artifacts(r.info.run_id, "predictions.parquet", str(tmp_path))
    assert Path(local).read_bytes() == (tmp_path / "r" / "predictions.parquet").read_bytes()
    saved = json.loads((tmp_path / "r" / "environment.json").read_text())
    assert tags["env_digest"] == rec["env_digest"] == saved["digest"]
    steps = [x.step for x in client.get_metric_history(r.info.run_id, "train_loss")]
    assert steps == list(range(1, 13))
    assert sorted(curve) == [6, 12]  # every evaluation (eval_every 6, and the last step)
    local = client.download_artifacts(r.info.run_id, "record.json", str(tmp_path))
    assert json.loads(Path(local).read_text())["test_accuracy"] == rec["test_accuracy"]


def _start_and_kill(cmd, env, last: Path, min_step: int) -> int:
    """Start ``cmd``, SIGKILL it once last.pt holds a step >= min_step; return that step."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    seen = -1
    while proc.poll() is None and time.monotonic() < deadline:
        if last.exists():
            try:
                seen = torch.load(last, weights_only=True)["step"]
            except Exception:  # noqa: BLE001 - replaced while we read it: read again
                continue
            if seen >= min_step:
                break
        time.sleep(0.002)
    alive = proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert alive, f"the run ended before it could be killed:\n{err[-2000:]}"
    return torch.load(last, weights_only=True)["step"]


@pytest.mark.slow
def test_kill_9_then_rerun_resumes_to_identical_metrics(prepared_data, tmp_path, isolated_results,
                                                       capsys):
    data = prepared_data("listops")
    budget = ["train.max_steps=48", "train.checkpoint_every=4", "train.eval_every=10",
              "train.log_every=1"]
    reference = run(data, tmp_path / "ref", *budget)

    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "hkt.cli.main", "train", "--data", str(data), "--out", str(out),
           "--no-progress", "profile=smoke", "task=listops", *budget]
    env = {**os.environ, "HKT_RESULTS_DIR": str(isolated_results), "PYTHONUNBUFFERED": "1"}
    last = out / "checkpoints/last.pt"
    first = _start_and_kill(cmd, env, last, 1)       # right after the first checkpoint
    run_id = json.loads((out / "mlflow_run.json").read_text())["run_id"]
    second = _start_and_kill(cmd, env, last, first + 8)  # again, later, after resuming
    assert first < second < 48 and not (out / "record.json").exists()

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resuming from {last} at step {second}" in done.stderr
    rec = load_record(out)
    assert {k: rec[k] for k in METRICS} == {k: reference[k] for k in METRICS}
    assert [r["train_loss"] for r in history(out)] == \
           [r["train_loss"] for r in history(tmp_path / "ref")]
    # the same MLflow run continued, without duplicate steps
    from mlflow.tracking import MlflowClient

    assert rec["mlflow_run_id"] == run_id
    client = MlflowClient(rec["mlflow_tracking_uri"])
    steps = [m.step for m in client.get_metric_history(run_id, "train_loss")]
    assert sorted(steps) == list(range(1, 49))
    assert client.get_run(run_id).info.status == "FINISHED"
    # and a further invocation only reports
    from hkt.cli.main import main

    assert main(cmd[3:]) == 0
    assert "nothing to do" in capsys.readouterr().err


def _to_old_key(cfg: dict) -> dict:
    """A config as runs saved it before ``model.mixer`` was called ``model.attention`` and
    ``model.mixer_dropout`` ``model.attn_dropout``."""
    old = {"mixer": "attention", "mixer_dropout": "attn_dropout"}
    model = {old.get(k, k): v for k, v in cfg["model"].items()}
    return {**cfg, "model": model}


def _migrate(results: Path) -> None:
    """``scripts/migrate_results.py RESULTS``: what an old results directory takes, once."""
    from conftest import load_script

    assert load_script("migrate_results").main([str(results), "--snakemake-dir", str(results)]) == 0


def _to_old_checkpoint(ck: dict) -> dict:
    """A checkpoint as runs saved it before the rename: the old config keys, and the blocks'
    mixers under ``attn`` in the model's state_dict (``blocks.0.attn.q_proj.0.weight``)."""
    model = {k.replace(".mixer.", ".attn."): v for k, v in ck["model"].items()}
    assert model.keys() != ck["model"].keys()
    return {**ck, "model": model, "config": _to_old_key(ck["config"])}


def test_a_run_saved_under_the_old_attention_key_resumes_once_migrated(prepared_data, tmp_path):
    """A run directory written before the rename (config.yaml, checkpoints and record say
    ``model.attention``), migrated (scripts/migrate_results.py), is the same config: reported or
    resumed, not started over."""
    import yaml

    from hkt.analysis.run import load_trained_run
    from hkt.train.checkpoint import load_checkpoint, save_checkpoint

    data, out = prepared_data("listops"), tmp_path / "r"
    rec = run(data, out, "model=hkt")
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert "mixer" in saved["model"] and "attention" not in saved["model"]
    (out / "config.yaml").write_text(yaml.safe_dump(_to_old_key(saved), sort_keys=False))
    for ck_path in (out / "checkpoints").glob("*.pt"):
        save_checkpoint(_to_old_checkpoint(torch.load(ck_path, weights_only=True)), ck_path)
    old_record = {**json.loads((out / "record.json").read_text())}
    old_record["config"] = _to_old_key(old_record["config"])
    (out / "record.json").write_text(json.dumps(old_record))
    _migrate(tmp_path)
    for ck_path in (out / "checkpoints").glob("*.pt"):
        assert "mixer" in load_checkpoint(ck_path)["config"]["model"]  # now under the new key
    assert load_record(out)["config"] == rec["config"]
    # analyses read the old run
    trained = load_trained_run(out)
    assert trained.model.config.mixer.levels == rec["config"]["model"]["mixer"]["levels"]

    def again() -> tuple[dict, str]:
        stream = io.StringIO()
        cfg = load_config(["profile=smoke", "task=listops", "model=hkt", "tracking.enabled=false"])
        got = train(cfg, data, out, stream=stream, progress=False, restart_if_changed=True)
        return got, stream.getvalue()

    got, said = again()  # finished: the old record is this config's
    assert "starting over" not in said and "nothing to do" in said
    before = history(out)
    (out / "record.json").unlink()  # unfinished: resumes from the old checkpoint and config.yaml
    (out / "keep").write_text("a restart empties the directory")
    got, said = again()
    assert "starting over" not in said and (out / "keep").exists(), said
    assert history(out) == before
    assert {k: got[k] for k in METRICS} == {k: rec[k] for k in METRICS}


def test_a_checkpoint_saved_before_the_mixer_rename_resumes_exactly_once_migrated(
        prepared_data, tmp_path, monkeypatch):
    """``last.pt`` and ``best.pt`` of a run stopped before the rename (state_dict keys
    ``blocks.N.attn.…``, config ``model.attention`` and ``model.attn_dropout``), migrated
    (scripts/migrate_results.py), resume to the same steps, losses and metrics as the run that
    was never stopped."""
    import shutil

    import hkt.train.checkpoint as checkpoint
    from hkt.train.checkpoint import save_checkpoint

    data, out, stop = prepared_data("listops"), tmp_path / "run", 9
    saved_at: dict[int, Path] = {}
    save = checkpoint.save_checkpoint

    def save_and_keep(state: dict, path: Path) -> None:  # the files as a stop at `stop` leaves them
        save(state, path)
        if Path(path).name == "last.pt" and state.get("step") == stop:
            saved_at[stop] = tmp_path / "at_stop"
            shutil.copytree(Path(path).parent, saved_at[stop])

    monkeypatch.setattr(checkpoint, "save_checkpoint", save_and_keep)
    reference = run(data, out, "model=hkt")
    monkeypatch.undo()
    assert set(saved_at) == {stop} and (saved_at[stop] / "best.pt").exists()
    reference_losses = [r["train_loss"] for r in history(out)]

    (out / "record.json").unlink()
    for ck_path in saved_at[stop].glob("*.pt"):
        save_checkpoint(_to_old_checkpoint(torch.load(ck_path, weights_only=True)),
                        out / "checkpoints" / ck_path.name)
    _migrate(out)
    stream = io.StringIO()
    cfg = load_config(["profile=smoke", "task=listops", "model=hkt", "tracking.enabled=false"])
    resumed = train(cfg, data, out, stream=stream, progress=False)
    assert f"at step {stop}/" in stream.getvalue()
    assert {k: resumed[k] for k in METRICS} == {k: reference[k] for k in METRICS}
    assert [r["train_loss"] for r in history(out)] == reference_losses
