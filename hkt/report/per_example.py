"""Readings example by example: each run's test predictions (``predictions.parquet`` beside its
record) against its task's per-example facts (``examples.parquet``, :mod:`hkt.facts.examples`).

Two models tested on the same examples err on many of the same ones, so their difference is
read pair by pair (:func:`hkt.report.stats.paired_bootstrap`, :func:`hkt.report.stats.mcnemar`):

* :func:`paired_table`: HKT − MHA and every control against HKT and MHA, paired (the bootstrap
  over examples and seeds together, McNemar per seed pair) beside the unpaired interval it
  replaces in the gap and controls tables (:func:`with_paired`) wherever both sides' runs all
  have predictions on the same examples;
* :func:`agreement_table`: per ListOps model, the share of test examples on which it answers what
  each rule reference answers, and its accuracy where the root-operator prior is wrong;
  :func:`rule_readings` places it among the rules, paired (the claims' "which rule" rows);
* :func:`breakdown_table`: accuracy per bucket of a fact (ListOps: tree depth, depth group,
  answer depth, length quartile, root operator; IMDB: length quartile; CIFAR-10: class) for
  every model and rule, and :func:`breakdown_gap_table`: HKT − MHA per bucket, paired;
* :func:`mechanism_table`: HKT − MHA on the deepest group of trees minus on the shallowest
  (the paper's "the gain comes from the hierarchy of operations"), paired; by the tree's depth
  and by the depth its answer needs (the first rule that answers it right).

Every number of the readings (resamples, their seed, the confidence, the depth groups, the
length buckets) is ``per_example`` of config/report.yaml. Runs without predictions (made before
they were written) give none of these: the tables keep their unpaired intervals and the
readings are not written.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

from hkt import paper
from hkt.facts.examples import load_examples
from hkt.errors import ConfigError, ConfigValueError
from hkt.predictions import PREDICTIONS_NAME, PredictionsError, read_predictions
from hkt.rule_references import RULE_REFERENCES
from hkt.report.stats import Difference, mcnemar, paired_bootstrap
from hkt.report.writers import Display, pm, signed
from hkt.runs_frame import KEY, MODEL_ORDER, AggregateError, ordered, record_length
from hkt.value_checks import integer, number

__all__ = ["Settings", "load_settings", "Readings", "load_readings", "data_dirs",
           "paired_or_why", "NOT_READ", "NAMES_PREDICTIONS", "compared_variants",
           "labelled_by_variant", "paired_table", "with_paired", "paired_note", "paired_display",
           "agreement_table",
           "agreement_display", "rule_readings", "breakdown_table", "breakdown_display",
           "breakdown_gap_table", "breakdown_gap_display", "mechanism_table"]

#: The facets a breakdown reads, in this order, with the fact each buckets.
DEPTH, DEPTH_GROUP, NEEDED, LENGTH, ROOT, CLASS = (
    "depth", "depth group", "answer depth", "length quartile", "root operator", "class")
#: The rules of increasing depth that "answer depth" reads: an example's answer depth is the
#: first of them that answers it right ("deeper" where none does: only the exact evaluator).
ANSWER_RULES = (("the prior", "root_op_prior"), ("depth 1", "depth1_rule"),
                ("depth 2", "depth2_rule"), ("depth 3", "depth3_rule"))
#: The root-operator prior: what the "prior gets wrong" columns are read against.
PRIOR = "root_op_prior"


@dataclass(frozen=True)
class Settings:
    """``per_example`` of config/report.yaml."""

    confidence: float
    resamples: int
    seed: int
    depth_groups: int
    length_buckets: int

    def bootstrap(self, a: np.ndarray, b: np.ndarray, **kw: Any) -> Difference:
        return paired_bootstrap(a, b, resamples=self.resamples, seed=self.seed,
                                confidence=self.confidence, **kw)

    @property
    def level(self) -> str:
        return f"{100 * self.confidence:g}%"


def load_settings(path: Path | None = None) -> Settings:
    """The readings' settings (``per_example`` of config/report.yaml, or ``path``), or an
    :class:`AggregateError` naming the key that is missing or out of range."""
    from hkt.config_compose import config_dir

    path = path or config_dir() / "report.yaml"
    try:
        cfg = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("per_example") or {}
    except (OSError, yaml.YAMLError, AttributeError) as e:
        raise AggregateError(f"cannot read the report's settings {path}: {e}") from e
    try:
        return Settings(
            confidence=number(cfg.get("confidence"), "per_example.confidence", 0, 1,
                              lo_open=True, hi_open=True),
            resamples=integer(cfg.get("bootstrap_resamples"), "per_example.bootstrap_resamples", 1),
            seed=integer(cfg.get("bootstrap_seed"), "per_example.bootstrap_seed", 0),
            depth_groups=integer(cfg.get("depth_groups"), "per_example.depth_groups", 2),
            length_buckets=integer(cfg.get("length_buckets"), "per_example.length_buckets", 1))
    except ConfigValueError as e:
        raise AggregateError(f"{path}: {e}") from e


def data_dirs(records: Iterable[dict[str, Any]], data_root: Path | None = None
              ) -> dict[tuple[str, int | None], Path]:
    """Per (task, T), where its runs' prepared data (or a publication's copy of its facts) lie:
    each record's ``data_dir``, or ``data_root`` / that folder's name (``hkt aggregate --data``)."""
    out: dict[tuple[str, int | None], Path] = {}
    for rec in records:
        d = rec.get("data_dir")
        if d:
            out.setdefault((rec["task"], record_length(rec)),
                           Path(d) if data_root is None else data_root / Path(d).name)
    return out


@dataclass
class Run:
    """One run's test answers, by example row (ascending)."""

    rows: np.ndarray
    pred: np.ndarray
    correct: np.ndarray


@dataclass
class Readings:
    """The test predictions of the runs that have them, and each task's test facts."""

    runs: dict[tuple[Any, ...], Run]                    # by the runs frame's KEY
    facts: dict[tuple[str, int | None], pl.DataFrame]   # test rows, by row, per (task, T)
    settings: Settings
    missing: list[str] = field(default_factory=list)    # runs without predictions
    unfacted: list[str] = field(default_factory=list)   # tasks with predictions but no facts

    def notes(self) -> str:
        """What the per-example tables' captions say of what they could not read."""
        parts = []
        if self.missing:
            more = f" and {len(self.missing) - 8} more" if len(self.missing) > 8 else ""
            parts.append("Runs without predictions (made before they were kept), read nowhere "
                         f"here: {', '.join(self.missing[:8])}{more}.")
        if self.unfacted:
            parts.append("No per-example facts (examples.parquet, nor the prepared splits to "
                         f"make them from) for {'; '.join(self.unfacted)}: its runs are read "
                         "paired (tables/paired) but not by fact; pass the data with "
                         "`hkt aggregate --data DIR`.")
        return " ".join(parts)

    def matrix(self, sel: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, list[int]] | None:
        """The right/wrong answers (seeds × examples) of the runs ``sel``, their example rows
        and seeds; None unless every one of them has predictions on the same examples."""
        if sel.is_empty():
            return None
        got = [self.runs.get(tuple(k)) for k in sel.select(KEY).sort("seed").iter_rows()]
        if any(r is None for r in got) or any(not np.array_equal(r.rows, got[0].rows)
                                               for r in got):
            return None
        return (np.vstack([r.correct for r in got]), got[0].rows, sorted(sel["seed"].to_list()))


def _read_predictions(path: Path) -> pl.DataFrame:
    """The columns the readings use, read by :func:`hkt.predictions.read_predictions`."""
    try:
        return pl.from_arrow(read_predictions(path, ["split", "row", "label", "pred"]))
    except PredictionsError as exc:
        why = str(exc).strip().splitlines()[0]
        raise AggregateError(f"{path} is not a run's predictions (split, row, label, pred): "
                             f"{why}; make them again from the run's best checkpoint") from None


def load_readings(runs: pl.DataFrame, dirs: dict[tuple[str, int | None], Path],
                  settings: Settings) -> Readings | None:
    """The test predictions of ``runs`` (each beside its record, the runs frame's ``source``)
    and the facts of their tasks (under ``dirs``: :func:`data_dirs`); None where no run has
    predictions. An :class:`AggregateError` where a run's labels differ from its task's facts
    (predictions made on other data)."""
    found: dict[tuple[Any, ...], Run] = {}
    missing = []
    facts: dict[tuple[str, int | None], pl.DataFrame] = {}
    unmade: set[tuple[str, int | None]] = set()
    for r in runs.select(*KEY, "source").iter_rows(named=True):
        path = Path(r["source"]).parent / PREDICTIONS_NAME if r["source"] else None
        key = tuple(r[k] for k in KEY)
        if path is None or not path.is_file():
            missing.append(f"{r['task']}/{r['model']}/{r['variant']}/seed{r['seed']}")
            continue
        test = _read_predictions(path).filter(pl.col("split") == "test").sort("row")
        where = (r["task"], r["length"])
        if where not in facts and where in dirs and where not in unmade:
            try:
                every = load_examples(dirs[where])
            except ConfigError as exc:  # data its family cannot read as examples (not ListOps)
                unmade.add(where)
                print(f"hkt: warning: no per-example facts for {where[0]} (T={where[1]}): {exc}; "
                      "its readings by depth, length and rule are left out", file=sys.stderr)
                every = None
            if every is not None:
                facts[where] = every.filter(pl.col("split") == "test").sort("row")
        fact = facts.get(where)
        if fact is not None:
            labels = dict(zip(fact["row"].to_list(), fact["label"].to_list()))
            bad = [(i, y) for i, y in zip(test["row"].to_list(), test["label"].to_list())
                   if labels.get(i) != y]
            if bad:
                raise AggregateError(
                    f"{path}: {len(bad)} test rows whose label is not the task's (first: row "
                    f"{bad[0][0]}, label {bad[0][1]}, the data's {labels.get(bad[0][0])}): the "
                    f"predictions were made on other data than {dirs[where]}; make them again "
                    "from the run's checkpoint on this data")
        label, pred = test["label"].to_numpy(), test["pred"].to_numpy()
        found[key] = Run(test["row"].to_numpy(), pred, pred == label)
    if not found:
        return None
    unfacted = sorted({f"{t} T={n} (looked for in {dirs.get((t, n), 'no data_dir')})"
                       for t, n, *_ in found if (t, n) not in facts})
    return Readings(found, facts, settings, missing, unfacted)


def compared_variants(runs: pl.DataFrame, main_variant: str = "main") -> list[str]:
    """The variants the per-example tables read: the main one, then every other in which both
    compared models (HKT, MHA) have runs (a learning-rate or budget variant of both, as the long
    suite trains; an ablation of one model is not read here), in name order."""
    a, b = paper.COMPARED_MODELS
    both = [v for v in sorted(set(runs["variant"].to_list()) - {main_variant}) if v is not None
            and {a, b} <= set(runs.filter(pl.col("variant") == v)["model"].to_list())]
    return [main_variant, *both]


# ------------------------------------------------------------------------ paired differences

PAIRED_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "versus": pl.String,
    "difference_pp": pl.Float64, "ci_low_pp": pl.Float64, "ci_high_pp": pl.Float64,
    "p_value": pl.Float64, "significant": pl.String, "unpaired_ci_low_pp": pl.Float64,
    "unpaired_ci_high_pp": pl.Float64, "unpaired_p_value": pl.Float64, "mcnemar": pl.String,
    "seeds_a": pl.Int64, "seeds_b": pl.Int64, "examples": pl.Int64}


def _num(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def _pair(r: Readings, a: pl.DataFrame, b: pl.DataFrame) -> dict[str, Any] | None:
    """The paired reading of runs ``a`` against runs ``b``, or None where they are not paired."""
    ma, mb = r.matrix(a), r.matrix(b)
    if ma is None or mb is None or not np.array_equal(ma[1], mb[1]):
        return None
    d = r.settings.bootstrap(ma[0], mb[0])
    seeds_b = {s: i for i, s in enumerate(mb[2])}
    tests = [f"seed {s}: {mcnemar(ma[0][i], mb[0][seeds_b[s]]).text()}"
             for i, s in enumerate(ma[2]) if s in seeds_b]
    return {"difference_pp": d.diff, "ci_low_pp": _num(d.ci_low), "ci_high_pp": _num(d.ci_high),
            "p_value": _num(d.p_value), "significant": d.verdict, "mcnemar": "; ".join(tests),
            "seeds_a": d.n_a, "seeds_b": d.n_b, "examples": int(ma[1].size)}


def _named(sel: pl.DataFrame) -> str:
    """Runs in words: ``MHA lr1e3 seeds 0, 1`` (model, variant, seeds), per model and variant."""
    parts = []
    for (model, variant), group in sorted(sel.group_by("model", "variant"),
                                          key=lambda kv: str(kv[0])):
        seeds = sorted(group["seed"].to_list())
        parts.append(f"{str(model).upper()} {variant} seed{'' if len(seeds) == 1 else 's'} "
                     + ", ".join(str(s) for s in seeds))
    return "; ".join(parts)


#: The column of a ``--reference`` runs frame that says whether a run's record names its
#: predictions (they are not read: a reference is read for its accuracies).
NAMES_PREDICTIONS = "names_predictions"
#: Why a difference has no paired reading where no run it reads was read for predictions.
NOT_READ = ("predictions are not read from MLflow, which does not keep them: aggregate the runs' "
            "records to pair")


def paired_or_why(r: Readings | None, a: pl.DataFrame, b: pl.DataFrame
                  ) -> tuple[dict[str, Any] | None, str]:
    """The paired reading of runs ``a`` against runs ``b`` over their shared test examples (as
    :func:`paired_table` reads each row), or None and why not, in words: the runs without
    predictions, by name, or test examples that differ."""
    if r is None:
        return None, NOT_READ
    got = _pair(r, a, b)
    if got is not None:
        return got, ""
    keys = pl.concat([a, b], how="diagonal_relaxed")
    lacking = keys.filter(pl.Series([tuple(k) not in r.runs for k in
                                     keys.select(KEY).iter_rows()], dtype=pl.Boolean))
    if lacking.is_empty():
        return None, "the two sides' predictions are not on the same test examples"
    kept = (pl.col(NAMES_PREDICTIONS).fill_null(False) if NAMES_PREDICTIONS in lacking.columns
            else pl.lit(False))
    none = lacking.filter(~kept)
    if not none.is_empty():
        return None, f"no predictions for {_named(none)}"
    return None, (f"the predictions of {_named(lacking)} are not read (--reference records are "
                  "read for their accuracies)")


def paired_table(r: Readings, runs: pl.DataFrame, gap: pl.DataFrame, controls: pl.DataFrame,
                 variant: str = "main") -> pl.DataFrame:
    """Every difference of the gap table (HKT − MHA) and the controls table (control − HKT,
    control − MHA) whose runs are all paired, read paired, beside its unpaired interval."""
    sel = runs.filter(pl.col("variant") == variant)
    a, b = paper.COMPARED_MODELS
    wanted = [(g, a, b) for g in gap.iter_rows(named=True)]
    wanted += [(c, c["model"], c["versus"]) for c in controls.iter_rows(named=True)]
    rows = []
    for row, model, versus in wanted:
        where = (pl.col("task") == row["task"]) & (pl.col("length") == row["length"])
        got = _pair(r, sel.filter(where & (pl.col("model") == model)),
                    sel.filter(where & (pl.col("model") == versus)))
        if got is None:
            continue
        rows.append({"task": row["task"], "length": row["length"], "model": model,
                     "versus": versus, **got, "unpaired_ci_low_pp": row.get("ts_ci_low_pp"),
                     "unpaired_ci_high_pp": row.get("ts_ci_high_pp"),
                     "unpaired_p_value": row.get("ts_p_value")})
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA).select(*PAIRED_SCHEMA)


def with_paired(table: pl.DataFrame, paired: pl.DataFrame, model: str | None = None,
                versus: str | None = None) -> pl.DataFrame:
    """``table`` (gap or controls) with its ``+ test set`` columns (``ts_*``) read paired where
    ``paired`` has the row: (task, T, and the table's ``model`` and ``versus``, or the given
    ones for the gap table)."""
    if paired.is_empty() or table.is_empty():
        return table
    by = {(p["task"], p["length"], p["model"], p["versus"]): p
          for p in paired.iter_rows(named=True)}
    rows = []
    for row in table.iter_rows(named=True):
        p = by.get((row["task"], row["length"], model or row.get("model"),
                    versus or row.get("versus")))
        if p is not None:
            row = {**row, "ts_ci_low_pp": p["ci_low_pp"], "ts_ci_high_pp": p["ci_high_pp"],
                   "ts_p_value": p["p_value"], "ts_significant": p["significant"]}
        rows.append(row)
    return pl.DataFrame(rows, schema=table.schema)


def paired_note(paired: pl.DataFrame, settings: Settings, unpaired_note: str,
                rows: int) -> str:
    """What a difference table's caption says of its ``+ test set`` columns: paired where both
    sides have predictions on the same examples (which rows, of the table's ``rows``), the
    unpaired note where some row is not."""
    if paired.is_empty():
        return unpaired_note
    where = ", ".join(dict.fromkeys(f"{t} T={n}" for t, n in
                                    paired.select("task", "length").iter_rows()))
    text = (f"'+ test set', paired on {where}: every run of both sides has its predictions on "
            f"the same test examples, so the {settings.level} CI and p come from a paired "
            f"bootstrap over examples and seeds together ({settings.resamples:,} resamples, "
            "each drawing the test examples once for both sides and each side's seeds; McNemar "
            "per seed pair and the unpaired interval beside it in tables/paired), which counts "
            "the errors the two models share where an unpaired interval counts the sides as "
            "independent.")
    if len(paired) >= rows:
        return text
    return (text + " On the other rows (runs without predictions) unpaired, as follows. "
            + unpaired_note)


def _levels(confidence: float) -> tuple[str, str]:
    """The interval's level and the test's (``95%``, ``5%``)."""
    return f"{100 * confidence:g}%", f"{100 * (1 - confidence):.3g}%"


def paired_display(paired: pl.DataFrame, confidence: float = 0.95) -> Display:
    level, alpha = _levels(confidence)
    header = ["task", "T", "model", "versus", "model − versus (pp)", f"{level} CI, paired (pp)",
              "p, paired", f"significant ({alpha})", "95% CI, unpaired (pp)", "p, unpaired",
              "McNemar per seed (model only / versus only right)", "seeds", "examples"]
    return header, [[r["task"], str(r["length"]), r["model"], r["versus"],
                     signed(r["difference_pp"]), _ci(r["ci_low_pp"], r["ci_high_pp"]),
                     _p(r["p_value"]), r["significant"] or "",
                     _ci(r["unpaired_ci_low_pp"], r["unpaired_ci_high_pp"]),
                     _p(r["unpaired_p_value"]), r["mcnemar"] or "",
                     f"{r['seeds_a']} vs {r['seeds_b']}", str(r["examples"])]
                    for r in paired.iter_rows(named=True)]


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{signed(low)}, {signed(high)}]"


def _p(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}" if v >= 0.001 else f"{v:.1e}"


# --------------------------------------------------------------------- models and their groups

def _groups(r: Readings, runs: pl.DataFrame, variant: str
            ) -> list[tuple[str, int | None, str, tuple[np.ndarray, np.ndarray, list[int]],
                            np.ndarray]]:
    """Per (task, T, model) of ``variant`` whose runs all have predictions on the task's test
    facts' rows: (task, T, model, right/wrong matrix with rows and seeds, predictions matrix),
    in the tables' order."""
    sel = runs.filter(pl.col("variant") == variant)
    out = []
    keys = sel.select("task", "length", "model").unique().rows()
    for task, length in dict.fromkeys((t, n) for t, n, _ in keys):
        fact = r.facts.get((task, length))
        models = ordered({m for t, n, m in keys if (t, n) == (task, length)}, MODEL_ORDER)
        for model in models:
            part = sel.filter((pl.col("task") == task) & (pl.col("length") == length)
                              & (pl.col("model") == model))
            m = r.matrix(part)
            if m is None or fact is None or not np.array_equal(m[1], fact["row"].to_numpy()):
                continue
            preds = np.vstack([r.runs[tuple(k)].pred for k in
                               part.select(KEY).sort("seed").iter_rows()])
            out.append((task, length, model, m, preds))
    return sorted(out, key=lambda g: (str(g[0]), g[1] or 0))


def undrawn(r: Readings, runs: pl.DataFrame, variant: str = "main",
            main_variant: str = "main", column: str | None = None) -> list[str]:
    """The models of ``variant`` on a task with per-example facts (``column`` among them, where
    given: ``depth`` for the figure by depth) that the breakdown leaves out, each with why:
    ``hkt: predictions on 256 of the 2,000 test examples``. A rule reference is read from the
    facts, never left out."""
    drawn = {(t, n, m) for t, n, m, *_ in _groups(r, runs, variant)}
    sel = runs.filter(pl.col("variant") == variant)
    out = []
    for (task, length), fact in sorted(r.facts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        if column is not None and column not in fact.columns:
            continue
        here = sel.filter((pl.col("task") == task) & (pl.col("length") == length))
        for model in ordered(here["model"].unique().to_list(), MODEL_ORDER):
            if model in RULE_REFERENCES or (task, length, model) in drawn:
                continue
            got = [r.runs.get(tuple(k)) for k in
                   here.filter(pl.col("model") == model).select(KEY).sort("seed").iter_rows()]
            sizes = sorted({g.rows.size for g in got if g is not None})
            if any(g is None for g in got):
                why = f"{sum(g is None for g in got)} of {len(got)} runs without predictions"
            elif sizes != [fact.height]:
                why = (f"predictions on {'–'.join(f'{s:,}' for s in sizes)} of the "
                       f"{fact.height:,} test examples")
            else:
                why = "its seeds' predictions are on different test examples"
            name = model if variant == main_variant else f"{model} ({variant})"
            out.append(f"{name}: {why}")
    return out


def _mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    x = np.asarray(values, dtype=np.float64) * 100
    return float(x.mean()), (float(x.std(ddof=1)) if x.size > 1 else None)


# ------------------------------------------------------------------------- agreement with rules

AGREEMENT_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "variant": pl.String, "model": pl.String,
    "seeds": pl.Int64,
    "test_mean": pl.Float64, "test_std": pl.Float64,
    **{f"agree_{rule}": pl.Float64 for rule in RULE_REFERENCES},
    **{f"agree_{rule}_std": pl.Float64 for rule in RULE_REFERENCES},
    "prior_wrong_examples": pl.Int64, "prior_wrong_mean": pl.Float64,
    "prior_wrong_std": pl.Float64}


def _rule_columns(fact: pl.DataFrame) -> list[str]:
    return [rule for rule in RULE_REFERENCES if rule in fact.columns]


def agreement_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """Per ListOps model (a task whose facts hold the rules' answers; the rules themselves
    aside): the share (%) of test examples on which it answers what each rule answers, mean
    (and std) over seeds, and its accuracy where the root-operator prior is wrong."""
    rows = []
    for task, length, model, (correct, _, seeds), preds in _groups(r, runs, variant):
        fact = r.facts[(task, length)]
        rules = _rule_columns(fact)
        if not rules or model in RULE_REFERENCES:
            continue
        row: dict[str, Any] = {"task": task, "length": length, "variant": variant,
                               "model": model,
                               "seeds": len(seeds)}
        row["test_mean"], row["test_std"] = _mean_std(correct.mean(axis=1))
        for rule in rules:
            answer = fact[rule].to_numpy()
            row[f"agree_{rule}"], row[f"agree_{rule}_std"] = _mean_std((preds == answer).mean(1))
        wrong = fact[PRIOR].to_numpy() != fact["label"].to_numpy()
        row["prior_wrong_examples"] = int(wrong.sum())
        if wrong.any():
            row["prior_wrong_mean"], row["prior_wrong_std"] = _mean_std(
                correct[:, wrong].mean(axis=1))
        rows.append(row)
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


def agreement_display(t: pl.DataFrame) -> Display:
    header = ["task", "T", "variant", "model", "seeds", "test acc (%)",
              *(f"agrees with the {label} (%)" for label in RULE_REFERENCES.values()),
              "acc. where the prior is wrong (%)", "examples the prior gets wrong"]
    return header, [[r["task"], str(r["length"]), r["variant"], r["model"], str(r["seeds"]),
                     pm(r["test_mean"], r["test_std"]),
                     *(pm(r[f"agree_{rule}"], r[f"agree_{rule}_std"]) for rule in RULE_REFERENCES),
                     pm(r["prior_wrong_mean"], r["prior_wrong_std"]),
                     str(r["prior_wrong_examples"])] for r in t.iter_rows(named=True)]


def rule_readings(r: Readings, runs: pl.DataFrame, agreement: pl.DataFrame,
                  variant: str = "main") -> dict[tuple[str, int | None, str], str]:
    """Per ListOps model with predictions, which rule it reaches, paired: its accuracy minus
    each rule's on the same test examples (:func:`hkt.report.stats.paired_bootstrap`; the rule
    one "seed" that answers every example the same way); *at* the rules whose interval holds
    0, else *above* the highest it clears and *below* the next; with its agreement with the
    prior and its accuracy where the prior is wrong (``agreement``). The text starts with the
    reading ("at the root-operator prior (…)"), as the unpaired one does."""
    out = {}
    agree = {(a["task"], a["length"], a["model"]): a for a in agreement.iter_rows(named=True)}
    for task, length, model, (correct, _, _), _ in _groups(r, runs, variant):
        a = agree.get((task, length, model))
        if a is None:
            continue
        fact = r.facts[(task, length)]
        label = fact["label"].to_numpy()
        diffs = []
        for rule in _rule_columns(fact):
            d = r.settings.bootstrap(correct, (fact[rule].to_numpy() == label)[None, :])
            diffs.append((RULE_REFERENCES[rule], d))

        def said(lab: str, d: Difference) -> str:
            return f"the {lab} ({d.diff:+.2f} pp, paired {r.settings.level} CI " \
                   f"[{d.ci_low:+.2f}, {d.ci_high:+.2f}])"

        at = [said(lab, d) for lab, d in diffs if d.ci_low <= 0 <= d.ci_high]
        if at:
            text = "at " + "; at ".join(at)
        else:
            below = [said(lab, d) for lab, d in diffs if d.ci_low > 0]
            above = [said(lab, d) for lab, d in diffs if d.ci_high < 0]
            text = ", ".join([*(["above " + below[-1]] if below else []),
                              *(["below " + above[0]] if above else [])])
        prior = RULE_REFERENCES[PRIOR]
        text += (f"; it answers as the {prior} on {pm(a[f'agree_{PRIOR}'], a[f'agree_{PRIOR}_std'])}"
                 f"% of the test examples, and gets {pm(a['prior_wrong_mean'], a['prior_wrong_std'])}"
                 f"% right of the {a['prior_wrong_examples']} the {prior} gets wrong")
        out[(task, length, model)] = text
    return out


# ------------------------------------------------------------------------- where accuracy lies

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
    groups = _groups(r, runs, variant)
    for (task, length), fact in sorted(r.facts.items(), key=lambda kv: (str(kv[0][0]),
                                                                        kv[0][1] or 0)):
        mine = [(m, c) for t, n, m, (c, _, _), _ in groups if (t, n) == (task, length)]
        if not mine:
            continue
        label = fact["label"].to_numpy()
        mine += [(rule, (fact[rule].to_numpy() == label)[None, :])
                 for rule in _rule_columns(fact) if rule not in {m for m, _ in mine}]
        for facet, idx, labels in _facets(fact, r.settings):
            for b, lab in enumerate(labels):
                where = idx == b
                if not where.any():
                    continue
                for model, correct in mine:
                    mean, std = _mean_std(correct[:, where].mean(axis=1))
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
              "bucket": pl.String,
              "order": pl.Int64, "examples": pl.Int64, "difference_pp": pl.Float64,
              "ci_low_pp": pl.Float64, "ci_high_pp": pl.Float64, "p_value": pl.Float64,
              "significant": pl.String, "seeds_a": pl.Int64, "seeds_b": pl.Int64}


def _compared(r: Readings, runs: pl.DataFrame, variant: str) -> Iterable[tuple[Any, ...]]:
    """Per task with facts where both compared models (HKT, MHA) have predictions, in order:
    (task, length, its facts, HKT's and MHA's seeds' correctness, as :func:`_groups` gives)."""
    a, b = paper.COMPARED_MODELS
    by = {(t, n, m): c for t, n, m, (c, _, _), _ in _groups(r, runs, variant)}
    for (task, length), fact in sorted(r.facts.items(), key=lambda kv: (str(kv[0][0]),
                                                                        kv[0][1] or 0)):
        ca, cb = by.get((task, length, a)), by.get((task, length, b))
        if ca is not None and cb is not None:
            yield task, length, fact, ca, cb


def breakdown_gap_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """HKT − MHA (pp) per bucket of each facet, paired over the bucket's test examples and the
    seeds (:func:`hkt.report.stats.paired_bootstrap`)."""
    rows = []
    for task, length, fact, ca, cb in _compared(r, runs, variant):
        for facet, idx, labels in _facets(fact, r.settings):
            for k, lab in enumerate(labels):
                where = idx == k
                if not where.any():
                    continue
                d = r.settings.bootstrap(ca[:, where], cb[:, where])
                rows.append({"task": task, "length": length, "variant": variant,
                             "facet": facet, "bucket": lab,
                             "order": k, "examples": int(where.sum()), "difference_pp": d.diff,
                             "ci_low_pp": _num(d.ci_low), "ci_high_pp": _num(d.ci_high),
                             "p_value": _num(d.p_value), "significant": d.verdict,
                             "seeds_a": d.n_a, "seeds_b": d.n_b})
    return pl.DataFrame(rows, schema=GAP_SCHEMA)


def breakdown_gap_display(t: pl.DataFrame, confidence: float = 0.95) -> Display:
    a, b = (m.upper() for m in paper.COMPARED_MODELS)
    level, alpha = _levels(confidence)
    header = ["task", "T", "variant", "facet", "bucket", "examples", f"{a} − {b} (pp)",
              f"{level} CI, paired (pp)", "p, paired", f"significant ({alpha})", "seeds"]
    return header, [[r["task"], str(r["length"]), r["variant"], r["facet"], r["bucket"],
                     str(r["examples"]),
                     signed(r["difference_pp"]), _ci(r["ci_low_pp"], r["ci_high_pp"]),
                     _p(r["p_value"]), r["significant"] or "",
                     f"{r['seeds_a']} vs {r['seeds_b']}"] for r in t.iter_rows(named=True)]


MECHANISM_SCHEMA = {"task": pl.String, "length": pl.Int64, "variant": pl.String,
                    "measure": pl.String,
                    "shallow": pl.String,
                    "shallow_examples": pl.Int64, "shallow_pp": pl.Float64, "deep": pl.String,
                    "deep_examples": pl.Int64, "deep_pp": pl.Float64,
                    "difference_pp": pl.Float64, "ci_low_pp": pl.Float64,
                    "ci_high_pp": pl.Float64, "p_value": pl.Float64, "confidence": pl.Float64,
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
    (:func:`depth_groups`), with the paired bootstrap's interval of that difference (examples
    and seeds drawn together)."""
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
            d = r.settings.bootstrap(ca, cb, subsets=(deep, shallow))
            gap = [100 * float(ca[:, m].mean() - cb[:, m].mean()) for m in (shallow, deep)]
            rows.append({**row, "shallow": span(depth[shallow]),
                         "shallow_examples": int(shallow.sum()), "shallow_pp": gap[0],
                         "deep": span(depth[deep]),
                         "deep_examples": int(deep.sum()), "deep_pp": gap[1],
                         "difference_pp": d.diff, "ci_low_pp": _num(d.ci_low),
                         "ci_high_pp": _num(d.ci_high), "p_value": _num(d.p_value),
                         "reason": ""})
    return pl.DataFrame(rows, schema=MECHANISM_SCHEMA)
