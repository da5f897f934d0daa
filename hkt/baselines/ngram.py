"""Non-neural reference baselines on prepared data: majority class and hashed n-gram logistic
regression. An *external* baseline: it does not use ``hkt train``, only the two contracts, the
prepared Parquet files in and a run record out, so it joins the tables like any training run.

    python -m hkt.baselines.ngram --data DATA_DIR --out RUN_DIR --method ngram [--seed 0]
        [--variant main] [--profile LABEL] [--orders 1 2 3] [--buckets 1048576]
        [--epochs 5] [--batch-size 256] [--lr 0.05] [--max-train N] [--tracking-uri URI]
        [--experiment NAME] [--results-dir DIR]

* ``majority``: predicts the most frequent training label (0 parameters). Its accuracy is the
  class prior: the floor any model must clear.
* ``ngram``: bag of token n-grams (orders 1..3 by default) hashed into ``buckets`` features,
  weights log(1 + count) normalised to unit length per example, multinomial logistic regression
  (an ``EmbeddingBag`` + bias trained with sparse Adam). The best epoch on validation is tested.

Writes ``RUN_DIR/record.json`` with the public record writer (:mod:`hkt.record`, docs/contracts.md
"Runs"), ``history.csv`` (validation accuracy per epoch) and, with ``--tracking-uri``, logs
the same numbers, the record and its config to MLflow, in the experiment of the suite's trained
models (``$HKT_MLFLOW_EXPERIMENT``, which the workflow sets, else ``hkt-<profile>-<task>`` as
``hkt train`` names it); otherwise its MLflow fields are null. Record and MLflow run name the
suite run as ``hkt train``'s do (:class:`hkt.provenance.SuiteRun`): ``$HKT_SUITE`` (which the
workflow sets for every job) and ``--results-dir`` (default ``$HKT_RESULTS_DIR``, which the
workflow sets, else ``results``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch import nn

import hkt
from hkt import environment
from hkt.config import flatten
from hkt.data.layout import SPLITS, split_file
from hkt.data.parquet import SplitData, read_metadata
from hkt.device import describe_device
from hkt.errors import ConfigError, DataError, HKTError
from hkt.fileio import atomic_write_text, sha256_file
from hkt.provenance import SuiteRun, code_digest, git_state
from hkt.record import RECORD_NAME, make_record, write_history, write_record
from hkt.train.finish import log_final
from hkt.train.tracking import (EXPERIMENT_ENV, RESULTS_ENV, Tracker, data_tags, experiment_name,
                                suite_run)

METHODS = ("majority", "ngram")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier of Fibonacci hashing
_STEP = np.uint64(1_000_003)

__all__ = ["read_split", "hashed_ngrams", "majority_baseline", "ngram_baseline",
           "run_baseline", "main"]


def read_split(data_dir: str | Path, split: str) -> SplitData:
    """Read ``DATA_DIR/<split>.parquet`` as written by ``hkt prepare`` (id, tokens, label)."""
    path = Path(data_dir) / split_file(split)
    read_metadata(path)  # a clear DataError unless `hkt prepare` wrote this file
    try:
        table = pq.read_table(path, columns=["id", "tokens", "label"])
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path} is not a readable Parquet file: {exc}") from None
    tokens = table.column("tokens").combine_chunks()
    offsets = np.asarray(tokens.offsets, dtype=np.int64)
    flat = np.asarray(tokens.values, dtype=np.uint16)[offsets[0]: offsets[-1]]
    return SplitData(table.column("id").to_pylist(), flat, offsets - offsets[0],
                     np.asarray(table.column("label"), dtype=np.int64))


def hashed_ngrams(split: SplitData, orders: tuple[int, ...], bits: int,
                  chunk_tokens: int = 4_000_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per example, the distinct hashed n-grams and their weights (EmbeddingBag inputs).

    Returns ``(ids int64, offsets int64 (n+1), weights float32)``: example i's features are
    ``ids[offsets[i]:offsets[i+1]]`` with weights log(1 + count), scaled to unit L2 norm.
    """
    n = len(split)
    lengths = np.diff(split.offsets)
    out_ids, out_w, counts = [], [], np.zeros(n, dtype=np.int64)
    start = 0
    while start < n:  # chunks of examples bound the memory of the sort below
        limit = split.offsets[start] + chunk_tokens
        stop = max(start + 1, int(np.searchsorted(split.offsets, limit, side="right")) - 1)
        stop = min(stop, n)
        lo, hi = int(split.offsets[start]), int(split.offsets[stop])
        flat = split.flat[lo:hi].astype(np.uint64)
        rows = np.repeat(np.arange(stop - start, dtype=np.int64), lengths[start:stop])
        pos = np.arange(hi - lo, dtype=np.int64) - (split.offsets[start:stop] - lo)[rows]
        keys = []
        for order in orders:
            m = flat.size - order + 1
            if m <= 0:
                continue
            valid = pos[:m] <= (lengths[start:stop][rows[:m]] - order)
            h = np.full(m, np.uint64(order), dtype=np.uint64)
            for k in range(order):
                h = h * _STEP + flat[k: k + m]
            bucket = ((h * _MIX) >> np.uint64(64 - bits)).astype(np.int64)
            keys.append(rows[:m][valid] * (1 << bits) + bucket[valid])
        if keys:
            uniq, cnt = np.unique(np.concatenate(keys), return_counts=True)
            r = uniq >> bits
            out_ids.append(uniq & ((1 << bits) - 1))
            w = np.log1p(cnt.astype(np.float64))
            norm = np.sqrt(np.bincount(r, weights=w * w, minlength=stop - start))
            out_w.append((w / np.maximum(norm[r], 1e-12)).astype(np.float32))
            counts[start:stop] = np.bincount(r, minlength=stop - start)
        start = stop
    ids = np.concatenate(out_ids) if out_ids else np.zeros(0, dtype=np.int64)
    weights = np.concatenate(out_w) if out_w else np.zeros(0, dtype=np.float32)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ids, offsets, weights


def majority_baseline(train: SplitData, val: SplitData, test: SplitData) -> dict[str, Any]:
    """The most frequent training label, and its accuracy on val and test."""
    label = int(np.bincount(train.labels).argmax())
    return {"val_accuracy": float(np.mean(val.labels == label)),
            "test_accuracy": float(np.mean(test.labels == label)),
            "n_params": 0, "steps": 0, "best_step": 0, "history": [],
            "train_time_s": 0.0, "extra": {"majority_label": label}}


def ngram_baseline(train: SplitData, val: SplitData, test: SplitData, *, num_classes: int,
                   orders: tuple[int, ...] = (1, 2, 3), bits: int = 20, epochs: int = 5,
                   batch_size: int = 256, lr: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """Hashed n-gram multinomial logistic regression; the best validation epoch is tested."""
    torch.manual_seed(seed)
    feats = {name: hashed_ngrams(s, orders, bits) for name, s in
             (("train", train), ("val", val), ("test", test))}
    emb = nn.EmbeddingBag(1 << bits, num_classes, mode="sum", sparse=True)
    nn.init.zeros_(emb.weight)
    bias = nn.Parameter(torch.zeros(num_classes))
    opt_sparse = torch.optim.SparseAdam([emb.weight], lr=lr)
    opt_dense = torch.optim.Adam([bias], lr=lr)

    def batch(name: str, idx: np.ndarray):
        ids, offs, w = feats[name]
        starts, ends = offs[idx], offs[idx + 1]
        lens = ends - starts
        take = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if len(idx) else \
            np.zeros(0, dtype=np.int64)
        bag_offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
        return (torch.from_numpy(ids[take]), torch.from_numpy(bag_offsets.astype(np.int64)),
                torch.from_numpy(w[take]))

    def logits(name: str, idx: np.ndarray) -> torch.Tensor:
        i, o, w = batch(name, idx)
        return emb(i, o, per_sample_weights=w) + bias

    def accuracy(name: str, split: SplitData) -> float:
        with torch.no_grad():
            correct = 0
            for s in range(0, len(split), 4096):
                idx = np.arange(s, min(len(split), s + 4096))
                pred = logits(name, idx).argmax(-1).numpy()
                correct += int((pred == split.labels[idx]).sum())
        return correct / max(1, len(split))

    rng = np.random.default_rng(seed)
    labels = torch.from_numpy(np.array(train.labels, dtype=np.int64))
    best = {"val": -1.0, "state": None, "step": 0}
    history, step, t0 = [], 0, time.perf_counter()
    for _ in range(epochs):
        order = rng.permutation(len(train))
        for s in range(0, len(order), batch_size):
            idx = order[s: s + batch_size]
            loss = nn.functional.cross_entropy(logits("train", idx), labels[idx])
            opt_sparse.zero_grad()
            opt_dense.zero_grad()
            loss.backward()
            opt_sparse.step()
            opt_dense.step()
            step += 1
        val_acc = accuracy("val", val)
        history.append({"step": step, "val_acc": val_acc})
        if val_acc > best["val"]:
            best = {"val": val_acc, "step": step,
                    "state": (emb.weight.detach().clone(), bias.detach().clone())}
    train_time = time.perf_counter() - t0
    with torch.no_grad():
        emb.weight.copy_(best["state"][0])
        bias.copy_(best["state"][1])
    return {"val_accuracy": float(best["val"]), "test_accuracy": float(accuracy("test", test)),
            "n_params": int(emb.weight.numel() + bias.numel()), "steps": step,
            "best_step": int(best["step"]), "history": history, "train_time_s": train_time,
            "extra": {}}


def run_baseline(data_dir: str | Path, out: str | Path, *, method: str = "ngram", seed: int = 0,
                 variant: str = "main", profile: str = "baseline",
                 orders: tuple[int, ...] = (1, 2, 3), buckets: int = 1 << 20, epochs: int = 5,
                 batch_size: int = 256, lr: float = 0.05, max_train: int | None = None,
                 tracking_uri: str | None = None, experiment: str | None = None,
                 results_dir: str | Path | None = None) -> dict[str, Any]:
    """Train ``method`` on the prepared data in ``data_dir``; write and return the run record.

    ``$HKT_SUITE`` and ``results_dir`` (default ``$HKT_RESULTS_DIR``, else ``results``) name the
    suite run, as they do for ``hkt train`` (:meth:`hkt.provenance.SuiteRun.of_job`)."""
    if method not in METHODS:
        raise ConfigError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    bits = int(buckets).bit_length() - 1
    if buckets < 2 or (1 << bits) != buckets:
        raise ConfigError(f"--buckets must be a power of two >= 2, got {buckets}")
    if not orders or min(orders) < 1 or max(orders) > 8:
        raise ConfigError(f"--orders must be n-gram orders in 1..8, got {list(orders)}")
    data_dir, out = Path(data_dir), Path(out)
    t_start, t_epoch = time.perf_counter(), time.time()  # t_epoch: the MLflow run's start
    splits = {s: read_split(data_dir, s) for s in SPLITS}
    meta = read_metadata(data_dir / "train.parquet")
    task = str(meta.get("task") or data_dir.name)
    num_classes, max_length = int(meta["num_classes"]), int(meta["max_length"])
    train = splits["train"]
    if max_train is not None and max_train < len(train):
        train = train.take(np.arange(int(max_train)))
    if method == "majority":
        res = majority_baseline(train, splits["val"], splits["test"])
        model_cfg: dict[str, Any] = {"name": "majority"}
        train_cfg: dict[str, Any] = {"max_train": max_train}
    else:
        res = ngram_baseline(train, splits["val"], splits["test"], num_classes=num_classes,
                             orders=tuple(orders), bits=bits, epochs=epochs,
                             batch_size=batch_size, lr=lr, seed=seed)
        model_cfg = {"name": "ngram", "orders": list(orders), "buckets": int(buckets),
                     "features": "log1p(count), unit L2 norm", "classifier": "logistic regression"}
        train_cfg = {"epochs": epochs, "batch_size": batch_size, "lr": lr, "optimizer": "sparse adam",
                     "max_train": max_train}
    config = {"task": {"family": task, "num_classes": num_classes, "max_length": max_length,
                       "prepare": meta.get("params") or {}},  # how `hkt prepare` made the data
              "model": model_cfg, "train": {"profile": profile, **train_cfg},
              "seed": seed, "variant": variant}
    steps, train_time = int(res["steps"]), float(res["train_time_s"])
    fields: dict[str, Any] = dict(
        task=task, model=model_cfg["name"], variant=variant, seed=seed, profile=profile,
        config=config, n_params=res["n_params"], steps=steps, best_step=res["best_step"],
        val_accuracy=res["val_accuracy"], test_accuracy=res["test_accuracy"],
        test_examples=len(splits["test"]), train_examples=len(train), data_dir=data_dir, git=git_state(),
        data_checksums={s: sha256_file(data_dir / split_file(s)) for s in SPLITS},
        ms_per_step=1000 * train_time / steps if steps else None,
        samples_per_s=steps * batch_size / train_time if steps and train_time > 0 else None,
        device=describe_device(torch.device("cpu")), external="hkt.baselines.ngram",
        suite_run=suite_run({"results_dir": results_dir or os.environ.get(RESULTS_ENV)}),
        **res["extra"])
    if res["history"]:
        write_history(res["history"], out)
    if not tracking_uri:
        record = make_record(**fields, wall_time_s=time.perf_counter() - t_start, mlflow=None,
                             env_digest=environment.save(out))  # writes OUT/environment.json
        write_record(record, out)
        return record
    tracker = _start_mlflow(fields, meta, res["history"], {s: len(splits[s]) for s in SPLITS},
                            tracking_uri,
                            experiment or os.environ.get(EXPERIMENT_ENV)
                            or experiment_name(profile, task), start_time=t_epoch)
    try:
        record = make_record(**fields, wall_time_s=time.perf_counter() - t_start,
                             mlflow=(tracker.run_id, tracking_uri, tracker.experiment),
                             env_digest=environment.save(out))
        write_record(record, out)
        atomic_write_text(out / "config.json", json.dumps(config, indent=2) + "\n")
        # final metrics, record and config as `hkt train` logs them (environment.json: by start())
        log_final(tracker, record, [out / "config.json"])
    except BaseException:
        tracker.finish("FAILED")
        raise
    return record


def _start_mlflow(fields: dict[str, Any], data_meta: dict[str, Any],
                  history: list[dict[str, Any]], sizes: dict[str, int], uri: str,
                  experiment: str, *,
                  start_time: float | None = None) -> Tracker:
    """Start the baseline's MLflow run with its params, tags and validation curve, the way
    ``hkt train`` logs its runs; the caller logs the final metrics and closes the run."""
    f = fields
    run: SuiteRun = f["suite_run"]
    tracker = Tracker(uri, experiment, f"{f['task']}-{f['model']}-{f['variant']}-s{f['seed']}")
    tags = {"task": f["task"], "model": f["model"], "variant": f["variant"],
            "seed": str(f["seed"]), "profile": f["profile"], **run.tags(), "device": f["device"],
            "hkt_version": hkt.__version__, "git_commit": str(f["git"][0]),
            "code_digest": code_digest(),
            "external": f["external"],
            **{f"data_sha256.{s}": h for s, h in f["data_checksums"].items()},
            **data_tags(data_meta)}
    params = {**flatten(f["config"]), "n_params": f["n_params"]}
    tracker.start(None, params=params, tags=tags, start_time=start_time)
    tracker.log_dataset(f["task"], f["data_dir"], f["data_checksums"], sizes)
    for h in history:
        tracker.log_metrics({"val_acc": h["val_acc"]}, h["step"])
    return tracker


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="DATA_DIR",
                        help="prepared data (what `hkt prepare` wrote)")
    parser.add_argument("--out", required=True, metavar="RUN_DIR",
                        help="run directory: record.json (and history.csv)")
    parser.add_argument("--method", choices=METHODS, default="ngram")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", default="main", help="label in the tables (default: main)")
    parser.add_argument("--profile", default="baseline",
                        help="profile label written to the record (the workflow passes its own)")
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3],
                        help="n-gram orders (default: 1 2 3)")
    parser.add_argument("--buckets", type=int, default=1 << 20,
                        help="hashed feature count, a power of two (default: 2^20)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
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


def run(args: argparse.Namespace) -> int:
    rec = run_baseline(args.data, args.out, method=args.method, seed=args.seed,
                       variant=args.variant, profile=args.profile, orders=tuple(args.orders),
                       buckets=args.buckets, epochs=args.epochs, batch_size=args.batch_size,
                       lr=args.lr, max_train=args.max_train, tracking_uri=args.tracking_uri,
                       experiment=args.experiment, results_dir=args.results_dir)
    print(f"{rec['task']} {rec['model']} seed {rec['seed']}: val {100 * rec['val_accuracy']:.2f}% "
          f"test {100 * rec['test_accuracy']:.2f}% -> {Path(args.out) / RECORD_NAME}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hkt.baselines.ngram",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except HKTError as exc:
        print(f"hkt.baselines.ngram: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
