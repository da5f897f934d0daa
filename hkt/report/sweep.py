"""The learning-rate tables: each model's accuracy at every setting it was trained with (a
peak learning rate and a budget in steps), and HKT − MHA with each model at its best setting
beside the gap at each setting both share.

A fair comparison tunes each model (issue 39): one learning rate for both may favour the
model that learns faster at it. The best setting is chosen by validation accuracy, never by
test. A setting is the pair (learning rate, steps): the long suite (issue 50) trains the same
rate for twice the steps, whose runs must not be pooled with the shorter ones. Runs may come
from the suite itself (the ``sweep`` variants) and from borrowed runs (``hkt aggregate
--borrow``: another publication's records, the runs at the default setting, the profile's rate
and budget, and at other settings), read once here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from hkt import paper
from hkt.report.example_runs import Readings
from hkt.report.paired import PAIRED_COLUMNS, paired_or_why
from hkt.report.tables import (DIFF_SCHEMA, ci_text, difference_columns, difference_note, p_text,
                               seed_stats, seeds_header, test_set_cells, test_set_header)
from hkt.report.writers import Display, pm, signed, write_table

__all__ = ["SWEEP_PAIRED_NOTE", "SWEEP_SCHEMA", "SWEEP_GAP_SCHEMA", "THIS_SUITE", "ONE_RATE",
           "EACH_AT_BEST",
           "swept_runs", "sweep_table", "sweep_gap_table", "sweep_display", "sweep_gap_display",
           "write_sweep"]

#: The ``source`` of the aggregated suite's own runs; any other source names the borrowed
#: records they are set beside (``--borrow``: the runs at the default setting, the profile's).
THIS_SUITE = "this suite"
#: The learning-rate gap table's comparisons: both models at one shared setting (rate and steps),
#: each at its own best.
ONE_RATE, EACH_AT_BEST = "both at one setting", "each at its best setting (validation)"
SETTING = ["lr", "steps"]  # what a sweep varies: the peak learning rate and the budget
GROUP = ["task", "length", "model", *SETTING]
SWEEP_SCHEMA = {"task": pl.String, "length": pl.Int64, "model": pl.String, "lr": pl.Float64,
                "steps": pl.Int64, "seeds": pl.UInt32, "val_mean": pl.Float64, "val_std": pl.Float64,
                "test_mean": pl.Float64, "test_std": pl.Float64, "source": pl.String,
                "best": pl.Boolean, "test_examples": pl.Int64, "precision": pl.String}
#: The learning-rate gap: Welch over seeds, with the test set's binomial error (``ts_*``), and
#: with its paired error over the test examples both sides answered (``paired_*``:
#: :func:`hkt.report.paired.paired_or_why`), or why it is not (``paired_why``).
SWEEP_GAP_SCHEMA = {"task": pl.String, "length": pl.Int64, "comparison": pl.String,
                    "lr_a": pl.Float64, "steps_a": pl.Int64, "lr_b": pl.Float64,
                    "steps_b": pl.Int64, "ours_pp": pl.Float64, **DIFF_SCHEMA,
                    "paired_examples": pl.Int64, "paired_why": pl.String}


#: What the learning-rate gap table's caption says of its paired columns.
SWEEP_PAIRED_NOTE = ("'seeds + test set, paired' (the primary reading where present): the error "
                     "model with the test set's sampling variance of the difference read from "
                     "both sides' predictions on the same examples (the variance over examples "
                     "of the per-example difference of the seed-averaged correctness, over n); "
                     "where a side's runs have no predictions the cell says whose.")


def swept_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The trained runs of every (task, T, model) trained at more than one setting (learning
    rate, steps)."""
    trained = runs.filter(pl.col("external").is_null() & pl.col("lr").is_not_null())
    several = (trained.group_by("task", "length", "model")
               .agg(pl.struct(SETTING).n_unique().alias("n"))
               .filter(pl.col("n") > 1).drop("n"))
    return trained.join(several, on=["task", "length", "model"], how="semi")


def sweep_table(sel: pl.DataFrame) -> pl.DataFrame:
    """Per task, T, model and setting (learning rate, steps) of the runs ``sel``
    (:func:`swept_runs`): seeds, validation and test accuracy (mean ± std, %), where the runs come
    from (``source``), whether it is the model's best setting by mean validation accuracy, the
    fewest test examples of its runs and the precisions they trained in (a learning-rate claim
    that compares two settings reads the test set's error and says where precisions differ)."""
    if sel.is_empty():
        return pl.DataFrame(schema=SWEEP_SCHEMA)
    t = seed_stats(sel.sort("seed"), GROUP).select(
        *GROUP, "seeds", "val_mean", "val_std", "test_mean", "test_std")
    src = sel.group_by(GROUP).agg(pl.col("source").unique().sort().str.join(", "),
                                  pl.col("test_examples").min(),
                                  pl.col("precision").drop_nulls().unique().sort().str.join(", "))
    t = t.join(src, on=GROUP, how="left")
    best = pl.col("val_mean") == pl.col("val_mean").max().over("task", "length", "model")
    return t.with_columns(best.alias("best")).select(*SWEEP_SCHEMA).sort(GROUP)


Setting = tuple[float, int]  # (learning rate, steps)


def _best_setting(table: pl.DataFrame, task: str, length: int, model: str) -> Setting | None:
    """The model's best setting by validation (the lowest rate, then the fewest steps, of a tie)."""
    rows = table.filter((pl.col("task") == task) & (pl.col("length") == length)
                        & (pl.col("model") == model) & pl.col("best"))
    return None if rows.is_empty() else rows.sort(SETTING).select(SETTING).row(0)


def sweep_gap_table(sel: pl.DataFrame, table: pl.DataFrame,
                    pair: Sequence[str] = paper.COMPARED_MODELS,
                    readings: Readings | None = None) -> pl.DataFrame:
    """Per task and T of the runs ``sel`` (:func:`swept_runs`): ``pair[0] − pair[1]`` (pp,
    Welch over seeds) at each setting (learning rate, steps) both were trained with, and with
    each at its own best setting (``table``: :func:`sweep_table`); beside it, the same paired
    over the test examples where every run of both sides has its predictions (``readings``),
    else why not (``paired_why``)."""
    a, b = pair
    rows = []
    for task, length in table.select("task", "length").unique().sort("task", "length").rows():
        here = sel.filter((pl.col("task") == task) & (pl.col("length") == length))
        set_a, set_b = (set(here.filter(pl.col("model") == m).select(SETTING).rows())
                        for m in (a, b))
        pairs = [(ONE_RATE, s, s) for s in sorted(set_a & set_b)]
        best_a, best_b = (_best_setting(table, task, length, m) for m in (a, b))
        if best_a is not None and best_b is not None:
            pairs.append((EACH_AT_BEST, best_a, best_b))
        for label, (lr_a, steps_a), (lr_b, steps_b) in pairs:
            ra = here.filter((pl.col("model") == a) & (pl.col("lr") == lr_a)
                             & (pl.col("steps") == steps_a))
            rb = here.filter((pl.col("model") == b) & (pl.col("lr") == lr_b)
                             & (pl.col("steps") == steps_b))
            ours = (ra["test_accuracy"].mean() - rb["test_accuracy"].mean()) * 100
            paired, why = paired_or_why(readings, ra, rb)
            rows.append({"task": task, "length": length, "comparison": label, "lr_a": lr_a,
                         "steps_a": steps_a, "lr_b": lr_b, "steps_b": steps_b, "ours_pp": ours,
                         **difference_columns(ra, rb),
                         **({"paired_why": why} if paired is None else {
                             **{k: paired[k] for k in PAIRED_COLUMNS},
                             "paired_examples": paired["examples"]})})
    return pl.DataFrame(rows, schema=SWEEP_GAP_SCHEMA)


def sweep_display(table: pl.DataFrame) -> Display:
    header = ["task", "T", "model", "learning rate", "steps", "seeds", "val acc (%)",
              "test acc (%)", "runs from", "best by validation"]
    rows = [[r["task"], str(r["length"]), r["model"], f"{r['lr']:g}", f"{r['steps']:,}",
             str(r["seeds"]),
             pm(r["val_mean"], r["val_std"]), pm(r["test_mean"], r["test_std"]), r["source"] or "",
             "yes" if r["best"] else ""] for r in table.iter_rows(named=True)]
    return header, rows


def _none(why: str | None) -> str:
    """An interval's cell where there is none: why, in words (``n/a (…)`` read as its reason)."""
    why = (why or "").strip()
    if why.startswith("n/a (") and why.endswith(")"):
        why = why[len("n/a ("):-1]
    return f"none: {why}" if why else "none"


def _with_why(cells: list[str], why: str | None) -> list[str]:
    """An interval's cells (interval, p), the interval's saying why where there is none."""
    return [cells[0] or _none(why), *cells[1:]]


def sweep_gap_display(gap: pl.DataFrame, pair: Sequence[str] = paper.COMPARED_MODELS) -> Display:
    a, b = (m.upper() for m in pair)
    header = ["task", "T", "comparison", f"{a} learning rate", f"{a} steps", f"{b} learning rate",
              f"{b} steps", f"{a} − {b} (pp)", *seeds_header(), *test_set_header(True), "seeds"]
    rows = [[r["task"], str(r["length"]), r["comparison"], f"{r['lr_a']:g}", f"{r['steps_a']:,}",
             f"{r['lr_b']:g}", f"{r['steps_b']:,}", signed(r["ours_pp"]),
             ci_text(r) or _none(r["significant"]), p_text(r["p_value"]), r["significant"] or "",
             *_with_why(test_set_cells(r), r["ts_significant"]),
             ci_text(r, "paired_") or _none(r["paired_why"] or r["paired_significant"]),
             p_text(r["paired_p_value"]),
             f"{r['seeds_a']} vs {r['seeds_b']}"] for r in gap.iter_rows(named=True)]
    return header, rows


def write_sweep(runs: pl.DataFrame, borrowed: pl.DataFrame | None, tables: Path,
                notes: Callable[[pl.DataFrame], str], refs: str = "",
                readings: Readings | None = None
                ) -> tuple[list[Path], dict[str, pl.DataFrame]]:
    """The learning-rate tables of ``runs`` and the ``borrowed`` runs under ``tables``: the
    paths written and the tables by name (``sweep``, ``sweep_gap``). ``notes``: the caveats of
    the runs read (:func:`hkt.report.result_tables.caveats`); ``refs``: the rule references'
    sentence, said beside the rows; ``readings``: the runs' predictions, which pair the gap's
    rows whose runs all have them."""
    mine = runs.with_columns(pl.lit(THIS_SUITE).alias("source"))
    both = mine if borrowed is None else pl.concat([mine, borrowed], how="diagonal_relaxed")
    swept = swept_runs(both)
    table, caveats = sweep_table(swept), notes(swept)
    gap = sweep_gap_table(swept, table, readings=readings)
    none = "No model of these runs was trained at more than one learning rate or budget."
    written = write_table(table, sweep_display(table), tables / "sweep",
                          "Learning rates and budgets: each model's validation and test accuracy "
                          "(%) at every setting (peak learning rate, steps) it was trained with; "
                          "its best setting by mean validation accuracy. "
                          + (" ".join(filter(None, (caveats, refs))) if len(table) else none))
    written += write_table(gap, sweep_gap_display(gap), tables / "sweep_gap",
                           "HKT − MHA test accuracy (pp) at each setting (peak learning rate, "
                           "steps) both were trained with, and with each model at its own best "
                           "setting (by validation), Welch's test over seeds. "
                           + (" ".join(filter(None, (caveats, difference_note(),
                                                     SWEEP_PAIRED_NOTE, refs)))
                              if len(gap) else none))
    return written, {"sweep": table, "sweep_gap": gap}
