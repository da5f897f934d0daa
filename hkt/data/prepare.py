"""Task dispatch: config → family preparer → checked splits → Parquet files + data card.

A family module (every module of :mod:`hkt.data.families`: ``listops``, ``imdb``, ``cifar10``;
registered in :data:`hkt.data.families.FAMILIES`) exposes ``PREPARE_SCHEMA`` (validation of the
``prepare`` node), ``LOCATION_KEYS`` (the ``prepare`` keys that say where data come from, not what
they are: kept out of the Parquet metadata), ``check_config(cfg)`` and
``prepare(cfg, source) -> Prepared``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import hkt
from hkt.data.task_config import family_module, load_task_config
from hkt.data_layout import EXAMPLES, MANIFEST, SPLITS, split_file
from hkt.data.parquet import Prepared, data_card, write_manifest, write_split
from hkt.data.source_warning import provenance_warning
from hkt.errors import DataError
from hkt.fileio import atomic_write_text

log = logging.getLogger("hkt.data")

@dataclass
class PrepareResult:
    out: Path
    counts: dict[str, int]
    checksums: dict[str, str]
    seconds: float
    meta: dict[str, Any]


def _check(task: str, cfg: dict[str, Any], prep: Prepared) -> None:
    vocab_size = len(prep.vocab)
    for s in SPLITS:
        d = prep.splits.get(s)
        if d is None or len(d) == 0:
            raise DataError(f"{task}: the {s} split is empty (expected at least one example; check the source "
                            "layout and the split sizes in the config)")
        lens = d.lengths
        if lens.min() < 1:
            raise DataError(f"{task}: {s} has an empty sequence (id {d.ids[int(np.argmin(lens))]})")
        if lens.max() > cfg["max_length"]:
            raise DataError(f"{task}: {s} has a sequence of {int(lens.max())} tokens > max_length {cfg['max_length']}")
        if d.flat.size and int(d.flat.max()) >= vocab_size:
            raise DataError(f"{task}: {s} has token id {int(d.flat.max())} >= vocab size {vocab_size}")
        if d.labels.min() < 0 or d.labels.max() >= cfg["num_classes"]:
            raise DataError(f"{task}: {s} has a label outside 0..{cfg['num_classes'] - 1}")
        if len(set(d.ids)) != len(d.ids):
            raise DataError(f"{task}: {s} has duplicate ids")


def prepare_task(task: str, out: str | Path, *, source: str | Path | None = None,
                 overrides: tuple[str, ...] | list[str] = (), cfg: dict[str, Any] | None = None) -> PrepareResult:
    """Prepare ``task`` (a config name, e.g. ``listops``) into ``out``: three Parquet files + README.md.

    ``source``: a local archive/directory (or, for ListOps, a directory of LRA TSV files) used
    instead of the download/generator. ``overrides``: Hydra overrides of the task config.
    ``cfg``: an already loaded config (from :func:`hkt.data.task_config.load_task_config`).
    """
    if cfg is None:
        cfg = load_task_config(task, overrides)
    module = family_module(cfg["family"])
    out = Path(out)
    t0 = time.perf_counter()
    prep: Prepared = module.prepare(cfg, Path(source).expanduser() if source is not None else None)
    _check(task, cfg, prep)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # from here until the new one, the directory is not usable
    (out / EXAMPLES).unlink(missing_ok=True)  # the old data's facts: `hkt prepare` writes the new ones
    params = {k: v for k, v in cfg["prepare"].items() if k not in module.LOCATION_KEYS}
    checksums: dict[str, str] = {}
    metas = {}
    for s in SPLITS:
        meta = {
            "task": cfg["family"], "task_config": task, "split": s, "vocab": prep.vocab, "vocab_size": len(prep.vocab),
            "pad_id": prep.pad_id, "num_classes": cfg["num_classes"], "class_names": prep.class_names,
            "max_length": cfg["max_length"], "tokenizer": prep.tokenizer, "source": prep.source,
            "params": params, "num_examples": len(prep.splits[s]), "code_version": hkt.__version__,
        }
        checksums[s] = write_split(out / split_file(s), prep.splits[s], meta)
        metas[s] = meta
    card = data_card(task=task, cfg=params, meta=metas["train"], splits=prep.splits, checksums=checksums,
                     notes=prep.notes, location=prep.location,
                     warning=provenance_warning(metas["train"]))
    atomic_write_text(out / "README.md", card)
    write_manifest(out, checksums)
    dt = time.perf_counter() - t0
    return PrepareResult(out=out, counts={s: len(prep.splits[s]) for s in SPLITS}, checksums=checksums,
                         seconds=dt, meta=metas["train"])
