"""``hkt bench loader``: data-loader throughput beside the consumption rate of a training step.

The loader (``hkt.data.load.make_loader``) must never be the bottleneck: it should deliver
batches at least 20x faster than the smallest model trains on them. This benchmark reads a
prepared split (``--data DIR``; default: a ListOps paper-setting subset generated into a
temporary directory), times full passes of the loader with the training settings (shuffled,
padded to a multiple, with and without length bucketing), then times training steps (forward,
cross-entropy, backward, clipping, AdamW) of the MHA model with the sizes of the smallest
profile (``--profile smoke``) on real batches from the same loader. Prints a Markdown table
and writes ``loader_throughput.{csv,md}`` under ``--out`` (default ``results/bench``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from hkt.bench.common import add_run_arguments, csv_text, torch_threads, write_outputs
from hkt.train.run_config import compose_train
from hkt.data.load import TokenDataset, make_loader
from hkt.data.prepare import prepare_task
from hkt.device import describe_device, resolve_device
from hkt.models import build_model
from hkt.report.writers import markdown
from hkt.train.step_timing import TrainStep

COLUMNS = ("what", "samples_per_s", "ms_per_batch", "batch_size", "mean_padded_len", "ratio_to_step",
           "split", "task", "device", "threads")
REQUIRED_RATIO = 20.0  # the loader must be at least this many times faster than a training step


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help="prepared-data directory (default: generate a ListOps subset)")
    parser.add_argument("--split", default="train", help="split to read (default train)")
    parser.add_argument("--task", default="listops",
                        help="task config to generate when --data is absent (default listops)")
    parser.add_argument("--examples", type=int, default=20000,
                        help="training examples to generate when --data is absent (default 20000)")
    parser.add_argument("--profile", default="smoke", help="model sizes of this profile (default smoke: the "
                                                           "smallest model, the hardest test for the loader)")
    parser.add_argument("--model", default="mha", help="model config (default mha)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--pad-multiple", type=int, default=8)
    parser.add_argument("--max-batches", type=int, default=1000, help="loader batches timed per setting")
    parser.add_argument("--num-workers", type=int, default=0)
    add_run_arguments(parser, steps=10, warmup=2)


def time_loader(loader: Any, max_batches: int) -> dict[str, float]:
    """Samples/s and ms/batch of iterating ``loader`` (at most ``max_batches`` batches)."""
    n = batches = padded = 0
    t0 = time.perf_counter()
    for batch in loader:
        n += batch["tokens"].shape[0]
        padded += batch["tokens"].shape[1]
        batches += 1
        if batches >= max_batches:
            break
    dt = time.perf_counter() - t0
    return {"samples_per_s": n / dt, "ms_per_batch": 1000 * dt / max(batches, 1),
            "mean_padded_len": padded / max(batches, 1)}


def time_steps(model: Any, train_cfg: Any, batches: list[dict[str, Any]], *, steps: int, warmup: int,
               device: Any) -> list[float]:
    """Seconds per training step (as ``hkt train`` takes it) on the given batches (cycled)."""
    step = TrainStep(model, train_cfg, device, total_steps=warmup + steps)
    times = []
    for i in range(warmup + steps):
        b = batches[i % len(batches)]
        elapsed = step.time(*(b[k].to(device) for k in ("tokens", "mask", "labels")))
        if i >= warmup:
            times.append(elapsed)
    return times


def _model(args: argparse.Namespace, meta: dict[str, Any]) -> tuple[Any, dict[str, Any], Any]:
    """The model, its config, and the composed training config it trains under."""
    cfg = compose_train([f"profile={args.profile}", f"model={args.model}", "tracking.enabled=false"])
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model = build_model(model_cfg, vocab_size=int(meta["vocab_size"]), num_classes=int(meta["num_classes"]),
                        max_length=int(meta["max_length"]))
    return model, model_cfg, cfg


def run(args: argparse.Namespace) -> int:
    with torch_threads(args.threads):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    tmp = None
    if args.data:
        data_dir = Path(args.data)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="hkt-bench-loader-")
        data_dir = Path(tmp.name)
        t0 = time.perf_counter()
        prepare_task(args.task, data_dir, overrides=[f"prepare.splits.train={args.examples}",
                                                     "prepare.splits.val=100", "prepare.splits.test=100"])
        print(f"generated {args.examples:,} {args.task} examples in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    try:
        ds = TokenDataset(data_dir / f"{args.split}.parquet")
        rows = []
        for bucket in (False, True):
            loader = make_loader(ds, batch_size=args.batch_size, shuffle=True, seed=args.seed,
                                 pad_multiple=args.pad_multiple, bucket=bucket, drop_last=True,
                                 num_workers=args.num_workers)
            r = time_loader(loader, args.max_batches)
            rows.append({"what": f"loader ({'bucketed' if bucket else 'shuffled'}, {args.num_workers} workers)",
                         **r})
        torch.manual_seed(args.seed)
        model, model_cfg, train_cfg = _model(args, ds.meta)
        model = model.to(device)
        loader = make_loader(ds, batch_size=args.batch_size, shuffle=True, seed=args.seed,
                             pad_multiple=args.pad_multiple, drop_last=True)
        batches = []
        for b in loader:
            batches.append(b)
            if len(batches) >= args.steps + args.warmup:
                break
        times = time_steps(model, train_cfg, batches, steps=args.steps, warmup=args.warmup, device=device)
        med = statistics.median(times)
        step_rate = args.batch_size / med
        size = f"{model_cfg['d_model']}x{model_cfg['n_layers']}, {model_cfg['n_heads']} heads"
        rows.append({"what": f"training step ({args.model}, {args.profile} profile: {size})",
                     "samples_per_s": step_rate, "ms_per_batch": 1000 * med,
                     "mean_padded_len": statistics.mean(b["tokens"].shape[1] for b in batches)})
        for r in rows:
            r.update({"ratio_to_step": r["samples_per_s"] / step_rate, "batch_size": args.batch_size,
                      "split": args.split, "task": ds.meta.get("task_config", ds.meta.get("task")),
                      "device": describe_device(device), "threads": torch.get_num_threads()})
    finally:
        if tmp is not None:
            tmp.cleanup()
    worst = min(r["ratio_to_step"] for r in rows[:-1])
    ok = worst >= REQUIRED_RATIO
    lines = [f"Loader throughput vs training-step consumption ({rows[0]['task']} {args.split}, batch "
             f"{args.batch_size}, {rows[0]['device']})", "",
             markdown(["what", "samples/s", "ms/batch", "mean padded T", "× step rate"],
                      [[r["what"], f"{r['samples_per_s']:,.0f}", f"{r['ms_per_batch']:.2f}",
                        f"{r['mean_padded_len']:.0f}", f"{r['ratio_to_step']:.1f}"] for r in rows],
                      align="lrrrr").rstrip("\n")]
    lines += ["", f"{'PASS' if ok else 'FAIL'}: the loader is {worst:.0f}x faster than the training step "
              f"(required: >= {REQUIRED_RATIO:.0f}x)."]
    md = "\n".join(lines) + "\n"
    write_outputs(Path(args.out), "loader_throughput", csv_text(rows, COLUMNS), md)
    print(md, end="")
    return 0 if ok else 1
