"""What every baseline of ours shares: its command's arguments, the prepared data in, the run
record (and, with a tracking URI, the MLflow run) out. A baseline's module computes only its
numbers, a :class:`Fit`, from the :class:`Splits` it is given.

    hkt baseline NAME --data DATA_DIR --out RUN_DIR [--seed 0] [--variant main] [--profile LABEL]
        [--max-train N] [--tracking-uri URI] [--experiment NAME]
        [--results-dir DIR] [its own options]

Writes ``RUN_DIR/record.json`` with the public record writer (:mod:`hkt.run_record`,
docs/contracts.md "Runs"), ``predictions.parquet`` (:mod:`hkt.predictions`: the baseline's
answer and probabilities on every validation and test example), ``history.csv`` when the
baseline has a validation curve and, with ``--tracking-uri``, logs the same numbers, the
record, its config and predictions to MLflow, in the
experiment of the suite's trained models (``$HKT_MLFLOW_EXPERIMENT``, which the workflow sets,
else ``hkt-<profile>-<task>`` as ``hkt train`` names it); otherwise its MLflow fields are null.
Record and MLflow run name the suite run as ``hkt train``'s do (:class:`hkt.provenance.SuiteRun`):
``$HKT_SUITE`` (which the workflow sets for every job) and ``--results-dir`` (default
``$HKT_RESULTS_DIR``, which the workflow sets, else ``results``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import hkt
from hkt import environment
from hkt.baselines import BASELINES
from hkt.config_compose import flatten
from hkt.data_layout import SPLITS, split_file
from hkt.data.parquet import SplitData, content_checksums, read_metadata
from hkt.data.ranges import check_ranges
from hkt.errors import DataError
from hkt.fileio import atomic_write_text, sha256_file
from hkt.predictions import (PREDICTIONS_NAME, SPLITS as PREDICTION_SPLITS, SplitPredictions,
                             check_against_record, one_hot, read_predictions, write_predictions)
from hkt.provenance import SuiteRun, code_digest, git_state
from hkt.run_record import RECORD_NAME, make_record, write_history, write_record
from hkt.mlflow_store import experiment_name
from hkt.train.run_metadata import EXPERIMENT_ENV, RESULTS_ENV, data_tags, suite_run

__all__ = ["Splits", "Fit", "answers", "NO_PROFILE", "read_split", "run_baseline",
           "add_run_arguments", "run_command"]

# The profile label of a run no profile's budget set: config/train.yaml's train.profile default.
NO_PROFILE = "none"
# what the command's shared arguments are called in argparse (``name``: the baseline's, which
# hkt.cli gives every `hkt baseline NAME`): the rest are the baseline's own
_SHARED = ("name", "data", "out", "seed", "variant", "profile", "max_train", "tracking_uri",
           "experiment", "results_dir")


@dataclass(frozen=True)
class Splits:
    """A task's prepared splits as a baseline fits them (train cut to ``--max-train``)."""

    train: SplitData
    val: SplitData
    test: SplitData
    num_classes: int


@dataclass
class Fit:
    """What a baseline's ``fit`` computes; :func:`run_baseline` makes the record of it.

    ``predictions`` its answer on every example of ``val`` and ``test``
    (:func:`answers`; the record's accuracies are theirs, so the run's ``predictions.parquet``
    and its record agree by construction); ``model`` and ``train`` its settings in the
    record's ``config`` (``model.name`` and ``train.profile``/``max_train`` are added);
    ``history`` one ``{"step", "val_acc"}`` per evaluation (``history.csv`` and MLflow);
    ``batch_size`` the examples per step (samples/s); ``extra`` more record fields (e.g.
    ``majority_label``)."""

    predictions: dict[str, SplitPredictions]
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    n_params: int = 0
    steps: int = 0
    best_step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    train_time_s: float = 0.0
    batch_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.predictions) != set(PREDICTION_SPLITS):
            raise ValueError(f"a baseline's Fit holds predictions of {PREDICTION_SPLITS}, "
                             f"not of {sorted(self.predictions)}")

    @property
    def val_accuracy(self) -> float:
        return self.predictions["val"].accuracy

    @property
    def test_accuracy(self) -> float:
        return self.predictions["test"].accuracy


def answers(split: SplitData, preds: np.ndarray, num_classes: int,
            probs: np.ndarray | None = None) -> SplitPredictions:
    """A baseline's predictions on every example of ``split``, in file order: ``preds`` the
    class it answers, ``probs`` its probabilities (None: a rule's, one-hot on ``preds``)."""
    preds = np.asarray(preds, dtype=np.int64)
    return SplitPredictions(np.arange(len(split), dtype=np.int64), split.labels, preds,
                            one_hot(preds, num_classes) if probs is None else probs)


def read_split(data_dir: str | Path, split: str) -> SplitData:
    """Read ``DATA_DIR/<split>.parquet`` as written by ``hkt prepare`` (id, tokens, label)."""
    path = Path(data_dir) / split_file(split)
    meta = read_metadata(path)  # a clear DataError unless `hkt prepare` wrote this file
    try:
        table = pq.read_table(path, columns=["id", "tokens", "label"])
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path} is not a readable Parquet file: {exc}") from None
    tokens = table.column("tokens").combine_chunks()
    offsets = np.asarray(tokens.offsets, dtype=np.int64)
    values = np.asarray(tokens.values)[offsets[0]: offsets[-1]]
    labels = np.asarray(table.column("label"), dtype=np.int64)
    # the task's ranges, as training checks them, before any cast: a label outside
    # 0..num_classes-1 would otherwise be counted or one-hot encoded silently wrong
    check_ranges(path, values, offsets[:-1] - offsets[0], np.diff(offsets), labels,
                 **{k: None if meta.get(k) is None else int(meta[k])
                    for k in ("vocab_size", "num_classes", "max_length")})
    return SplitData(table.column("id").to_pylist(), values.astype(np.uint16, copy=False),
                     offsets - offsets[0], labels)


def run_baseline(name: str, data_dir: str | Path, out: str | Path, *, seed: int = 0,
                 variant: str = "main", profile: str = NO_PROFILE, max_train: int | None = None,
                 tracking_uri: str | None = None, experiment: str | None = None,
                 results_dir: str | Path | None = None, **options: Any) -> dict[str, Any]:
    """Fit baseline ``name`` (:data:`hkt.baselines.BASELINES`) with its ``options`` on the
    prepared data in ``data_dir``; write and return the run record.

    ``profile`` labels the budget of the trained runs it sits beside (the workflow passes the
    task's; its MLflow experiment is ``hkt-<profile>-<task>``). ``$HKT_SUITE`` and
    ``results_dir`` (default ``$HKT_RESULTS_DIR``, else ``results``) name the suite run, as they
    do for ``hkt train`` (:meth:`hkt.provenance.SuiteRun.of_job`)."""
    fit = BASELINES.lookup(name)
    data_dir, out = Path(data_dir), Path(out)
    t_start, t_epoch = time.perf_counter(), time.time()  # t_epoch: the MLflow run's start
    splits = {s: read_split(data_dir, s) for s in SPLITS}
    meta = read_metadata(data_dir / "train.parquet")
    task = str(meta.get("task") or data_dir.name)
    train = splits["train"]
    if max_train is not None and max_train < len(train):
        train = train.take(np.arange(int(max_train)))
    res: Fit = fit(Splits(train, splits["val"], splits["test"], int(meta["num_classes"])),
                   seed=seed, **options)
    # the task file the data was prepared for (its id names the run's folder), then its family
    task_id = {"id": str(meta["task_config"])} if meta.get("task_config") else {}
    config = {"task": {**task_id, "family": task, "num_classes": int(meta["num_classes"]),
                       "max_length": int(meta["max_length"]),
                       "prepare": meta.get("params") or {}},  # how `hkt prepare` made the data
              "model": {"name": name, **res.model},
              "train": {"profile": profile, **res.train, "max_train": max_train},
              "seed": seed, "variant": variant}
    fields = _record_fields(name, res, config, data_dir, splits, train, suite_run(
        {"results_dir": results_dir or os.environ.get(RESULTS_ENV)}))
    if res.history:
        write_history(res.history, out)
    fields["predictions"] = write_predictions(res.predictions, out, int(meta["num_classes"]))
    if not tracking_uri:
        record = make_record(**fields, wall_time_s=time.perf_counter() - t_start, mlflow=None,
                             env_digest=environment.save(out))  # writes OUT/environment.json
        check_against_record(read_predictions(out), record, out / PREDICTIONS_NAME)
        write_record(record, out)
        return record
    return _logged(fields, meta, res.history, {s: len(splits[s]) for s in SPLITS}, out,
                   tracking_uri, experiment or os.environ.get(EXPERIMENT_ENV)
                   or experiment_name(profile, task), t_start=t_start, t_epoch=t_epoch)


def _record_fields(name: str, res: Fit, config: dict[str, Any], data_dir: Path,
                   splits: dict[str, SplitData], train: SplitData,
                   run: SuiteRun) -> dict[str, Any]:
    """The record's fields but its wall time, MLflow run and environment digest."""
    from hkt.device import describe_device  # torch: keeps `hkt baseline --help` fast
    import torch

    steps, train_time = int(res.steps), float(res.train_time_s)
    per_step = res.batch_size or 0
    return dict(
        task=config["task"]["family"], model=name, variant=config["variant"], seed=config["seed"],
        profile=config["train"]["profile"], config=config, n_params=int(res.n_params),
        steps=steps, best_step=int(res.best_step), val_accuracy=float(res.val_accuracy),
        test_accuracy=float(res.test_accuracy), test_examples=len(splits["test"]),
        train_examples=len(train), data_dir=data_dir, git=git_state(),
        data_checksums={s: sha256_file(data_dir / split_file(s)) for s in SPLITS},
        data_content_checksums=content_checksums(data_dir),
        ms_per_step=1000 * train_time / steps if steps else None,
        samples_per_s=steps * per_step / train_time if steps and train_time > 0 else None,
        device=describe_device(torch.device("cpu")), external=BASELINES.lookup(name).__module__,
        suite_run=run, **res.extra)


def _logged(fields: dict[str, Any], meta: dict[str, Any], history: list[dict[str, Any]],
            sizes: dict[str, int], out: Path, uri: str, experiment: str, *, t_start: float,
            t_epoch: float) -> dict[str, Any]:
    """Write the record of a run logged to MLflow, as ``hkt train`` logs its runs: params, tags
    and validation curve, then the final metrics, the record and its config as artifacts."""
    from hkt.train.finish import log_final  # torch: keeps `hkt baseline --help` fast
    from hkt.train.tracking import Tracker

    f, run = fields, fields["suite_run"]
    tracker = Tracker(uri, experiment, f"{f['task']}-{f['model']}-{f['variant']}-s{f['seed']}")
    tags = {"task": f["task"], "model": f["model"], "variant": f["variant"],
            "seed": str(f["seed"]), "profile": f["profile"], **run.tags(), "device": f["device"],
            "hkt_version": hkt.__version__, "git_commit": str(f["git"][0]),
            "code_digest": code_digest(), "external": f["external"],
            **{f"data_sha256.{s}": h for s, h in f["data_checksums"].items()},
            **data_tags(meta)}
    tracker.start(None, params={**flatten(f["config"]), "n_params": f["n_params"]}, tags=tags,
                  start_time=t_epoch)
    tracker.log_dataset(f["task"], f["data_dir"], f["data_checksums"], sizes)
    for h in history:
        tracker.log_metrics({"val_acc": h["val_acc"]}, h["step"])
    try:
        record = make_record(**fields, wall_time_s=time.perf_counter() - t_start,
                             mlflow=(tracker.run_id, uri, tracker.experiment),
                             env_digest=environment.save(out))
        check_against_record(read_predictions(out), record, out / PREDICTIONS_NAME)
        write_record(record, out)
        atomic_write_text(out / "config.json", json.dumps(f["config"], indent=2) + "\n")
        # final metrics, record, config and predictions as `hkt train` logs them
        # (environment.json: by start())
        log_final(tracker, record, [out / "config.json", out / PREDICTIONS_NAME])
    except BaseException:
        tracker.finish("FAILED")
        raise
    return record


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every ``hkt baseline NAME`` takes (what the workflow's rule passes)."""
    parser.add_argument("--data", required=True, metavar="DATA_DIR",
                        help="prepared data (what `hkt prepare` wrote)")
    parser.add_argument("--out", required=True, metavar="RUN_DIR",
                        help="run directory: record.json (and history.csv)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", default="main", help="label in the tables (default: main)")
    parser.add_argument("--profile", default=NO_PROFILE,
                        help="budget label of the trained runs it sits beside, in the record and "
                        f"the MLflow experiment (the workflow passes the task's; default: "
                        f"{NO_PROFILE}, no profile set its budget)")
    parser.add_argument("--max-train", type=int, default=None,
                        help="use only the first N training examples (default: all)")
    parser.add_argument("--tracking-uri", default=None,
                        help="log the run to this MLflow store too (default: no MLflow run)")
    parser.add_argument("--experiment", default=None,
                        help=f"MLflow experiment (default: ${EXPERIMENT_ENV} if set, as the "
                        "workflow does, else hkt-<profile>-<task>, as hkt train names it)")
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help=f"the suite's results directory (default: ${RESULTS_ENV} if set, as "
                        "the workflow does, else results)")


def run_command(name: str, args: argparse.Namespace) -> int:
    """``hkt baseline NAME``: run it with the parsed arguments (the ones not in
    :func:`add_run_arguments` are the baseline's own options) and say what it scored."""
    own = {k: v for k, v in vars(args).items() if k not in _SHARED}
    rec = run_baseline(name, args.data, args.out, seed=args.seed, variant=args.variant,
                       profile=args.profile, max_train=args.max_train,
                       tracking_uri=args.tracking_uri, experiment=args.experiment,
                       results_dir=args.results_dir, **own)
    print(f"{rec['task']} {rec['model']} seed {rec['seed']}: val {100 * rec['val_accuracy']:.2f}% "
          f"test {100 * rec['test_accuracy']:.2f}% -> {Path(args.out) / RECORD_NAME}")
    return 0
