"""Per-example facts of a prepared task: what each validation and test example is, computed once
and kept beside its Parquet as :data:`hkt.data_layout.EXAMPLES`, so that the report reads a
model's predictions example by example (accuracy by ListOps tree depth, by length, by class)
without the splits themselves: a publication carries this file alone (docs/results/SUITE/data/TASK/).

One row per example of val and test, keyed by ``split`` ("val"/"test") and ``row`` (its 0-based
row in that split's Parquet, as ``predictions.parquet`` names it), with its ``label``, and:

* ListOps: ``root_op`` (MIN, MAX, MED, SM), ``depth`` (the tree's depth, the root is 1),
  ``length`` (its length in tokens), ``root_args`` (how many arguments the root has) and each
  rule reference's answer (:data:`hkt.rule_references.RULE_REFERENCES`, one column each, named as the
  rule: :func:`hkt.baselines._listops_rules.rule_answers`);
* IMDB: ``length`` (the review's length in bytes, after truncation to ``max_length``);
* CIFAR-10: ``class`` (the label's class name).

``hkt prepare`` writes it; :func:`load_examples` makes it on first need for data prepared
before (docs/data.md). Its reader is the report's per-example readings
(:mod:`hkt.report.example_runs`); the ListOps rules' answers come from :mod:`hkt.baselines`, a
layer above the data package (:mod:`hkt.facts`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from hkt.data_layout import EXAMPLES, split_file
from hkt.errors import DataError
from hkt.fileio import atomic_path

__all__ = ["FACT_SPLITS", "example_facts", "write_examples", "load_examples", "tree_facts"]

#: The splits the facts describe (those a run's predictions cover).
FACT_SPLITS = ("val", "test")


def tree_facts(flat: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per ListOps expression (tokens ``flat[offsets[i]:offsets[i+1]]``, ids of
    :mod:`hkt.data.families._listops_vocab`): its depth (deepest operator nesting, the root 1)
    and the number of the root's arguments (digits and sub-expressions directly under it)."""
    from hkt.data.families._listops_vocab import CLOSE, DIGIT0, OPERATORS

    t = flat.astype(np.int64)
    opens = (t >= 1) & (t <= len(OPERATORS))
    step = opens.astype(np.int64) - (t == CLOSE)
    level = np.cumsum(step)             # nesting after each token (0 between balanced examples)
    before = level - step               # nesting before it
    n = len(offsets) - 1
    starts = offsets[:-1]
    nonempty = np.diff(offsets) > 0
    depth = np.zeros(n, dtype=np.int64)
    args = np.zeros(n, dtype=np.int64)
    if t.size and nonempty.any():
        base = before[starts[nonempty]]  # nesting before each example's first token
        depth[nonempty] = np.maximum.reduceat(level, starts[nonempty]) - base
        direct = ((opens | ((t >= DIGIT0) & (t < DIGIT0 + 10)))
                  & (before - np.repeat(before[starts], np.diff(offsets)) == 1))
        args[nonempty] = np.add.reduceat(direct.astype(np.int64), starts[nonempty])
    return depth, args


def _rules() -> dict[str, tuple[int | None, bool]]:
    """Each rule reference's (depth, root only), from its own module."""
    from hkt.baselines import depth_rule, exact_rule, root_op_prior
    from hkt.rule_references import RULE_REFERENCES

    rules = {root_op_prior.NAME: (None, True), exact_rule.NAME: (None, False),
             **{depth_rule.rule_name(k): (k, False) for k in depth_rule.DEPTHS}}
    return {name: rules[name] for name in RULE_REFERENCES}


def example_facts(data_dir: str | Path) -> pl.DataFrame:
    """The facts (module docstring) of the prepared data in ``data_dir``, from its splits."""
    from hkt.baselines._listops_rules import ROOT_NAMES, root_operators, rule_answers
    from hkt.baselines.run import Splits, read_split
    from hkt.data.parquet import read_metadata

    data_dir = Path(data_dir)
    meta = read_metadata(data_dir / split_file("train"))
    family = str(meta.get("task"))
    splits = {s: read_split(data_dir, s) for s in ("train", *FACT_SPLITS)}
    frames = []
    answers: dict[str, dict[str, np.ndarray]] = {}
    if family == "listops":
        data = Splits(splits["train"], splits["val"], splits["test"], int(meta["num_classes"]))
        answers = {name: rule_answers(data, depth, root_only=root_only, name=name)
                   for name, (depth, root_only) in _rules().items()}
    for s in FACT_SPLITS:
        d = splits[s]
        cols: dict[str, pl.Series] = {
            "split": pl.Series([s] * len(d), dtype=pl.String),
            "row": pl.Series(np.arange(len(d), dtype=np.int64)),
            "label": pl.Series(d.labels.astype(np.int64))}
        if family == "listops":
            depth, args = tree_facts(d.flat, d.offsets)
            names = np.asarray(ROOT_NAMES)[root_operators(d, "the per-example facts")]
            cols |= {"root_op": pl.Series(names.tolist(), dtype=pl.String),
                     "depth": pl.Series(depth), "length": pl.Series(d.lengths.astype(np.int64)),
                     "root_args": pl.Series(args),
                     **{name: pl.Series(a[s].astype(np.int64)) for name, a in answers.items()}}
        elif family == "imdb":
            cols["length"] = pl.Series(d.lengths.astype(np.int64))
        elif family == "cifar10":
            classes = list(meta.get("class_names") or [])
            if len(classes) != int(meta["num_classes"]):
                raise DataError(f"{data_dir}: its metadata names {len(classes)} classes for "
                                f"{meta['num_classes']} labels; prepare it again (`hkt prepare`)")
            cols["class"] = pl.Series([classes[i] for i in d.labels.tolist()], dtype=pl.String)
        frames.append(pl.DataFrame(cols))
    return pl.concat(frames)


def write_examples(data_dir: str | Path) -> Path:
    """Write :data:`EXAMPLES` of the prepared data in ``data_dir`` beside its splits."""
    path = Path(data_dir) / EXAMPLES
    facts = example_facts(data_dir)
    with atomic_path(path) as tmp:
        facts.write_parquet(tmp)
    return path


def load_examples(data_dir: str | Path) -> pl.DataFrame | None:
    """The facts of the task data in ``data_dir``: its :data:`EXAMPLES`, made there on first
    need from its splits (kept in memory where the folder is read-only); None where it holds
    neither (a publication of before the facts, which keeps only ``metadata.json``)."""
    data_dir = Path(data_dir)
    path = data_dir / EXAMPLES
    if not path.is_file():
        if not (data_dir / split_file("train")).is_file():
            return None
        try:
            write_examples(data_dir)
        except OSError:
            return example_facts(data_dir)
    try:
        return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path} is not a readable Parquet file ({why}); delete it and it is "
                        "made again from the splits beside it") from None
