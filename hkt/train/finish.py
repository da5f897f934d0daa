"""The end of a training run: its record (through the one writer, :mod:`hkt.run_record`), the final
metrics and artifacts in MLflow, and the one-line summary printed for it.

A finished run whose tracking store stopped answering during it (its record's ``mlflow_gap``,
:attr:`hkt.train.tracking.Tracker.gap`) has its MLflow run completed by the same ``hkt train``
command, run again once the store answers (:func:`complete_tracking`): from what the run
directory holds, every step of ``history.csv`` past what the store has (per metric), the
dataset, the model (the best checkpoint) unless it got there before the gap, the final metrics,
the artifacts and the record; then the run is closed as FINISHED and the record written again
without the gap. Nothing is trained or evaluated again, so the record's numbers stay as they
are. A store that still does not answer leaves the record as it was, with one warning line.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, TextIO

from hkt.data_layout import SPLITS
from hkt.models import model_for
from hkt.models.serving import served_tokens
from hkt.predictions import PREDICTIONS_NAME
from hkt.run_record import HISTORY_NAME, RECORD_NAME, make_record, read_history, write_record
from hkt.mlflow_store import BEST_VAL_TAG, StoreError
from hkt.train.checkpoint import TrainState, load_checkpoint
from hkt.train.data import RunData
from hkt.train.run_conditions import execution_tags
from hkt.train.progress import format_duration
from hkt.train.rundir import CONFIG_NAME
from hkt.train.run_metadata import run_params, suite_run
from hkt.train.tracking import NullTracker, make_tracker

__all__ = ["training_record", "log_final", "publish", "summary_line", "complete_tracking",
           "GAP_FIELD"]

#: The record's field naming what its MLflow run lacks (hkt.train.tracking.Tracker.gap)
GAP_FIELD = "mlflow_gap"


def training_record(cfg: Any, cfg_dict: dict[str, Any], state: TrainState, best: dict[str, Any],
                    test: dict[str, float], *, n_params: int, wall_time_s: float, device: str,
                    git: tuple[str | None, bool | None], data_dir: Path,
                    checksums: dict[str, str], tracker: NullTracker,
                    content_checksums: dict[str, str] | None = None,
                    env_digest: str | None = None, train_examples: int | None = None,
                    execution: dict[str, Any] | None = None,
                    predictions: dict[str, str] | None = None) -> dict[str, Any]:
    """The record of a finished training run: ``best`` is the best-validation checkpoint (what
    was tested), ``test`` its test evaluation; speeds exclude evaluation time; ``env_digest``
    names the software environment (:mod:`hkt.environment`); ``execution`` the precision,
    threads and GPU sharing (:mod:`hkt.train.run_conditions`); ``predictions`` the file of the
    run's predictions and its SHA-256 (:func:`hkt.predictions.write_predictions`)."""
    steps, train_time, bs = state.step, state.train_time_s, int(cfg.train.batch_size)
    return make_record(
        task=cfg.task.family, model=cfg.tracking.model, variant=cfg.variant, seed=cfg.seed,
        profile=cfg.train.profile, config=cfg_dict, n_params=n_params, steps=steps,
        best_step=best["step"], val_accuracy=best["val_accuracy"],
        test_accuracy=test["acc"], val_loss=best["val_loss"], test_loss=test["loss"],
        test_examples=test["n"], train_examples=train_examples, wall_time_s=wall_time_s,
        ms_per_step=1000 * train_time / steps if steps and train_time > 0 else None,
        samples_per_s=steps * bs / train_time if train_time > 0 else None,
        device=device, git=git, data_dir=data_dir, data_checksums=checksums,
        data_content_checksums=content_checksums,
        mlflow=(state.mlflow_run_id, tracker.uri, tracker.experiment) if tracker.enabled else None,
        suite_run=suite_run(cfg.tracking), env_digest=env_digest, predictions=predictions,
        **(execution or {}))


def log_final(tracker: NullTracker, record: dict[str, Any], artifacts: list[Path]) -> None:
    """Log the record's final metrics, the ``artifacts`` and the record itself, and close the
    MLflow run as FINISHED (nothing without tracking). Used by ``hkt train`` and the external
    baselines alike, so that the runs frame read from MLflow is the one read from the records
    (:mod:`hkt.report.mlflow_runs`): the steps taken, and the record's time of writing as tag
    ``created_at`` (which of two reruns is the latest); the execution tags again, with the GPU
    sharing as the run ended (:mod:`hkt.train.run_conditions`). The best validation accuracy is tag
    :data:`~hkt.mlflow_store.BEST_VAL_TAG`, not a second metric: metric ``val_accuracy`` is the curve
    (every evaluation), whose latest value the runs list shows."""
    if not tracker.enabled:
        return
    tracker.log_final({
        "test_accuracy": record["test_accuracy"],
        "test_loss": record["test_loss"], "best_step": record["best_step"],
        "test_examples": record["test_examples"], "steps": record["steps"],
        **({"train_examples": record["train_examples"]}
           if record.get("train_examples") is not None else {}),
        "n_params": record["n_params"], "wall_time_s": record["wall_time_s"],
        "ms_per_step": record["ms_per_step"],
        "throughput_samples_per_s": record["samples_per_s"],
    }, record["steps"])
    best_val = record.get("val_accuracy")
    tracker.set_tags({"created_at": record["created_at"], **execution_tags(record),  # final
                      **({BEST_VAL_TAG: repr(float(best_val))} if best_val is not None else {})})
    with tempfile.TemporaryDirectory() as tmp:
        staged = write_record(record, Path(tmp) / RECORD_NAME)
        for path in (*artifacts, staged):
            tracker.log_artifact(path)
    tracker.finish("FINISHED")


def publish(tracker: NullTracker, record: dict[str, Any], run_dir: Path, *, model: Any,
            data: Any, cfg: Any) -> dict[str, Any]:
    """Send a finished run to MLflow: the model (the best checkpoint, loaded in ``model``, with
    an input example of ``data``'s test split; None: not sent), the final metrics, the
    artifacts (config, curve, history, predictions) and the record (:func:`log_final`).
    Returns ``record``, with :data:`GAP_FIELD` where the store stopped answering (what the
    record then says), without it where the MLflow
    run is whole."""
    record = {k: v for k, v in record.items() if k != GAP_FIELD}
    if model is not None and cfg.tracking.log_model and tracker.enabled and tracker.gap is None:
        example = next(iter(data.eval_batches("test", int(cfg.tracking.model_examples), 1)))
        tracker.log_model(model, served_tokens(example["tokens"], example["mask"]))
    artifacts = [run_dir / CONFIG_NAME, run_dir / "learning_curve.png", run_dir / HISTORY_NAME,
                 run_dir / PREDICTIONS_NAME]
    log_final(tracker, record, [p for p in artifacts if p.exists()])
    if tracker.gap is not None:
        record[GAP_FIELD] = {**tracker.gap, "model_logged": tracker.model_logged}
    return record


def summary_line(record: dict[str, Any], run_dir: Path | str) -> str:
    """One line on a finished run: accuracies, size, time, speed, device, where its record is."""
    ms = record.get("ms_per_step")
    sps = record.get("samples_per_s")
    speed = f", {ms:.1f} ms/step, {sps:,.0f} samples/s" if ms and sps else ""
    return (f"{record['task']}/{record['model']}/{record['variant']} seed {record['seed']} "
            f"[{record['profile']}]: val {record['val_accuracy']:.4f} (step {record['best_step']}), "
            f"test {record['test_accuracy']:.4f}; {record['n_params']:,} params, "
            f"{record['steps']} steps in {format_duration(record['wall_time_s'])}{speed} "
            f"on {record['device']} -> {Path(run_dir) / RECORD_NAME}")


def complete_tracking(cfg: Any, record: dict[str, Any], data: RunData, run_dir: Path,
                      stream: TextIO) -> dict[str, Any]:
    """Complete the MLflow run of the finished run in ``run_dir`` (record ``record``, data
    ``data``, config ``cfg``, checked by the caller to be the record's); return the record as
    written afterwards."""
    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    gap = record[GAP_FIELD]
    try:
        tracker = make_tracker(cfg, say=say)
    except StoreError as exc:
        say(f"hkt: warning: run already finished, but its MLflow run still lacks what came after "
            f"step {gap['logged_to_step']} ({exc}); run the same command again once the store "
            "answers")
        return record
    run_id = tracker.start(record.get("mlflow_run_id"), params=run_params(
        record["config"], int(record["n_params"]), data.meta["train"].get("params")))
    history = read_history(run_dir)
    tracker.backfill(history)
    tracker.log_dataset(cfg.task.family, data.dir, data.checksums, {s: data.size(s) for s in SPLITS})
    model = None
    if cfg.tracking.log_model and not gap.get("model_logged"):
        model = model_for(cfg.model, data, int(cfg.task.max_length))
        model.load_state_dict(load_checkpoint(run_dir / "checkpoints" / "best.pt")["model"])
    done = publish(tracker, {**record, "mlflow_run_id": run_id}, run_dir, model=model, data=data,
                   cfg=cfg)
    if GAP_FIELD in done:  # the store went away again: the record keeps the first gap
        return record
    write_record(done, run_dir / RECORD_NAME)
    say(f"run already finished; its MLflow run {run_id} is now complete: {len(history)} logged "
        f"steps from history.csv, the test metrics{', the model' if model is not None else ''} "
        "and the record")
    say(summary_line(done, run_dir))
    return done
