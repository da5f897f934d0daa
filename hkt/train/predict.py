"""``hkt predict RUN_DIR --data DATA_DIR``: remake a finished training run's
``predictions.parquet`` from its best checkpoint, without training again.

For a run trained before runs kept their predictions, or one whose directory came from another
machine: the best checkpoint (``checkpoints/best.pt``, the step the record reports) is evaluated
on the validation and test splits as ``hkt train`` evaluated it (the same batches, the
first ``train.eval_batches``/``train.test_batches`` where the run's config limits them, its
precision and threads, on its device unless ``--device``), the file is written and the record
gains its field ``predictions`` (file and SHA-256); nothing else in the record changes. On a
CPU the evaluation repeats bit for bit, so the file equals the one training writes, byte for
byte. Refused, each with one line: a directory with no record or no best checkpoint, a
baseline's run (the baseline writes its own: run it again), a best checkpoint of another step
than the record's, data other than the run's (the record's SHA-256 of each split), and
predictions whose accuracy is not the record's (an evaluation that did not repeat: another
device or precision). The MLflow run is not touched: the file is logged there when a run ends.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hkt.errors import DataError, TrainingError
from hkt.predictions import (PREDICTIONS_NAME, RECORD_FIELD, check_against_record,
                             predictions_table, write_predictions)
from hkt.run_record import RECORD_NAME, load_record, write_record
from hkt.train import rundir

__all__ = ["add_arguments", "run", "remake_predictions"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Remake a finished training run's predictions.parquet from its best "
                          "checkpoint (validation and test splits, as training evaluated them) "
                          "and name it in its record; nothing else in the record changes.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a finished `hkt train` run directory")
    parser.add_argument("--data", required=True, metavar="DATA_DIR",
                        help="the run's prepared data (checked against its record's SHA-256)")
    parser.add_argument("--device", default=None,
                        help="evaluate on this device (default: the run's train.device)")


def run(args: argparse.Namespace) -> int:
    record = remake_predictions(args.run_dir, args.data, device=args.device)
    named = record[RECORD_FIELD]
    print(f"{Path(args.run_dir) / named['file']}: val {record['val_accuracy']:.4f}, test "
          f"{record['test_accuracy']:.4f} (step {record['best_step']}), sha256 {named['sha256']}")
    return 0


def remake_predictions(run_dir: str | Path, data_dir: str | Path, *,
                       device: str | None = None) -> dict[str, Any]:
    """Write ``RUN_DIR/predictions.parquet`` from the run's best checkpoint, set the record's
    :data:`~hkt.predictions.RECORD_FIELD`; return the record (see the module docstring)."""
    run_dir = Path(run_dir)
    load_record(run_dir)  # one line if there is none, or it is not a record
    with rundir.exclusive(run_dir):  # not while `hkt train` (or another predict) works there
        return _remake(run_dir, Path(data_dir), device)


def _remake(run_dir: Path, data_dir: Path, device: str | None) -> dict[str, Any]:
    import torch  # keeps `hkt predict --help` fast
    from omegaconf import OmegaConf

    from hkt.device import resolve_device
    from hkt.train.checkpoint import load_checkpoint
    from hkt.models import model_for
    from hkt.train.data import RunData
    from hkt.train.step import autocast_dtype, evaluate

    record = load_record(run_dir)
    if record.get("external"):
        raise TrainingError(f"{run_dir} is a run of baseline {record['model']!r}, which writes "
                            f"its own {PREDICTIONS_NAME}: run it again (hkt baseline "
                            f"{record['model']} ...)")
    best_path = run_dir / "checkpoints" / "best.pt"
    if not best_path.is_file():
        raise TrainingError(f"{run_dir} has no best checkpoint ({best_path}): its predictions "
                            "cannot be made again without training it again")
    cfg = OmegaConf.create(record["config"])
    data = RunData(data_dir, cfg.task)
    saved = record.get("data_checksums") or {}
    other = [s for s in sorted(saved) if data.checksums.get(s) != saved[s]]
    if other:
        raise DataError(f"{data.dir} is not the data run {run_dir} was trained on: its "
                        f"{', '.join(other)} split(s) differ from the record's SHA-256; pass the "
                        "run's --data")
    best = load_checkpoint(best_path)
    if best.get("step") != record["best_step"]:
        raise TrainingError(f"{best_path} holds step {best.get('step')}, the record reports step "
                            f"{record['best_step']}: it is not the checkpoint the record tested")
    tc = cfg.train
    dev = resolve_device(device or tc.device,
                         source="--device" if device else "the run's config key 'train.device'")
    amp = autocast_dtype(str(tc.precision), dev)
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        # as `hkt train` ran: its threads (the record's, else the config's) and determinism
        n_threads = record.get("threads") or tc.get("num_threads")
        if n_threads:
            torch.set_num_threads(int(n_threads))
        if dev.type == "cpu" and tc.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        model = model_for(cfg.model, data, int(cfg.task.max_length))
        try:
            model.load_state_dict(best["model"])
        except (RuntimeError, KeyError) as exc:
            raise TrainingError(f"{best_path} does not fit the model of its record's config: "
                                f"{str(exc).splitlines()[0]}") from None
        model.to(dev)
        bs = int(tc.batch_size)
        preds = {split: evaluate(model, model, data.eval_batches(split, bs, limit), dev, amp,
                                 keep=True)["predictions"]
                 for split, limit in (("val", tc.eval_batches), ("test", tc.test_batches))}
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(det, warn_only=det_warn)
    # checked before anything is written: a file that disagrees with its record is never kept
    check_against_record(predictions_table(preds, data.num_classes), record,
                         f"predictions remade from {best_path} on {dev}")
    named = write_predictions(preds, run_dir, data.num_classes)
    if RECORD_FIELD in record:
        record[RECORD_FIELD] = named  # in its place: nothing else in the record moves
    else:
        record = {**record, RECORD_FIELD: named}
    write_record(record, run_dir / RECORD_NAME)
    print(f"wrote {run_dir / PREDICTIONS_NAME} from {best_path} (step {record['best_step']})",
          file=sys.stderr)
    return record
