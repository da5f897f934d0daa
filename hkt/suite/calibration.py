"""The calibration of the cost model (:mod:`hkt.suite.estimate`): what a training step's time
depends on (:class:`Shape`: the composed model, the task's T, the batch) and the timing of each
distinct shape once on this device, cached per device, torch version and shape in
``RESULTS_DIR/plan/calibration.json`` (:func:`cached_timer`). Timing stops at
``calibration.budget_s``: the shapes left are named, never costed as another. Imports torch only
when a shape is timed (``hkt status`` reads the cost model)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hkt.fileio import atomic_write_text

__all__ = ["Shape", "shape_of", "calibration_file", "cached_timer"]


@dataclass(frozen=True)
class Shape:
    """What a training step's time depends on: the composed model, the task's T, the batch."""

    key: str          # digest of the model config, T and batch
    label: str        # e.g. listops/hkt/levels1 (the first job that has it)
    batch_size: int   # the job's batch


def shape_of(cfg: Any, batch_size: int, label: str) -> Shape:
    """The :class:`Shape` of a composed training config timed at ``batch_size``."""
    from omegaconf import OmegaConf

    model = OmegaConf.to_container(cfg.model, resolve=True)
    text = json.dumps({"model": model, "T": int(cfg.task.max_length), "batch": batch_size,
                       "classes": int(cfg.task.num_classes)}, sort_keys=True, default=str)
    return Shape(hashlib.sha256(text.encode()).hexdigest()[:16], label, int(cfg.train.batch_size))


def calibration_file(results_dir: str | Path) -> Path:
    """The cache of step times of a results directory (:func:`cached_timer` reads and writes it)."""
    return Path(results_dir) / "plan" / "calibration.json"


def cached_timer(cache: Path, device: Any, settings: Any, threads: int, *, fresh: bool = False,
                 on_measure: Callable[[str, float], None] | None = None
                 ) -> tuple[Callable[[Any, Shape], float | None], dict[str, Any]]:
    """A ``step_seconds`` function for :func:`estimate` that times a shape once on ``device``
    with ``threads`` CPU threads (cached in ``cache`` per device, torch version and shape), and
    its statistics: ``cached`` (shapes read from the cache) and ``untimed`` (shapes met after
    ``settings.budget_s`` seconds of timing: None, not timed, never another shape's time; a
    ``budget_s`` of null times every shape)."""
    import torch

    from hkt.device import describe_device
    from hkt.train.step_timing import measure_training_step

    if device.type == "cpu":
        torch.set_num_threads(threads)
    where = f"{describe_device(device)}|torch {torch.__version__}"
    store: dict[str, Any] = {}
    if cache.is_file() and not fresh:
        try:
            store = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            store = {}
    stats: dict[str, Any] = {"cached": 0, "untimed": [], "spent_s": 0.0}
    kind = device.type if device.type in ("cpu", "cuda") else "cpu"
    budget = (settings.get("budget_s") or {}).get(kind)

    def step_seconds(cfg: Any, shape: Shape) -> float | None:
        cap = settings.max_tokens.get(kind)
        t = int(cfg.task.max_length)
        n = min(t, int((settings.get("mean_length") or {}).get(str(cfg.task.id)) or t))
        batch = shape.batch_size if cap is None else max(1, min(shape.batch_size, int(cap) // n))
        key = f"{where}|length {n}|{shape_of(cfg, batch, shape.label).key}"
        if key in store:
            stats["cached"] += 1
            entry = store[key]
        elif budget is not None and stats["spent_s"] > float(budget):
            stats["untimed"].append(shape.label)
            return None
        else:
            start = time.perf_counter()
            m = measure_training_step(cfg, device, steps=int(settings.steps[kind]),
                                      warmup=int(settings.warmup[kind]), batch_size=batch,
                                      vocab_size=int(settings.vocab_size), seed=int(settings.seed),
                                      peak=False, length=n)
            stats["spent_s"] += time.perf_counter() - start
            entry = {"ms_per_step": m.ms_per_step, "batch": batch, "length": n, "shape": shape.label,
                     "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            store[key] = entry
            # whole or not at all: a full disk leaves the cache as it was, and no temporary file
            atomic_write_text(cache, json.dumps(store, indent=1, sort_keys=True))
            if on_measure:
                on_measure(shape.label, m.ms_per_step)
        return entry["ms_per_step"] / 1000 / entry["batch"] * shape.batch_size

    return step_seconds, stats
