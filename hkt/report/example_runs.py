"""The runs read example by example: each run's test predictions (``predictions.parquet``
beside its record) and its task's per-example facts (``examples.parquet``,
:mod:`hkt.facts.examples`), gathered in one :class:`Readings` that every per-example table
reads (:mod:`hkt.report.paired`, :mod:`hkt.report.rule_agreement`, :mod:`hkt.report.buckets`).

A run's predictions are read only as :func:`hkt.predictions.read_checked` takes them (the file
its record names, its SHA-256, rows and accuracies the record's); a run whose are not is named
in one warning line and read unpaired, as one without. Runs without predictions (made before
they were written) are listed in the tables' captions (:meth:`Readings.notes`). Per (task, T,
model), :func:`seed_groups` stacks its seeds' answers; :func:`undrawn` says why a model is left
out of them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from hkt import paper
from hkt.errors import ConfigError
from hkt.facts.examples import load_examples
from hkt.predictions import PREDICTIONS_NAME, PredictionsError, read_checked
from hkt.report.report_settings import Settings
from hkt.rule_references import RULE_REFERENCES
from hkt.run_record import RecordError, load_record
from hkt.runs_frame import KEY, MODEL_ORDER, AggregateError, ordered, record_length

__all__ = ["Run", "Readings", "data_dirs", "load_readings", "run_name", "compared_variants",
           "seed_groups", "undrawn", "mean_std"]


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
                most = self.settings.named_runs
                more = f" and {len(runs) - most} more" if len(runs) > most else ""
                parts.append(f"{what}, read nowhere here: {', '.join(runs[:most])}{more}.")
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


def run_name(r: dict[str, Any]) -> str:
    """A run as the warnings and captions name it: ``task/model/variant/seedS``."""
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
                print(f"hkt: warning: {run_name(r)}: {test}; it is read unpaired, as a run "
                      "without predictions", file=sys.stderr)
            (missing if test is None else refused).append(run_name(r))
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
    """The mean and std (pp) over seeds of per-seed shares ``values``; no std of one seed."""
    x = np.asarray(values, dtype=np.float64) * 100
    return float(x.mean()), (float(x.std(ddof=1)) if x.size > 1 else None)

