"""Readings example by example: each run's test predictions (``predictions.parquet`` beside its
record) against its task's per-example facts (``examples.parquet``, :mod:`hkt.facts.examples`).

Two models tested on the same examples err on many of the same ones, so the test set's
sampling error of their difference is read pair by pair, inside the error model
(:func:`hkt.report.stats.paired_difference`: Welch over seeds plus the paired test-set
variance; docs/per-example.md):

* :func:`paired_table`: HKT − MHA in every variant both trained, and every control against HKT
  and MHA, with the paired error beside Welch's over seeds, the binomial reading and the
  reading given these runs (``given_runs_*``, on which no verdict rests);
  :func:`with_paired` fills the gap and controls tables' ``paired_*`` columns;
* :func:`agreement_table`: per ListOps model, the share of test examples on which it answers what
  each rule reference answers, and its accuracy where the root-operator prior is wrong;
  :func:`hkt.report.rule_readings.rule_readings` places it among the rules (a model against a
  rule: t over its seeds plus the paired test-set variance);
* the readings by bucket and the mechanism's contrast: :mod:`hkt.report.buckets`.

Every number of the readings (the confidence, the depth groups, the length buckets, the
smallest bucket read) is config/report.yaml's (:mod:`hkt.report.report_settings`). Runs without
predictions (made before they were written) give none of these: the tables keep their
binomial intervals and the readings are not written. A run's predictions are read only as
:func:`hkt.predictions.read_checked` takes them (the file its record names, its SHA-256, rows
and accuracies the record's); a run whose are not is named in one warning line and read
unpaired, as one without.
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

from hkt import paper
from hkt.facts.examples import load_examples
from hkt.errors import ConfigError
from hkt.predictions import PREDICTIONS_NAME, PredictionsError, read_checked
from hkt.run_record import RecordError, load_record
from hkt.rule_references import RULE_REFERENCES
from hkt.report.report_settings import Settings, load_settings
from hkt.report.stats import given_runs_difference, paired_difference
from hkt.report.tables import difference_columns
from hkt.report.writers import Display, pm, signed
from hkt.runs_frame import KEY, MODEL_ORDER, AggregateError, ordered, record_length

__all__ = ["Settings", "load_settings", "Readings", "load_readings", "data_dirs",
           "paired_or_why", "NOT_READ", "NAMES_PREDICTIONS", "compared_variants",
           "paired_table", "with_paired", "paired_note", "paired_display",
           "agreement_table", "agreement_display", "rule_columns", "seed_groups", "ANSWER_RULES",
           "PRIOR"]

#: The rules of increasing depth that "answer depth" reads: an example's answer depth is the
#: first of them that answers it right ("deeper" where none does: only the exact evaluator).
ANSWER_RULES = (("the prior", "root_op_prior"), ("depth 1", "depth1_rule"),
                ("depth 2", "depth2_rule"), ("depth 3", "depth3_rule"))
#: The root-operator prior: what the "prior gets wrong" columns are read against.
PRIOR = "root_op_prior"


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
    refused: list[str] = field(default_factory=list)    # runs whose predictions are not theirs

    def notes(self) -> str:
        """What the per-example tables' captions say of what they could not read."""
        parts = []
        for runs, what in ((self.missing, "Runs without predictions (made before they were "
                                          "kept)"),
                           (self.refused, "Runs whose predictions are missing or not their "
                                          "record's (each named in a warning of the aggregate)")):
            if runs:
                more = f" and {len(runs) - 8} more" if len(runs) > 8 else ""
                parts.append(f"{what}, read nowhere here: {', '.join(runs[:8])}{more}.")
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


def _run_name(r: dict[str, Any]) -> str:
    return f"{r['task']}/{r['model']}/{r['variant']}/seed{r['seed']}"


def _read_predictions(source: str | None) -> pl.DataFrame | None | str:
    """The test predictions of the run whose record is ``source`` (the columns the readings
    use), as :func:`hkt.predictions.read_checked` takes them; None where the record names none,
    or why they are not the run's (a :class:`PredictionsError`'s line)."""
    if not source:
        return None
    try:
        table = read_checked(Path(source).parent, load_record(source),
                             ["split", "row", "label", "pred"])
    except (PredictionsError, RecordError) as exc:
        return str(exc).strip().splitlines()[0]
    if table is None:
        stray = Path(source).parent / PREDICTIONS_NAME
        return (f"{stray} is named by no record: its record names no predictions; remake them "
                "(`hkt predict`)") if stray.exists() else None
    return pl.from_arrow(table).filter(pl.col("split") == "test").sort("row")


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
    refused: list[str] = []
    for r in runs.select(*KEY, "source").iter_rows(named=True):
        key = tuple(r[k] for k in KEY)
        test = _read_predictions(r["source"])
        if not isinstance(test, pl.DataFrame):
            if test is not None:
                print(f"hkt: warning: {_run_name(r)}: {test}; it is read unpaired, as a run "
                      "without predictions", file=sys.stderr)
            (missing if test is None else refused).append(_run_name(r))
            continue
        path = Path(r["source"]).parent / PREDICTIONS_NAME
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
    if not found:  # nothing to read example by example (each refused run was named above)
        return None
    unfacted = sorted({f"{t} T={n} (looked for in {dirs.get((t, n), 'no data_dir')})"
                       for t, n, *_ in found if (t, n) not in facts})
    return Readings(found, facts, settings, missing, unfacted, refused)


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
    "variant": pl.String, "task": pl.String, "length": pl.Int64, "model": pl.String,
    "versus": pl.String, "difference_pp": pl.Float64,
    "paired_ci_low_pp": pl.Float64, "paired_ci_high_pp": pl.Float64,
    "paired_p_value": pl.Float64, "paired_significant": pl.String,
    "ci_low_pp": pl.Float64, "ci_high_pp": pl.Float64,
    "ts_ci_low_pp": pl.Float64, "ts_ci_high_pp": pl.Float64,
    "given_runs_ci_low_pp": pl.Float64, "given_runs_ci_high_pp": pl.Float64,
    "given_runs_p_value": pl.Float64, "seeds_a": pl.Int64, "seeds_b": pl.Int64,
    "examples": pl.Int64}


def finite_or_none(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def _pair(r: Readings, a: pl.DataFrame, b: pl.DataFrame) -> dict[str, Any] | None:
    """The error model's paired reading of runs ``a`` against runs ``b``, and the reading
    given these runs; None where they are not paired."""
    ma, mb = r.matrix(a), r.matrix(b)
    if ma is None or mb is None or not np.array_equal(ma[1], mb[1]):
        return None
    d = paired_difference(ma[0], mb[0], r.settings.confidence)
    g = given_runs_difference(ma[0], mb[0], r.settings.confidence)
    return {"difference_pp": d.diff, "paired_ci_low_pp": finite_or_none(d.ci_low),
            "paired_ci_high_pp": finite_or_none(d.ci_high), "paired_p_value": finite_or_none(d.p_value),
            "paired_significant": d.verdict, "given_runs_ci_low_pp": finite_or_none(g.ci_low),
            "given_runs_ci_high_pp": finite_or_none(g.ci_high), "given_runs_p_value": finite_or_none(g.p_value),
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
    refused = pl.Series([_run_name(k) in r.refused for k in none.iter_rows(named=True)],
                        dtype=pl.Boolean)
    if refused.any():
        return None, (f"the predictions of {_named(none.filter(refused))} are not their "
                      "records' (the aggregate's warnings say why)")
    if not none.is_empty():
        return None, f"no predictions for {_named(none)}"
    return None, (f"the predictions of {_named(lacking)} are not read (--reference records are "
                  "read for their accuracies)")


def _wanted(runs: pl.DataFrame, controls: pl.DataFrame, variants: Sequence[str]
            ) -> list[tuple[str, str, int | None, str, str]]:
    """The differences the paired table reads: (variant, task, T, model, versus): HKT − MHA in
    each of ``variants`` where both trained, and each control row (the first variant's)."""
    a, b = paper.COMPARED_MODELS
    out = []
    for v in variants:
        sel = runs.filter(pl.col("variant") == v)
        for task, length in sel.select("task", "length").unique().sort("task", "length").rows():
            models = set(sel.filter((pl.col("task") == task)
                                    & (pl.col("length") == length))["model"].to_list())
            if {a, b} <= models:
                out.append((v, task, length, a, b))
    out += [(variants[0], c["task"], c["length"], c["model"], c["versus"])
            for c in controls.iter_rows(named=True)]
    return out


def paired_table(r: Readings, runs: pl.DataFrame, controls: pl.DataFrame,
                 variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """HKT − MHA in each of ``variants`` (:func:`compared_variants`) and every control of the
    controls table against HKT and MHA (the first variant), where all runs of both sides are
    paired: the error model's paired reading beside Welch's over seeds, the binomial reading
    and the reading given these runs."""
    rows = []
    for variant, task, length, model, versus in _wanted(runs, controls, variants):
        sel = runs.filter((pl.col("variant") == variant) & (pl.col("task") == task)
                          & (pl.col("length") == length))
        ra, rb = (sel.filter(pl.col("model") == m) for m in (model, versus))
        got = _pair(r, ra, rb)
        if got is None:
            continue
        cols = difference_columns(ra, rb)
        rows.append({"variant": variant, "task": task, "length": length, "model": model,
                     "versus": versus, **got,
                     **{k: cols[k] for k in ("ci_low_pp", "ci_high_pp", "ts_ci_low_pp",
                                             "ts_ci_high_pp")}})
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA).select(*PAIRED_SCHEMA)


PAIRED_COLUMNS = ("paired_ci_low_pp", "paired_ci_high_pp", "paired_p_value",
                  "paired_significant")


def with_paired(table: pl.DataFrame, paired: pl.DataFrame, variant: str = "main",
                model: str | None = None, versus: str | None = None) -> pl.DataFrame:
    """``table`` (gap or controls: ``variant``'s rows) with its ``paired_*`` columns filled
    where ``paired`` has the row: (task, T, and the table's ``model`` and ``versus``, or the
    given ones for the gap table)."""
    if paired.is_empty() or table.is_empty():
        return table
    by = {(p["task"], p["length"], p["model"], p["versus"]): p
          for p in paired.filter(pl.col("variant") == variant).iter_rows(named=True)}
    rows = []
    for row in table.iter_rows(named=True):
        p = by.get((row["task"], row["length"], model or row.get("model"),
                    versus or row.get("versus")))
        rows.append(row if p is None else {**row, **{k: p[k] for k in PAIRED_COLUMNS}})
    return pl.DataFrame(rows, schema=table.schema)


def paired_note(paired: pl.DataFrame, settings: Settings | None) -> str:
    """What a difference table's caption says of its paired columns: on which rows both sides'
    predictions are read (none: the binomial reading stands alone)."""
    if paired.is_empty() or settings is None:
        return ("'seeds + test set, paired': none here (no run's predictions are read on both "
                "sides).")
    where = ", ".join(dict.fromkeys(f"{t} T={n}" for t, n in
                                    paired.select("task", "length").iter_rows()))
    return (f"'seeds + test set, paired' (the primary reading where present; {where}): the "
            "error model with the test set's sampling variance of the difference read from "
            "both sides' predictions on the same examples (the variance over examples of the "
            "per-example difference of the seed-averaged correctness, over n), on t with the "
            f"seed terms' degrees of freedom ({settings.level}; tables/paired beside the rest).")


def paired_display(paired: pl.DataFrame, settings: Settings) -> Display:
    level = settings.level
    header = ["variant", "task", "T", "model", "versus", "model − versus (pp)",
              f"{level} CI, seeds + test set, paired (pp)", "p, seeds + test set, paired",
              f"significant ({settings.alpha})", f"{level} CI, Welch over seeds (pp)",
              f"{level} CI, seeds + test set, binomial (pp)",
              f"{level} CI, given these runs (pp)", "p, given these runs", "seeds", "examples"]
    return header, [[r["variant"], r["task"], str(r["length"]), r["model"], r["versus"],
                     signed(r["difference_pp"]), ci_text(r["paired_ci_low_pp"], r["paired_ci_high_pp"]),
                     p_text(r["paired_p_value"]), r["paired_significant"] or "",
                     ci_text(r["ci_low_pp"], r["ci_high_pp"]),
                     ci_text(r["ts_ci_low_pp"], r["ts_ci_high_pp"]),
                     ci_text(r["given_runs_ci_low_pp"], r["given_runs_ci_high_pp"]),
                     p_text(r["given_runs_p_value"]),
                     f"{r['seeds_a']} vs {r['seeds_b']}", str(r["examples"])]
                    for r in paired.iter_rows(named=True)]


def ci_text(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{signed(low)}, {signed(high)}]"


def p_text(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}" if v >= 0.001 else f"{v:.1e}"


# --------------------------------------------------------------------- models and their groups

def seed_groups(r: Readings, runs: pl.DataFrame, variant: str
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
    drawn = {(t, n, m) for t, n, m, *_ in seed_groups(r, runs, variant)}
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


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
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


def rule_columns(fact: pl.DataFrame) -> list[str]:
    return [rule for rule in RULE_REFERENCES if rule in fact.columns]


def agreement_table(r: Readings, runs: pl.DataFrame, variant: str = "main") -> pl.DataFrame:
    """Per ListOps model (a task whose facts hold the rules' answers; the rules themselves
    aside): the share (%) of test examples on which it answers what each rule answers, mean
    (and std) over seeds, and its accuracy where the root-operator prior is wrong."""
    rows = []
    for task, length, model, (correct, _, seeds), preds in seed_groups(r, runs, variant):
        fact = r.facts[(task, length)]
        rules = rule_columns(fact)
        if not rules or model in RULE_REFERENCES:
            continue
        row: dict[str, Any] = {"task": task, "length": length, "variant": variant,
                               "model": model,
                               "seeds": len(seeds)}
        row["test_mean"], row["test_std"] = mean_std(correct.mean(axis=1))
        for rule in rules:
            answer = fact[rule].to_numpy()
            row[f"agree_{rule}"], row[f"agree_{rule}_std"] = mean_std((preds == answer).mean(1))
        wrong = fact[PRIOR].to_numpy() != fact["label"].to_numpy()
        row["prior_wrong_examples"] = int(wrong.sum())
        if wrong.any():
            row["prior_wrong_mean"], row["prior_wrong_std"] = mean_std(
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
