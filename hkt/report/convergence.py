"""Where the training runs stand at the end of their budget, and where the suite's time went.

* :func:`convergence_table`: per task, T and model, the steps of the best validation checkpoint
  (the one tested), how many seeds were best at their last validation (still rising when the
  budget ended), and the mean validation curve over seeds: its last evaluations and its best.
  Prose about "still rising" or "flat" reads this table.
* :func:`time_table`: per task, the trained runs' summed wall time and what share of it was
  spent evaluating (wall time less the training steps' time).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from hkt.report.writers import Display, fmt
from hkt.runs_frame import MODEL_ORDER, TASK_ORDER, order_key

#: How many of the mean curve's last evaluations the table shows.
LAST_EVALS = 4
#: Decimals the time table keeps: its sums must not depend on the order the runs were read in
#: (records or MLflow give the same values in another order, and float sums differ in the last
#: digit); 6 decimals of an hour is 4 ms.
DIGITS = 6

CONVERGENCE_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "seeds": pl.Int64,
    "steps": pl.Int64, "best_step_min": pl.Int64, "best_step_max": pl.Int64,
    "best_at_last": pl.Int64, "mean_curve_last": pl.String, "mean_curve_best": pl.Float64,
    "mean_curve_best_step": pl.Int64}

TIME_SCHEMA = {"task": pl.String, "length": pl.Int64, "runs": pl.Int64, "wall_h": pl.Float64,
               "steps_h": pl.Float64, "evaluation_share": pl.Float64}


def _mean_curve(curves: pl.DataFrame, seeds: int) -> pl.DataFrame:
    """The mean validation accuracy (%) over seeds at each step every seed evaluated."""
    return (curves.group_by("step").agg((pl.col("val_accuracy").mean() * 100).alias("val"),
                                        pl.col("seed").n_unique().alias("n"))
            .filter(pl.col("n") == seeds).sort("step"))


def convergence_table(runs: pl.DataFrame, curves: pl.DataFrame,
                      variants: Sequence[str] = ("main",),
                      unreadable: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per task, T and trained model of ``variants`` with validation curves, or with
    runs whose history is ``unreadable`` (:func:`hkt.runs_frame.unreadable_histories`: their
    curves are missing from the row, which :func:`convergence_display` and
    :func:`unreadable_note` say)."""
    rows = []
    trained = runs.filter(pl.col("variant").is_in(list(variants)) & pl.col("external").is_null())
    lost = _lost(unreadable, variants)
    for (task, length, model), sel in trained.group_by(["task", "length", "model"]):
        cur = curves.filter((pl.col("task") == task) & (pl.col("length") == length)
                            & (pl.col("model") == model) & pl.col("variant").is_in(list(variants)))
        if cur.is_empty() and not lost.get((task, length, model)):
            continue
        last = cur.group_by("seed").agg(pl.col("step").max().alias("last_step"))
        best = sel.join(last, on="seed", how="inner")
        seeds = sel["seed"].n_unique()
        mean = _mean_curve(cur, seeds)
        top = mean.sort(["val", "step"], descending=[True, False]).head(1)
        rows.append({
            "task": task, "length": length, "model": model, "seeds": seeds,
            "steps": sel["steps"].max(), "best_step_min": sel["best_step"].min(),
            "best_step_max": sel["best_step"].max(),
            "best_at_last": int((best["best_step"] == best["last_step"]).sum()),
            "mean_curve_last": ", ".join(f"{s}: {v:.2f}" for s, v in
                                         mean.tail(LAST_EVALS).select("step", "val").rows()),
            "mean_curve_best": top["val"][0] if len(top) else None,
            "mean_curve_best_step": top["step"][0] if len(top) else None,
        })
    t = pl.DataFrame(rows, schema=CONVERGENCE_SCHEMA)
    return t.sort(order_key("task", TASK_ORDER), "task", "length",
                  order_key("model", MODEL_ORDER), "model")


def _range(low: int | None, high: int | None) -> str:
    if low is None or high is None:
        return "?"
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _lost(unreadable: pl.DataFrame | None, variants: Sequence[str]) -> dict[tuple, int]:
    """How many runs of ``variants`` per (task, T, model) have an unreadable history."""
    if unreadable is None or unreadable.is_empty():
        return {}
    sel = unreadable.filter(pl.col("variant").is_in(list(variants)))
    return {(t, n, m): k for t, n, m, k in sel.group_by("task", "length", "model").len().rows()}


def unreadable_note(unreadable: pl.DataFrame | None, variants: Sequence[str] = ("main",)) -> str:
    """The convergence table's warning where runs of ``variants`` lost their curve to a missing
    or damaged ``history.csv``: how many, and which files; empty where none did."""
    if unreadable is None:
        return ""
    sel = unreadable.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return ""
    files = "; ".join(f"{h} ({why})" for h, why in sel.select("history", "why").rows()[:5])
    more = f" and {len(sel) - 5} more" if len(sel) > 5 else ""
    return (f"Warning: {len(sel)} run(s) have no readable history.csv, and so no curve here (their "
            f"rows say how many seeds lack one): {files}{more}.")


def convergence_display(t: pl.DataFrame, unreadable: pl.DataFrame | None = None,
                        variants: Sequence[str] = ("main",)) -> Display:
    header = ["task", "T", "model", "seeds", "steps", "best step (tested)",
              "seeds best at their last validation", f"mean val curve, last {LAST_EVALS} (step: %)",
              "mean val curve, best (%)"]
    lost = _lost(unreadable, variants)

    def seeds(r: dict) -> str:
        k = lost.get((r["task"], r["length"], r["model"]))
        return f"{r['seeds']} ({k} without a readable history.csv)" if k else str(r["seeds"])

    rows = [[r["task"], str(r["length"]), r["model"], seeds(r), fmt(r["steps"]),
             _range(r["best_step_min"], r["best_step_max"]),
             f"{r['best_at_last']} of {r['seeds']}", r["mean_curve_last"],
             "" if r["mean_curve_best"] is None
             else f"{r['mean_curve_best']:.2f} at step {r['mean_curve_best_step']:,}"]
            for r in t.iter_rows(named=True)]
    return header, rows


def time_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Per task and T, the trained runs (every variant, external baselines aside): their summed
    wall time (h), the part spent in training steps (ms/step × steps) and the rest's share
    (evaluation, checkpoints, loading)."""
    trained = runs.filter(pl.col("external").is_null() & pl.col("wall_time_s").is_not_null())
    t = trained.group_by(["task", "length"]).agg(
        pl.len().cast(pl.Int64).alias("runs"),
        (pl.col("wall_time_s").sum() / 3600).alias("wall_h"),
        ((pl.col("ms_per_step") * pl.col("steps")).sum() / 3.6e6).alias("steps_h"))
    t = t.with_columns((1 - pl.col("steps_h") / pl.col("wall_h")).alias("evaluation_share"))
    t = t.with_columns(pl.col(c).round(DIGITS) for c in ("wall_h", "steps_h", "evaluation_share"))
    total = t.select(pl.lit("all").alias("task"), pl.lit(None, pl.Int64).alias("length"),
                     pl.col("runs").sum(), pl.col("wall_h").sum(), pl.col("steps_h").sum())
    total = total.with_columns((1 - pl.col("steps_h") / pl.col("wall_h")).alias("evaluation_share"))
    total = total.with_columns(pl.col(c).round(DIGITS) for c in ("wall_h", "steps_h", "evaluation_share"))
    t = t.sort(order_key("task", TASK_ORDER), "task", "length")
    return pl.concat([t, total], how="vertical_relaxed").select(*TIME_SCHEMA) if len(t) else \
        pl.DataFrame(schema=TIME_SCHEMA)


def time_display(t: pl.DataFrame) -> Display:
    header = ["task", "T", "trained runs", "wall time, summed (h)", "in training steps (h)",
              "the rest: evaluation, checkpoints, loading (%)"]
    rows = [[r["task"], "" if r["length"] is None else str(r["length"]), str(r["runs"]),
             f"{r['wall_h']:.2f}", f"{r['steps_h']:.2f}", f"{100 * r['evaluation_share']:.1f}"]
            for r in t.iter_rows(named=True)]
    return header, rows
