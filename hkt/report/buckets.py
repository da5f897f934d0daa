"""Readings bucket by bucket (:mod:`hkt.report.example_runs`' runs and facts): where each
model's accuracy lies, and HKT − MHA per bucket and on the one contrast declared beforehand.

* :func:`breakdown_table`: accuracy per bucket of a fact (ListOps: tree depth, depth group,
  answer depth, length quartile, root operator; IMDB: length quartile; CIFAR-10: class) for
  every model and rule;
* :func:`breakdown_gap_table`: HKT − MHA per bucket, each by the error model
  (:func:`hkt.report.stats.paired_difference`: Welch over seeds plus the paired test-set
  variance), **exploratory**: Holm-adjusted within each (publication, variant, facet)
  (statsmodels' ``multipletests``), no reading of a bucket under ``min_bucket_examples``
  (config/report/settings.yaml), and no verdict rests on it;
* :func:`mechanism_table`: the contrast declared in config before the runs are read (the
  mechanism claim's): HKT − MHA on the deepest of ``depth_groups`` groups of test examples
  minus on the shallowest, with its own test over seeds plus the paired test-set error; by the
  tree's depth and by the depth its answer needs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from hkt import paper
from hkt.report.example_display import ci_text, p_text
from hkt.report.example_runs import Readings, mean_std, seed_groups
from hkt.report.paired import finite_or_none
from hkt.report.report_settings import Settings
from hkt.report.rule_agreement import rule_columns
from hkt.report.stats import holm, paired_difference
from hkt.report.writers import Display, pm, signed
from hkt.rule_references import RULE_REFERENCES
from hkt.runs_frame import MODEL_ORDER, ordered

__all__ = ["DEPTH", "DEPTH_GROUP", "NEEDED", "LENGTH", "ROOT", "CLASS", "depth_groups",
           "answer_depth", "breakdown_table", "breakdown_display", "labelled_by_variant",
           "breakdown_gap_table", "breakdown_gap_display", "gap_caption", "mechanism_table",
           "TREE_DEPTH",
           "ANSWER_DEPTH", "ANSWER_RULES"]

#: The facets a breakdown reads, in this order, with the fact each buckets.
DEPTH, DEPTH_GROUP, NEEDED, LENGTH, ROOT, CLASS = (
    "depth", "depth group", "answer depth", "length quartile", "root operator", "class")
#: The rules of increasing depth that "answer depth" reads: an example's answer depth is the
#: first of them that answers it right ("deeper" where none does: only the exact evaluator).
ANSWER_RULES = (("the prior", "root_op_prior"), ("depth 1", "depth1_rule"),
                ("depth 2", "depth2_rule"), ("depth 3", "depth3_rule"))


def _length_buckets(length: np.ndarray, k: int) -> tuple[np.ndarray, list[str]]:
    """Each example's length bucket (0..k−1, by the test set's quantiles) and the labels."""
    edges = np.quantile(length, [i / k for i in range(1, k)]) if k > 1 else np.zeros(0)
    idx = np.searchsorted(edges, length, side="left")
    labels = []
    for b in range(k):
        here = length[idx == b]
        labels.append(f"Q{b + 1}: {int(here.min())}–{int(here.max())}" if here.size else "")
    return idx, labels


def _span(values: np.ndarray) -> str:
    """``depth 2–4``, or ``depth 9`` where they are one."""
    lo, hi = int(values.min()), int(values.max())
    return f"depth {lo}" if lo == hi else f"depth {lo}–{hi}"


def depth_groups(depth: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The shallowest and deepest of ``k`` groups of trees by depth (boolean masks): depth at
    most that of the example at rank N/k, and at least that at rank N − N/k; None where one
    depth spans both (the groups would share their trees' depth)."""
    n = depth.size
    if n == 0:
        return None
    s = np.sort(depth)
    size = math.ceil(n / k)
    low, high = s[size - 1], s[n - size]
    if low >= high:
        return None
    return depth <= low, depth >= high


def _facets(fact: pl.DataFrame, settings: Settings
            ) -> list[tuple[str, np.ndarray, list[str]]]:
    """The facets of a task's test facts: (name, each example's bucket index, bucket labels)."""
    out = []
    if "depth" in fact.columns:
        depth = fact["depth"].to_numpy()
        values = sorted(set(depth.tolist()))
        out.append((DEPTH, np.searchsorted(values, depth), [str(v) for v in values]))
        groups = depth_groups(depth, settings.depth_groups)
        if groups is not None:
            shallow, deep = groups
            idx = np.where(shallow, 0, np.where(deep, 2, 1))
            span = [depth[idx == i] for i in range(3)]
            names = ["shallowest", "middle", "deepest"]
            out.append((DEPTH_GROUP, idx, [f"{names[i]}: {_span(v)}" if v.size else ""
                                           for i, v in enumerate(span)]))
    if (needed := answer_depth(fact)) is not None:
        out.append((NEEDED, needed, [name for name, _ in ANSWER_RULES] + ["deeper"]))
    if "length" in fact.columns:
        idx, labels = _length_buckets(fact["length"].to_numpy(), settings.length_buckets)
        out.append((LENGTH, idx, labels))
    if "root_op" in fact.columns:
        from hkt.data.families.listops import ROOT_NAMES

        ops = fact["root_op"].to_list()
        out.append((ROOT, np.asarray([ROOT_NAMES.index(o) for o in ops]), list(ROOT_NAMES)))
    if "class" in fact.columns:
        names = fact["class"].to_list()
        classes = sorted(set(zip(fact["label"].to_list(), names)))
        index = {c: i for i, c in enumerate(classes)}
        out.append((CLASS, np.asarray([index[c] for c in zip(fact["label"].to_list(), names)]),
                    [n for _, n in classes]))
    return out


BREAKDOWN_SCHEMA = {"task": pl.String, "length": pl.Int64, "variant": pl.String,
                    "facet": pl.String,
                    "bucket": pl.String, "order": pl.Int64, "examples": pl.Int64,
                    "model": pl.String, "seeds": pl.Int64, "accuracy_mean": pl.Float64,
                    "accuracy_std": pl.Float64}


def breakdown_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """Accuracy (%) per bucket of each facet, per model (mean and std over seeds) and per rule
    reference of the task's facts (one answer per example; a rule with runs of its own is read
    from them)."""
    rows = []
    groups = seed_groups(r, runs, variant)
    for (task, length), fact in sorted(r.facts.items(), key=lambda kv: (str(kv[0][0]),
                                                                        kv[0][1] or 0)):
        mine = [(m, c) for t, n, m, (c, _, _), _ in groups if (t, n) == (task, length)]
        if not mine:
            continue
        label = fact["label"].to_numpy()
        mine += [(rule, (fact[rule].to_numpy() == label)[None, :])
                 for rule in rule_columns(fact) if rule not in {m for m, _ in mine}]
        for facet, idx, labels in _facets(fact, r.settings):
            for b, lab in enumerate(labels):
                where = idx == b
                if not where.any():
                    continue
                for model, correct in mine:
                    mean, std = mean_std(correct[:, where].mean(axis=1))
                    rows.append({"task": task, "length": length, "variant": variant,
                                 "facet": facet, "bucket": lab,
                                 "order": b, "examples": int(where.sum()), "model": model,
                                 "seeds": correct.shape[0], "accuracy_mean": mean,
                                 "accuracy_std": std})
    return pl.DataFrame(rows, schema=BREAKDOWN_SCHEMA)


def breakdown_display(t: pl.DataFrame) -> Display:
    """One row per (task, variant, facet, bucket), one column per model (mean ± std over
    seeds)."""
    models = ordered(t["model"].unique().to_list(), MODEL_ORDER) if len(t) else []
    header = ["task", "T", "variant", "facet", "bucket", "examples",
              *(RULE_REFERENCES.get(m, m) for m in models)]
    rows = []
    keys = t.select("task", "length", "variant", "facet", "order", "bucket", "examples").unique(
        maintain_order=True).rows()
    cell = {(r["task"], r["length"], r["variant"], r["facet"], r["order"], r["model"]):
            pm(r["accuracy_mean"], r["accuracy_std"]) for r in t.iter_rows(named=True)}
    for task, length, variant, facet, order, bucket, examples in keys:
        rows.append([task, str(length), variant, facet, bucket, str(examples),
                     *(cell.get((task, length, variant, facet, order, m), "") for m in models)])
    return header, rows


def labelled_by_variant(breakdown: pl.DataFrame, main_variant: str = "main") -> pl.DataFrame:
    """The breakdown with each model of a variant other than ``main_variant`` named with it
    (``hkt (lr1e3_steps20k)``) and each rule once (a rule answers alike in every variant): one
    line per model and variant in the figure, which reads the model column only."""
    if breakdown.is_empty():
        return breakdown
    rule = pl.col("model").is_in(list(RULE_REFERENCES))
    named = (pl.when(rule | (pl.col("variant") == main_variant)).then(pl.col("model"))
             .otherwise(pl.format("{} ({})", pl.col("model"), pl.col("variant"))))
    return (breakdown.with_columns(named.alias("model"))
            .unique(subset=["task", "length", "facet", "order", "model"], keep="first",
                    maintain_order=True))


GAP_SCHEMA = {"task": pl.String, "length": pl.Int64, "variant": pl.String, "facet": pl.String,
              "bucket": pl.String, "order": pl.Int64, "examples": pl.Int64,
              "difference_pp": pl.Float64, "paired_ci_low_pp": pl.Float64,
              "paired_ci_high_pp": pl.Float64, "paired_p_value": pl.Float64,
              "holm_p_value": pl.Float64, "significant": pl.String, "seeds_a": pl.Int64,
              "seeds_b": pl.Int64}


def _compared(r: Readings, runs: pl.DataFrame, variant: str) -> Iterable[tuple[Any, ...]]:
    """Per task with facts where both compared models (HKT, MHA) have predictions, in order:
    (task, length, its facts, HKT's and MHA's seeds' correctness, as :func:`seed_groups` gives)."""
    a, b = paper.COMPARED_MODELS
    by = {(t, n, m): c for t, n, m, (c, _, _), _ in seed_groups(r, runs, variant)}
    for (task, length), fact in sorted(r.facts.items(), key=lambda kv: (str(kv[0][0]),
                                                                        kv[0][1] or 0)):
        ca, cb = by.get((task, length, a)), by.get((task, length, b))
        if ca is not None and cb is not None:
            yield task, length, fact, ca, cb


def _bucket_row(r: Readings, ca: np.ndarray, cb: np.ndarray, where: np.ndarray
                ) -> dict[str, Any]:
    """One bucket's HKT − MHA by the error model, or its difference alone where the bucket has
    fewer examples than ``min_bucket_examples`` or a side one seed (not read)."""
    n = int(where.sum())
    diff = 100 * float(ca[:, where].mean() - cb[:, where].mean())
    if n < r.settings.min_bucket_examples:
        return {"difference_pp": diff, "significant":
                f"not read (under {r.settings.min_bucket_examples} examples)"}
    d = paired_difference(ca[:, where], cb[:, where], r.settings.confidence)
    return {"difference_pp": d.diff, "paired_ci_low_pp": finite_or_none(d.ci_low),
            "paired_ci_high_pp": finite_or_none(d.ci_high), "paired_p_value": finite_or_none(d.p_value),
            "significant": None if d.reason == "" else f"n/a ({d.reason})"}


def _with_holm(rows: list[dict[str, Any]], confidence: float) -> list[dict[str, Any]]:
    """``rows`` (one family: a task, T, variant and facet) with Holm's adjusted p and the
    significance it gives at 1 − ``confidence``."""
    adjusted = holm([row.get("paired_p_value") for row in rows], 1 - confidence)
    level = f"{100 * (1 - confidence):.3g}%"
    for row, p in zip(rows, adjusted):
        row["holm_p_value"] = p
        if p is not None:
            row["significant"] = f"yes (Holm p < {level})" if p < 1 - confidence else \
                f"no (Holm p ≥ {level})"
    return rows


def breakdown_gap_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """HKT − MHA (pp) per bucket of each facet by the error model (Welch over seeds plus the
    paired test-set variance), exploratory: Holm-adjusted within each (task, T, variant, facet),
    a bucket under ``min_bucket_examples`` listed but not read."""
    rows = []
    for task, length, fact, ca, cb in _compared(r, runs, variant):
        for facet, idx, labels in _facets(fact, r.settings):
            family = []
            for k, lab in enumerate(labels):
                where = idx == k
                if not where.any():
                    continue
                family.append({"task": task, "length": length, "variant": variant,
                               "facet": facet, "bucket": lab, "order": k,
                               "examples": int(where.sum()), "seeds_a": ca.shape[0],
                               "seeds_b": cb.shape[0], **_bucket_row(r, ca, cb, where)})
            rows += _with_holm(family, r.settings.confidence)
    return pl.DataFrame(rows, schema=GAP_SCHEMA)


def gap_caption(settings: Settings) -> str:
    """The breakdown gap table's caption: exploratory, its unit, its method, its minimum."""
    return ("Exploratory: HKT − MHA test accuracy (pp) per bucket of each per-example fact (as "
            "tables/breakdown); no claim's verdict rests on it. Unit of replication: the seed; "
            f"each bucket by the error model ({settings.level}: Welch over the seeds' bucket "
            "accuracies plus the paired test-set variance of the bucket's examples); p adjusted "
            "by Holm within each task, variant and facet (statsmodels' multipletests), the "
            "significance read on the adjusted p; a bucket of fewer than "
            f"{settings.min_bucket_examples} test examples is listed, not read "
            "(config/report/settings.yaml).")


def breakdown_gap_display(t: pl.DataFrame, settings: Settings) -> Display:
    a, b = (m.upper() for m in paper.COMPARED_MODELS)
    header = ["task", "T", "variant", "facet", "bucket", "examples", f"{a} − {b} (pp)",
              f"{settings.level} CI, seeds + test set, paired (pp)", "p, unadjusted",
              "p, Holm within the facet", f"significant, Holm ({settings.alpha})", "seeds"]
    return header, [[r["task"], str(r["length"]), r["variant"], r["facet"], r["bucket"],
                     str(r["examples"]), signed(r["difference_pp"]),
                     ci_text(r["paired_ci_low_pp"], r["paired_ci_high_pp"]),
                     p_text(r["paired_p_value"]), p_text(r["holm_p_value"]), r["significant"] or "",
                     f"{r['seeds_a']} vs {r['seeds_b']}"] for r in t.iter_rows(named=True)]


MECHANISM_SCHEMA = {"task": pl.String, "length": pl.Int64, "variant": pl.String,
                    "measure": pl.String,
                    "shallow": pl.String,
                    "shallow_examples": pl.Int64, "shallow_pp": pl.Float64, "deep": pl.String,
                    "deep_examples": pl.Int64, "deep_pp": pl.Float64,
                    "difference_pp": pl.Float64, "paired_ci_low_pp": pl.Float64,
                    "paired_ci_high_pp": pl.Float64, "paired_p_value": pl.Float64,
                    "confidence": pl.Float64,
                    "groups": pl.Int64,
                    "seeds_a": pl.Int64, "seeds_b": pl.Int64, "reason": pl.String}


#: The measures of a tree's depth the mechanism reads: the tree's own depth, and the depth its
#: answer needs (:data:`ANSWER_RULES`; on our ListOps nearly every tree has depth 9).
TREE_DEPTH, ANSWER_DEPTH = "tree depth", "answer depth"


def answer_depth(fact: pl.DataFrame) -> np.ndarray | None:
    """Each example's answer depth: the index in :data:`ANSWER_RULES` of the first rule that
    answers it right, ``len(ANSWER_RULES)`` where none does; None without the rules' answers."""
    if not all(rule in fact.columns for _, rule in ANSWER_RULES):
        return None
    label = fact["label"].to_numpy()
    right = np.vstack([fact[rule].to_numpy() == label for _, rule in ANSWER_RULES]
                      + [np.ones(len(label), dtype=bool)])
    return right.argmax(axis=0)


def _answer_span(values: np.ndarray) -> str:
    names = [name for name, _ in ANSWER_RULES] + ["deeper"]
    lo, hi = int(values.min()), int(values.max())
    return f"answered by {names[lo]}" if lo == hi else f"answered by {names[lo]} to {names[hi]}"


def mechanism_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """Per task with tree depths and both HKT and MHA paired, and per measure of depth (the
    tree's, and the answer's: :data:`TREE_DEPTH`, :data:`ANSWER_DEPTH`): HKT − MHA on the
    deepest of ``depth_groups`` groups of test examples minus on the shallowest
    (:func:`depth_groups`): the contrast declared in config before the runs are read, with its
    own test: per seed, each model's accuracy on the deepest minus on the shallowest group;
    Welch over those, plus the paired test-set variance of the contrast
    (:func:`hkt.report.stats.paired_difference` with ``subsets``)."""
    rows = []
    for task, length, fact, ca, cb in _compared(r, runs, variant):
        if "depth" not in fact.columns:
            continue
        measures = [(TREE_DEPTH, fact["depth"].to_numpy(), _span)]
        if (needed := answer_depth(fact)) is not None:
            measures.append((ANSWER_DEPTH, needed, _answer_span))
        for measure, depth, span in measures:
            groups = depth_groups(depth, r.settings.depth_groups)
            row: dict[str, Any] = {"task": task, "length": length, "variant": variant,
                                   "measure": measure,
                                   "groups": r.settings.depth_groups,
                                   "confidence": r.settings.confidence,
                                   "seeds_a": ca.shape[0], "seeds_b": cb.shape[0]}
            if groups is None:
                values, counts = np.unique(depth, return_counts=True)
                top = int(counts.argmax())
                rows.append({**row, "reason": f"{counts[top]} of the {depth.size} test "
                                              f"examples are {span(values[top:top + 1])}: one "
                                              "value spans the shallowest and the deepest group"})
                continue
            shallow, deep = groups
            d = paired_difference(ca, cb, r.settings.confidence, subsets=(deep, shallow))
            gap = [100 * float(ca[:, m].mean() - cb[:, m].mean()) for m in (shallow, deep)]
            rows.append({**row, "shallow": span(depth[shallow]),
                         "shallow_examples": int(shallow.sum()), "shallow_pp": gap[0],
                         "deep": span(depth[deep]),
                         "deep_examples": int(deep.sum()), "deep_pp": gap[1],
                         "difference_pp": d.diff, "paired_ci_low_pp": finite_or_none(d.ci_low),
                         "paired_ci_high_pp": finite_or_none(d.ci_high), "paired_p_value": finite_or_none(d.p_value),
                         "reason": d.reason})
    return pl.DataFrame(rows, schema=MECHANISM_SCHEMA)

