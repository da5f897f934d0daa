"""Completing the MLflow run of a finished training run whose tracking store stopped answering
during it (its record's ``mlflow_gap``, :attr:`hkt.train.tracking.Tracker.gap`).

The same ``hkt train`` command, run again once the store answers, finds the record and sends
what the MLflow run lacks, from what the run directory holds: every step of ``history.csv`` past
what the store has (per metric), the dataset, the model (the best checkpoint) unless it got
there before the gap, the final metrics, the artifacts and the record; then it closes the run as
FINISHED and writes the record again without the gap. Nothing is trained or evaluated again, so
the record's numbers stay as they are. A store that still does not answer leaves the record as
it was, with one warning line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from hkt.data_layout import SPLITS
from hkt.run_record import RECORD_NAME, read_history, write_record
from hkt.mlflow_store import StoreError
from hkt.train.checkpoint import load_checkpoint
from hkt.train.data import RunData, model_for
from hkt.train.finish import GAP_FIELD, publish, summary_line
from hkt.train.tracking import make_tracker, run_params

__all__ = ["complete_tracking"]


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
        model = model_for(cfg, data)
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
