"""ListOps: our implementation of the Long Range Arena generator's distribution; LRA's official
TSV files are read by :mod:`hkt.data.families._listops_tsv`.

Distribution (LRA ``lra_benchmarks/data/listops.py``): the root (depth 1) is an operator among
MIN, MAX, MED (median; the mean of the two middle values, truncated, for an even count) and SM
(sum mod 10); a node below the root at depth ``d`` is an operator with probability
``p_operator`` while ``d < max_depth``, else a leaf with a value 0..9 drawn uniformly; an
operator has 2..``max_args`` arguments, uniformly. A tree is kept when
``min_length < length < max_length``, where length counts operators, closing brackets and
values; duplicates are rejected. Every node's draw is independent of the others, so drawing them
breadth-first, many trees at once (what :func:`_draw_chunk` does with numpy), gives the same
distribution as LRA's recursive depth-first generator, and lets a tree be rejected as soon as
its committed size reaches ``max_length``.

Tokens (the "fixed" LRA pipeline: parentheses dropped): ``VOCAB`` of
:mod:`hkt.data.families._listops_vocab`, id 0 = padding.
An expression is its tokens in prefix order, e.g. ``[MAX 2 [MIN 4 7 ] 0 ]`` evaluates to 4.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from hkt.value_checks import boolean, nonneg_int, optional, pos_int, probability, text
from hkt.data.parquet import Prepared, SplitData, offsets_from_lengths
from hkt.data.families import register
from hkt.data.families._listops_tsv import from_tsv
from hkt.data.families._listops_vocab import (  # noqa: F401  (re-exported: listops.VOCAB, …)
    CLOSE, DIGIT0, OPERATORS, PAD, ROOT_NAMES, TOKENIZER, VOCAB, evaluate)
from hkt.errors import ConfigError, DataError

log = logging.getLogger("hkt.data")


PREPARE_SCHEMA: dict[str, Any] = {
    "source": optional(text),
    "seed": nonneg_int,
    "splits": {"train": pos_int, "val": pos_int, "test": pos_int},
    "min_length": nonneg_int,
    "max_length": pos_int,
    "max_depth": pos_int,
    "max_args": pos_int,
    "p_operator": probability,
    "chunk_size": pos_int,
    "read_tsv": boolean,
    "tsv_files": {"train": text, "val": text, "test": text},
    "mirror": optional(text),
}
# prepare keys that say where data come from, not what they are (kept out of the metadata)
LOCATION_KEYS = frozenset({"source", "mirror", "tsv_files", "read_tsv"})


def check_config(cfg: dict[str, Any]) -> None:
    p = cfg["prepare"]
    if cfg["num_classes"] != 10:
        raise ConfigError(f"task.num_classes must be 10 for ListOps (digits 0..9), got {cfg['num_classes']}")
    if p["max_args"] < 2:
        raise ConfigError(f"task.prepare.max_args must be >= 2, got {p['max_args']}")
    if p["min_length"] + 1 >= p["max_length"]:
        raise ConfigError(f"task.prepare.min_length ({p['min_length']}) must be < task.prepare.max_length - 1 "
                          f"({p['max_length']}): no length fits min_length < length < max_length")
    if p["max_length"] > cfg["max_length"] + 1:
        raise ConfigError(f"task.prepare.max_length ({p['max_length']}) exceeds the context "
                          f"task.max_length + 1 ({cfg['max_length'] + 1}): trees would not fit")


# ---- the generator -----------------------------------------------------------------------

#: One level of drawn nodes, per node: its tree (its index in the chunk, or among the accepted
#: trees once kept), whether it is an operator, the operator code, the argument count, the value
Level = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _expand(rng: np.random.Generator, m: int, *, max_length: int, max_depth: int, max_args: int,
            p_operator: float) -> tuple[list[Level], np.ndarray, np.ndarray]:
    """Draw ``m`` trees one level of every live tree at a time, as the LRA generator draws a
    tree: (the levels, whether each tree is still alive, its committed size). A tree dies as
    soon as its committed size (decided nodes, 2 per operator and 1 per leaf, plus one per
    argument slot not yet drawn) reaches ``max_length``. The only function here that draws from
    ``rng``: the order of its draws is the data."""
    levels = []
    tree = np.arange(m, dtype=np.int32)
    is_op = np.ones(m, dtype=bool)                       # the root is an operator
    op = rng.integers(0, 4, m, dtype=np.int8)
    nargs = rng.integers(2, max_args + 1, m, dtype=np.int32)
    val = np.zeros(m, dtype=np.int8)
    size = np.zeros(m, dtype=np.int64)                   # decided tokens per tree
    alive = np.ones(m, dtype=bool)
    depth = 1
    while True:
        levels.append((tree, is_op, op, nargs, val))
        op_tree = tree[is_op]
        size += np.bincount(tree, minlength=m) + np.bincount(op_tree, minlength=m)
        pending = np.bincount(op_tree, weights=nargs[is_op], minlength=m).astype(np.int64)
        alive &= size + pending < max_length
        expand = np.flatnonzero(is_op & alive[tree])
        if expand.size == 0:
            break
        counts = nargs[expand]
        tree = np.repeat(tree[expand], counts)
        n = tree.size
        depth += 1
        if depth < max_depth:
            is_op = rng.random(n) < p_operator
        else:
            is_op = np.zeros(n, dtype=bool)
        op = rng.integers(0, 4, n, dtype=np.int8)
        nargs = rng.integers(2, max_args + 1, n, dtype=np.int32)
        val = rng.integers(0, 10, n, dtype=np.int8)
    return levels, alive, size


def _keep(levels: list[Level], accept: np.ndarray) -> list[Level]:
    """The accepted trees' nodes, level by level, each tree renumbered among the accepted (their
    operators were all expanded, so the levels stay consistent)."""
    new_index = np.cumsum(accept) - 1
    kept = []
    for tree, is_op, op, nargs, val in levels:
        k = accept[tree]
        if not k.any():
            break
        kept.append((new_index[tree[k]], is_op[k], op[k], nargs[k].astype(np.int64), val[k].astype(np.int64)))
    return kept


def _bottom_up(kept: list[Level]) -> tuple[list[np.ndarray], list[np.ndarray], list[Any]]:
    """Subtree sizes and values, from the deepest level up: per level (sizes, values, and where
    it has operators, (their indices, argument counts, first child's index in the next level))."""
    sizes: list[np.ndarray] = [None] * len(kept)  # type: ignore[list-item]
    values: list[np.ndarray] = [None] * len(kept)  # type: ignore[list-item]
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [None] * len(kept)  # type: ignore[list-item]
    for d in range(len(kept) - 1, -1, -1):
        _, is_op, op, nargs, val = kept[d]
        sz = np.ones(is_op.size, dtype=np.int64)
        vv = val.copy()
        oi = np.flatnonzero(is_op)
        if oi.size:
            counts = nargs[oi]
            starts = np.zeros(oi.size, dtype=np.int64)
            np.cumsum(counts[:-1], out=starts[1:])
            cs, cv = sizes[d + 1], values[d + 1]
            assert cs.size == int(counts.sum())
            sz[oi] = 2 + np.add.reduceat(cs, starts)
            # median by counting (values are 0..9): the values of ranks (c-1)//2 and c//2
            gid = np.repeat(np.arange(oi.size), counts)
            cum = np.bincount(gid * 10 + cv, minlength=oi.size * 10).reshape(oi.size, 10).cumsum(axis=1)
            lo = (cum > ((counts - 1) // 2)[:, None]).argmax(axis=1)
            hi = (cum > (counts // 2)[:, None]).argmax(axis=1)
            med = (lo + hi) // 2
            code = op[oi]
            vv[oi] = np.select(
                [code == 0, code == 1, code == 2],
                [np.minimum.reduceat(cv, starts), np.maximum.reduceat(cv, starts), med],
                np.add.reduceat(cv, starts) % 10,
            )
            groups[d] = (oi, counts, starts)
        sizes[d], values[d] = sz, vv
    return sizes, values, groups


def _top_down(kept: list[Level], sizes: list[np.ndarray], groups: list[Any],
              n_acc: int) -> tuple[np.ndarray, np.ndarray]:
    """The accepted trees' tokens, each node at its position in its tree's prefix order, from
    the root down: (flat uint8 tokens, offsets)."""
    offsets = offsets_from_lengths(sizes[0])
    flat = np.empty(int(offsets[-1]), dtype=np.uint8)
    pos = np.zeros(n_acc, dtype=np.int64)
    for d, (t, is_op, op, _, val) in enumerate(kept):
        g = offsets[t] + pos
        flat[g] = np.where(is_op, 1 + op, DIGIT0 + val)
        if groups[d] is not None:
            oi, counts, starts = groups[d]
            flat[g[oi] + sizes[d][oi] - 1] = CLOSE
            cs = sizes[d + 1]
            csum = np.cumsum(cs)
            before = csum - cs
            pos = np.repeat(pos[oi], counts) + 1 + before - np.repeat(before[starts], counts)
    return flat, offsets


def _draw_chunk(rng: np.random.Generator, m: int, *, min_length: int, max_length: int, max_depth: int,
                max_args: int, p_operator: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``m`` trees breadth-first; return the accepted ones as (flat uint8 tokens, offsets, labels).

    Level arrays hold, per node: its tree, whether it is an operator, the operator code, the
    argument count and the leaf value (:data:`Level`). An operator's children are contiguous in
    the next level, in order. Four phases: expand level by level (:func:`_expand`, the only
    draws), keep the accepted trees (:func:`_keep`), values bottom-up (:func:`_bottom_up`), token
    positions top-down (:func:`_top_down`).
    """
    levels, alive, size = _expand(rng, m, max_length=max_length, max_depth=max_depth,
                                  max_args=max_args, p_operator=p_operator)
    accept = alive & (size > min_length)
    n_acc = int(accept.sum())
    if n_acc == 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64)
    kept = _keep(levels, accept)
    sizes, values, groups = _bottom_up(kept)
    flat, offsets = _top_down(kept, sizes, groups, n_acc)
    return flat, offsets, values[0]


BARREN_CHUNKS = 20  # the generator gives up after this many chunks in a row without a new tree


def generate(n: int, *, seed: int, min_length: int, max_length: int, max_depth: int, max_args: int,
             p_operator: float, chunk_size: int, progress: bool = False
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Generate ``n`` distinct trees: (flat uint16 tokens, offsets, labels, counters).

    Deterministic in (seed, parameters, chunk_size). Trees come in generation order.
    """
    rng = np.random.default_rng(seed)
    seen: set[bytes] = set()
    parts_flat, parts_len, parts_lab = [], [], []
    got = attempts = duplicates = 0
    barren = 0
    t0 = time.perf_counter()
    while got < n:
        flat, offsets, labels = _draw_chunk(rng, chunk_size, min_length=min_length, max_length=max_length,
                                            max_depth=max_depth, max_args=max_args, p_operator=p_operator)
        attempts += chunk_size
        raw = flat.tobytes()
        off = offsets.tolist()
        keep = np.zeros(labels.size, dtype=bool)
        for i in range(labels.size):
            key = raw[off[i]:off[i + 1]]
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            keep[i] = True
            got += 1
            if got == n:
                break
        if not keep.any():
            barren += 1
            if barren >= BARREN_CHUNKS:
                raise DataError(
                    f"ListOps generator found no new tree in {BARREN_CHUNKS * chunk_size:,} attempts ({got:,} of "
                    f"{n:,} so far): min_length={min_length} < length < max_length={max_length} with max_depth="
                    f"{max_depth}, max_args={max_args}, p_operator={p_operator} is (nearly) exhausted")
            continue
        barren = 0
        lens = np.diff(offsets)[keep]
        mask = np.repeat(keep, np.diff(offsets))
        parts_flat.append(flat[mask])
        parts_len.append(lens)
        parts_lab.append(labels[keep])
        if progress:
            dt = time.perf_counter() - t0
            log.info("listops: %d/%d trees (%.0f trees/s, %d attempts)", got, n, got / max(dt, 1e-9), attempts)
    flat = np.concatenate(parts_flat).astype(np.uint16) if parts_flat else np.zeros(0, np.uint16)
    lens = np.concatenate(parts_len) if parts_len else np.zeros(0, np.int64)
    offsets = offsets_from_lengths(lens)
    labels = np.concatenate(parts_lab).astype(np.int64) if parts_lab else np.zeros(0, np.int64)
    return flat, offsets, labels, {"attempts": attempts, "duplicates": duplicates}


# ---- task preparation --------------------------------------------------------------------

@register("listops")
def prepare(cfg: dict[str, Any], source: Path | None):
    """Generate (or read from TSV files) the three splits; returns a ``Prepared``."""

    p = cfg["prepare"]
    gen_params = {k: p[k] for k in ("seed", "min_length", "max_length", "max_depth", "max_args",
                                    "p_operator", "chunk_size")}
    if source is None and p.get("source"):
        source = Path(p["source"]).expanduser()
    if source is None and p["read_tsv"]:
        if not p.get("mirror"):
            raise DataError("task.prepare.read_tsv is true but no TSV directory is given: pass --source DIR "
                            "(LRA's lra_release/listops-1000/), set task.prepare.source, or a mirror "
                            "(HKT_DATA_MIRROR) with a listops/ folder")
        source = Path(p["mirror"]).expanduser() / "listops"
    if source is not None:
        if not source.is_dir():
            raise DataError(f"ListOps source {source} must be a directory holding "
                            f"{', '.join(p['tsv_files'].values())} (LRA's lra_release/listops-1000/)")
        return from_tsv(cfg, source)

    sizes = p["splits"]
    order = ("test", "val", "train")
    total = sum(sizes[s] for s in order)
    t0 = time.perf_counter()
    flat, offsets, labels, counters = generate(total, progress=True, **gen_params)
    dt = time.perf_counter() - t0
    log.info("listops: generated %d trees in %.1f s (%.0f trees/s; %d attempts, %d duplicates rejected)",
             total, dt, total / max(dt, 1e-9), counters["attempts"], counters["duplicates"])
    splits, a = {}, 0
    for s in order:  # each split is a contiguous run of the stream: rows a..b-1
        b = a + sizes[s]
        splits[s] = SplitData([f"{s}/{i:06d}" for i in range(sizes[s])], flat[offsets[a]:offsets[b]],
                              offsets[a:b + 1] - offsets[a], labels[a:b])
        a = b
    splits = {s: splits[s] for s in ("train", "val", "test")}
    src = {"kind": "generated", "generator": "hkt.data.listops (LRA ListOps distribution)", **gen_params,
           "splits": dict(sizes), "attempts": counters["attempts"], "duplicates_rejected": counters["duplicates"]}
    notes = [
        "Generated with the Long Range Arena ListOps distribution: root = operator; below it a node is an "
        f"operator with probability {p['p_operator']} while depth < {p['max_depth']}; "
        f"2..{p['max_args']} arguments; values 0..9; kept when {p['min_length']} < length < {p['max_length']}; "
        "duplicates rejected across all splits.",
        "Splits are drawn from one stream in the order test, val, train, so changing the train size keeps "
        "val and test identical; no expression occurs in two splits.",
        "Tokens: " + " ".join(f"{i}={t}" for i, t in enumerate(VOCAB)) + " (parentheses dropped).",
    ]
    return Prepared(splits=splits, vocab=VOCAB, pad_id=PAD, tokenizer=TOKENIZER,
                    class_names=[str(d) for d in range(10)], source=src, notes=notes, location=None)
