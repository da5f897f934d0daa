"""The suite's result tables and the figures of its runs, as ``hkt aggregate`` writes them
(:func:`hkt.report.build.write_all` puts them in order): the main table, HKT − MHA (gap), the
controls, the ablation, convergence and time tables, ``runs.csv`` and the figures of the runs'
accuracies and curves; with the caveats each caption carries (the budget, the test examples,
the data's warnings, the learning rates where models differ, the rule references).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from hkt.figures import suite as figures
from hkt.fileio import atomic_path
from hkt.paper import COMPARED_MODELS
from hkt.report import paired as paired_readings
from hkt.report.controls import controls_display, controls_table
from hkt.report.convergence import (convergence_display, convergence_table, time_display,
                                    time_table, unreadable_note)
from hkt.report.example_runs import Readings, compared_variants
from hkt.report.tables import (ablation_display, ablation_table, derived_runs, difference_note,
                               gap_display, gap_table, main_display, main_notes, main_table,
                               with_test_interval)
from hkt.report.writers import learning_rate, write_table
from hkt.runs_frame import KEY, examples_note, paper_caveat

__all__ = ["Notes", "Compared", "Ablation", "caveats", "write_comparisons", "write_ablation", "write_run_tables", "write_runs_and_figures",
           "setting_notes", "learning_rate_note"]

#: The caveats of a table's runs, in words (:func:`caveats`).
Notes = Callable[[pl.DataFrame], str]


def caveats(data_warnings: dict[tuple[str, int | None], str]) -> Notes:
    """What a table's caption says of its runs ``sel``, that a reader needs in the file itself:
    not at the paper's budget, the test examples read, and the data's warnings of their tasks
    (per (task, T): :func:`hkt.report.summary.data_warnings`)."""

    def notes(sel: pl.DataFrame) -> str:
        data = [f"Warning ({t}, T={n}): {w}" for (t, n), w in sorted(data_warnings.items(), key=str)
                if not sel.filter((pl.col("task") == t) & (pl.col("length") == n)).is_empty()]
        return " ".join(filter(None, (paper_caveat(sel), examples_note(sel), *data)))

    return notes


class Compared:
    """The models compared side by side in the main variant: the main table, HKT − MHA (gap) and
    the controls, with the paired table and the notes of the gap's and the controls' paired
    columns (:mod:`hkt.report.paired`) where the runs' predictions are read."""

    def __init__(self, runs: pl.DataFrame, main_variant: str,
                 readings: Readings | None) -> None:
        self.main = main = main_table(runs, (main_variant,))
        self.gap = gap_table(main, runs, variants=(main_variant,))
        self.controls = controls_table(main, runs, variants=(main_variant,))
        self.paired = pl.DataFrame()
        self.gap_note = self.controls_note = (difference_note() + " "
                                              + paired_readings.paired_note(self.paired, None))
        if readings is not None:
            self._pair(readings, runs, main_variant)

    def _pair(self, readings: Readings, runs: pl.DataFrame, main_variant: str) -> None:
        """Fill the gap's and the controls' paired columns from the runs' predictions."""
        paired = self.paired = paired_readings.paired_table(
            readings, runs, self.controls, compared_variants(runs, main_variant))
        self.gap = paired_readings.with_paired(self.gap, paired, main_variant, *COMPARED_MODELS)
        self.controls = paired_readings.with_paired(self.controls, paired, main_variant)
        is_gap = ((pl.col("model") == COMPARED_MODELS[0])
                  & (pl.col("versus") == COMPARED_MODELS[1])
                  & (pl.col("variant") == main_variant))
        self.gap_note = difference_note() + " " + paired_readings.paired_note(
            paired.filter(is_gap), readings.settings)
        self.controls_note = difference_note() + " " + paired_readings.paired_note(
            paired.filter(~is_gap & (pl.col("variant") == main_variant)), readings.settings)


class Ablation:
    """The ablation table on ``task``, its T, and the runs it reads (with the rows ``derived``
    from a model's main runs: :func:`hkt.report.build.derived_spec`)."""

    def __init__(self, runs: pl.DataFrame, task: str, length: int | None,
                 derived: dict[str, tuple[str, int | None]] | None, main_variant: str,
                 readings: Readings | None = None) -> None:
        self.task = task
        self.with_derived = with_derived = pl.concat(
            [runs, derived_runs(runs, derived or {}, task, main_variant)],
            how="diagonal_relaxed") if derived else runs
        self.table = ablation_table(with_derived, task, length, full_variant=main_variant,
                                    main_variant=main_variant,
                                    notes=setting_notes(with_derived, task, main_variant))
        if readings is not None:  # each variant against the full HKT, paired where it can be
            self.table = paired_readings.ablation_with_paired(
                self.table, with_derived, readings, subject=COMPARED_MODELS[0],
                full_variant=main_variant, main_variant=main_variant)
        paired = self.table.filter(pl.col("paired_ci_low_pp").is_not_null())
        self.paired_note = paired_readings.paired_note(
            paired, None if readings is None else readings.settings)
        self.length = self.table["length"][0] if len(self.table) else length
        sel = with_derived.filter(pl.col("task") == task)
        self.runs = sel if self.length is None else sel.filter(pl.col("length") == self.length)


def write_comparisons(c: Compared, runs: pl.DataFrame, tables: Path, notes: Notes, refs: str,
                      main_variant: str) -> list[Path]:
    """The main, gap and controls tables under ``tables``; ``refs``: the rule references'
    sentence, which every table reads against."""
    main_runs = runs.filter(pl.col("variant") == main_variant)
    # models side by side (main, controls) also name their learning rates where they differ
    side_by_side = " ".join(filter(None, (notes(main_runs), learning_rate_note(main_runs))))
    written = write_table(c.main, main_display(c.main), tables / "main",
                          "Main table: accuracy (%) as mean ± std over seeds; the paper's "
                          "figure beside ours; Δ = ours − paper (test). "
                          + " ".join(filter(None, (side_by_side, main_notes(c.main)))))

    def with_refs(*parts: str) -> str:
        return " ".join(filter(None, (*parts, refs)))

    written += write_table(c.gap, gap_display(c.gap), tables / "gap",
                           "HKT − MHA test accuracy (percentage points): ours and the paper's. "
                           + with_refs(notes(main_runs), c.gap_note))
    written += write_table(c.controls, controls_display(c.controls), tables / "controls",
                           "Controls: each trained model other than the paper's two against HKT and "
                           "MHA, test accuracy, with Welch's test over seeds, and against the "
                           "paper's figure for HKT and MHA. "
                           + (with_refs(side_by_side, c.controls_note) if len(c.controls) else
                              "No control model was trained in these runs."))
    return written


def write_ablation(a: Ablation, tables: Path, notes: Notes, refs: str) -> list[Path]:
    """The ablation table under ``tables``."""
    return write_table(a.table, ablation_display(a.table), tables / "ablation",
                       f"Ablations on {a.task} (T={a.length}): Δ = test accuracy − "
                       f"the full HKT's; paper Δ: removing the hierarchy (L=1). "
                       + " ".join(filter(None, (notes(a.runs), difference_note(), a.paired_note,
                                                refs))))


def write_run_tables(runs: pl.DataFrame, curves: pl.DataFrame, unreadable: pl.DataFrame | None,
                     tables: Path, refs: str, main_variant: str) -> list[Path]:
    """The convergence table (where the validation curves stand at the end of each budget) and
    the time table (where the runs' time went) under ``tables``."""
    conv = convergence_table(runs, curves, (main_variant,), unreadable)
    written = write_table(conv, convergence_display(conv, unreadable, (main_variant,)),
                          tables / "convergence",
                          "Where the validation curves stand at the end of each budget: the best "
                          "checkpoint's step (the one tested), how many seeds were best at their "
                          "last validation (still rising), and the mean validation curve over "
                          "seeds (steps every seed evaluated)."
                          + "".join(" " + n for n in (unreadable_note(unreadable, (main_variant,)),
                                                      refs) if n))
    spent = time_table(runs)
    written += write_table(spent, time_display(spent), tables / "time",
                           "Where the trained runs' time went: each run's wall time summed (jobs "
                           "that ran side by side count each), the part in training steps, and "
                           "the rest. The suite's own wall time is in plan/sessions.json.")
    return written


def write_runs_and_figures(runs: pl.DataFrame, curves: pl.DataFrame, a: Ablation, out: Path,
                           main_variant: str) -> list[Path]:
    """``tables/runs.csv`` (every run, with its test interval) and the figures of the runs:
    validation curves, accuracy against the levels (the ablation's), the main bars."""
    runs_csv = out / "tables" / "runs.csv"
    with atomic_path(runs_csv) as tmp:
        with_test_interval(runs).sort(KEY).write_csv(tmp)
    figs = out / "figures"
    return [runs_csv,
            figures.val_curves(curves, figs / "val_curves.png", (main_variant,), runs),
            figures.accuracy_vs_levels(a.with_derived, figs / "accuracy_vs_levels.png",
                                       a.task, a.length, main_variant),
            figures.main_bar(runs, figs / "main_bar.png", (main_variant,))]


def setting_notes(runs: pl.DataFrame, task: str,
                  main_variant: str = "main") -> dict[tuple[str, str], str]:
    """What the ablation table's setting adds per (model, variant) on ``task``: the learning
    rate each row's runs trained with (the runs frame's ``lr``, from their records' config),
    when the rows of that task do not all share one (a learning-rate table: every row names its
    own). Empty otherwise."""
    sel = runs.filter((pl.col("task") == task) & pl.col("lr").is_not_null())
    if sel["lr"].n_unique() < 2:
        return {}
    per_row = sel.group_by("model", "variant").agg(pl.col("lr").unique())
    return {(m, v): f"lr={learning_rate(lrs[0])}" for m, v, lrs in per_row.iter_rows()
            if len(lrs) == 1}


def learning_rate_note(runs: pl.DataFrame) -> str:
    """The peak learning rates of the trained ``runs`` per task and T where models differ (S4D
    trains at its own, ``config/model_optim/s4d.yaml``): a table setting them side by side
    says so."""
    sel = runs.filter(pl.col("external").is_null() & pl.col("lr").is_not_null())
    parts = []
    for (task, length), rows in sorted(sel.group_by("task", "length"), key=lambda kv: str(kv[0])):
        if rows["lr"].n_unique() < 2:
            continue
        by_lr = rows.group_by("lr").agg(pl.col("model").unique().sort()).sort("lr")
        parts.append(f"{task} T={length}: " + "; ".join(
            f"{', '.join(models)} {learning_rate(lr)}" for lr, models in by_lr.iter_rows()))
    return f"Peak learning rates differ between models: {'; '.join(parts)}." if parts else ""
