"""The result tables from the runs frame (:mod:`hkt.runs`), each with its display.

* :func:`main_table`: per task, T and model, mean ± std over seeds of validation and test
  accuracy, parameters, time per step; the paper's figure beside ours and the difference.
* :func:`gap_table`: HKT − MHA per task and T, ours and the paper's.
* :func:`ablation_table`: the variants on one task against the full HKT, with the paper's L=1
  figure.

``*_display`` turns a table into the strings of its Markdown/LaTeX form
(:mod:`hkt.report.writers`). Accuracies are fractions in the runs frame, percentages here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from hkt import paper
from hkt.report.writers import Display, fmt, pm, signed
from hkt.runs import MODEL_ORDER, TASK_ORDER, VARIANT_FIELDS, most_common_length, order_key

#: How an ablation row states its attention settings: field -> format (in this order).
SETTING_FORMAT = {"levels": "L={}", "stride": "s={}", "fusion": "{}", "upsample": "{}"}


def seed_stats(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group: seeds, mean and sample std (percent) of val/test accuracy, params, ms/step."""
    return runs.group_by(by, maintain_order=True).agg(
        pl.col("seed").n_unique().alias("seeds"),
        (pl.col("val_accuracy").mean() * 100).alias("val_mean"),
        (pl.col("val_accuracy").std(ddof=1) * 100).alias("val_std"),
        (pl.col("test_accuracy").mean() * 100).alias("test_mean"),
        (pl.col("test_accuracy").std(ddof=1) * 100).alias("test_std"),
        pl.col("n_params").mean().round(0).cast(pl.Int64).alias("n_params"),
        pl.col("ms_per_step").mean().alias("ms_per_step"),
        pl.col("profile").unique().sort().str.join(",").alias("profile"),
    )


MAIN_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "seeds": pl.UInt32,
    "val_mean": pl.Float64, "val_std": pl.Float64, "test_mean": pl.Float64,
    "test_std": pl.Float64, "n_params": pl.Int64, "ms_per_step": pl.Float64,
    "profile": pl.String, "paper_mean": pl.Float64, "paper_std": pl.Float64,
    "lra_transformer": pl.Float64, "delta_vs_paper": pl.Float64}


def main_table(runs: pl.DataFrame, variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """Per task, T and model: mean ± std over seeds, with the paper's figure and our difference.

    Columns: task, length, model, seeds, val_mean, val_std, test_mean, test_std, n_params,
    ms_per_step, profile, paper_mean, paper_std, delta_vs_paper (ours − paper, pp),
    lra_transformer (the LRA paper's vanilla Transformer at that T, for context).
    """
    sel = runs.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return pl.DataFrame(schema=MAIN_SCHEMA)
    t = seed_stats(sel, ["task", "length", "model"])
    pm_, ps, lra = [], [], []
    for task, length, model in t.select("task", "length", "model").iter_rows():
        ref = paper.paper_accuracy(task, length or -1, model)
        pm_.append(ref.mean if ref else None)
        ps.append(ref.std if ref else None)
        ctx = paper.lra_reference(task, length or -1, model)
        lra.append(ctx.mean if ctx else None)
    t = t.with_columns(pl.Series("paper_mean", pm_, dtype=pl.Float64),
                       pl.Series("paper_std", ps, dtype=pl.Float64),
                       pl.Series("lra_transformer", lra, dtype=pl.Float64))
    t = t.with_columns((pl.col("test_mean") - pl.col("paper_mean")).alias("delta_vs_paper"))
    return t.sort(order_key("task", TASK_ORDER), "task", "length",
                  order_key("model", MODEL_ORDER), "model")


def gap_table(main: pl.DataFrame, a: str = "hkt", b: str = "mha") -> pl.DataFrame:
    """Per task and T: ours a − b (pp) beside the paper's a − b, and their difference."""
    cols = ["task", "length", "test_mean", "paper_mean"]
    left = main.filter(pl.col("model") == a).select(cols)
    right = main.filter(pl.col("model") == b).select(cols)
    g = left.join(right, on=["task", "length"], suffix="_b")
    return g.select(
        "task", "length",
        (pl.col("test_mean") - pl.col("test_mean_b")).alias("ours_pp"),
        (pl.col("paper_mean") - pl.col("paper_mean_b")).alias("paper_pp"),
    ).with_columns((pl.col("ours_pp") - pl.col("paper_pp")).alias("difference_pp"))


def describe_variant(row: dict[str, Any]) -> str:
    """What an ablation row's model is, in words: its attention settings where its config has
    them (``HKT L=3, s=2, dynamic, nearest``), else its FFN width (``MHA (d_ffn=128)``)."""
    name = row["model"].upper()
    settings = [f.format(row[k]) for k, f in SETTING_FORMAT.items() if row.get(k) is not None]
    if settings:
        return f"{name} {', '.join(settings)}"
    return f"{name} (d_ffn={row.get('d_ffn')})"


ABLATION_SCHEMA = {"variant": pl.String, "model": pl.String, "setting": pl.String,
                   "seeds": pl.UInt32, "val_mean": pl.Float64, "val_std": pl.Float64,
                   "test_mean": pl.Float64, "test_std": pl.Float64, "n_params": pl.Int64,
                   "ms_per_step": pl.Float64, "delta_pp": pl.Float64,
                   "paper_delta_pp": pl.Float64, "levels": pl.Int64, "task": pl.String,
                   "length": pl.Int64}


def ablation_table(runs: pl.DataFrame, task: str = "listops", length: int | None = None,
                   reference: str = "main", main_variant: str = "main",
                   models: Sequence[str] = ("hkt", "mha"), subject: str = "hkt") -> pl.DataFrame:
    """Variants on one task against the full model ``subject`` (its ``reference`` variant).

    Rows: every run of ``models`` on (task, T) (T defaults to the most common one), grouped by
    model and variant. Columns add ``setting`` (what the variant is), ``delta_pp`` (test
    accuracy minus the reference's) and ``paper_delta_pp`` (the paper's −18.4 for L=1).
    """
    sel = runs.filter((pl.col("task") == task) & pl.col("model").is_in(list(models)))
    if length is None:
        length = most_common_length(sel)
    sel = sel.filter(pl.col("length") == length) if length is not None else sel.clear()
    if sel.is_empty():
        return pl.DataFrame(schema=ABLATION_SCHEMA)
    t = seed_stats(sel, ["model", "variant"]).join(
        sel.group_by(["model", "variant"]).agg(
            *(pl.col(k).first() for k in VARIANT_FIELDS if k != "kernel_size"),
            pl.col("d_ffn").first()),
        on=["model", "variant"])
    ref = t.filter((pl.col("model") == subject) & (pl.col("variant") == reference))
    ref_acc = ref["test_mean"][0] if len(ref) else None
    setting = [describe_variant(row) for row in t.iter_rows(named=True)]
    paper_delta = [paper.ablation_delta(task, length, m, lv)
                   for m, lv in t.select("model", "levels").iter_rows()]
    t = t.with_columns(
        pl.Series("setting", setting, dtype=pl.String),
        (pl.col("test_mean") - ref_acc if ref_acc is not None
         else pl.lit(None, dtype=pl.Float64)).alias("delta_pp"),
        pl.Series("paper_delta_pp", paper_delta, dtype=pl.Float64),
        pl.lit(task).alias("task"), pl.lit(length, dtype=pl.Int64).alias("length"),
    )
    rank = (pl.when((pl.col("model") == subject) & (pl.col("variant") == reference)).then(0)
              .when(pl.col("model") == subject).then(1).otherwise(2))
    main_first = pl.when(pl.col("variant") == main_variant).then(0).otherwise(1)
    t = t.sort(rank, order_key("model", MODEL_ORDER), main_first, "levels", "variant",
               nulls_last=True)
    return t.select(*ABLATION_SCHEMA)


def main_display(main: pl.DataFrame) -> Display:
    header = ["task", "T", "model", "seeds", "val acc (%)", "test acc (%)", "paper (%)",
              "Δ vs paper (pp)", "params", "ms/step"]
    rows = []
    for r in main.iter_rows(named=True):
        rows.append([r["task"], str(r["length"]), r["model"], str(r["seeds"]),
                     pm(r["val_mean"], r["val_std"]), pm(r["test_mean"], r["test_std"]),
                     pm(r["paper_mean"], r["paper_std"]) if r["paper_mean"] is not None else
                     (f"({r['lra_transformer']:.2f} LRA)" if r["lra_transformer"] is not None else ""),
                     signed(r["delta_vs_paper"]), fmt(r["n_params"]), fmt(r["ms_per_step"], 1)])
    return header, rows


def gap_display(gap: pl.DataFrame) -> Display:
    header = ["task", "T", "HKT − MHA, ours (pp)", "HKT − MHA, paper (pp)", "difference (pp)"]
    rows = [[r["task"], str(r["length"]), signed(r["ours_pp"]), signed(r["paper_pp"]),
             signed(r["difference_pp"])] for r in gap.iter_rows(named=True)]
    return header, rows


def ablation_display(abl: pl.DataFrame) -> Display:
    header = ["variant", "setting", "seeds", "val acc (%)", "test acc (%)",
              "Δ vs HKT (pp)", "paper Δ (pp)", "params", "ms/step"]
    rows = [[r["variant"], r["setting"], str(r["seeds"]), pm(r["val_mean"], r["val_std"]),
             pm(r["test_mean"], r["test_std"]), signed(r["delta_pp"]),
             signed(r["paper_delta_pp"]), fmt(r["n_params"]), fmt(r["ms_per_step"], 1)]
            for r in abl.iter_rows(named=True)]
    return header, rows
