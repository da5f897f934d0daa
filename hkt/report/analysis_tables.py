"""Tables across runs from ``hkt analyze`` outputs, and the cost table (the paper's analyses).
Their figures are in :mod:`hkt.figures.suite`.

Every table keeps the sequence lengths T of a task apart, as the main tables do.

- kurtosis: κ per task, T, model, quantity and level (mean over layers, heads and seeds) beside
  the Gaussian value 1 and the paper's ≈ 33;
- kernel: antisymmetric share, spectrum of M_s, PSD-condition status and Gram rank per level;
- truncation: accuracy with levels < L′ kept, per task, T and variant (mean ± std over seeds);
- cost: the analytic score-FLOP ratio beside the measured time and memory ratios of
  ``hkt bench attention`` and the training runs' ms/step of HKT vs MHA.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from hkt.mixers.hkt import score_cost_limit, score_cost_ratio
from hkt.paper import KURTOSIS as PAPER_KAPPA
from hkt.paper import LEVELS as PAPER_LEVELS
from hkt.paper import SCORE_COST
from hkt.paper import STRIDE as PAPER_STRIDE
from hkt.run_record import ANALYSIS_FILE
from hkt.report.writers import Display, fmt, pm, write_table
from hkt.runs_frame import KEY, AggregateError, find_records, load_records, record_length

#: What the per-model tables group by (over seeds, layers and heads): lengths T of a task and
#: variants of a model (an L=1 ablation beside L=3) stay apart.
BY_MODEL = ["task", "length", "model", "variant"]


def _with_length(table: pl.DataFrame, path: Path) -> pl.DataFrame:
    """An analysis table with its ``length`` column; files written before it existed take it
    from their run's record (``run_dir``), so that different T of a task stay apart."""
    if "length" in table.columns:
        return table
    run_dirs = table["run_dir"].unique().to_list() if "run_dir" in table.columns else []
    try:
        (rec,) = load_records(run_dirs, validate=False)
    except (AggregateError, ValueError):
        raise AggregateError(f"{path} has no 'length' column and its run record cannot be "
                             "read: re-run `hkt analyze` for it") from None
    return table.with_columns(pl.lit(record_length(rec), dtype=pl.Int64).alias("length"))


def load_analyses(paths: Iterable[str | Path]) -> pl.DataFrame:
    """Every ``analysis.parquet`` under ``paths`` (files, run outputs or trees), concatenated."""
    files = find_records(paths, name=ANALYSIS_FILE)
    if not files:
        return pl.DataFrame()
    return pl.concat([_with_length(pl.read_parquet(f), f) for f in files], how="diagonal_relaxed")


def _metric(df: pl.DataFrame, section: str, metric: str) -> pl.DataFrame:
    return df.filter((pl.col("section") == section) & (pl.col("metric") == metric))


def kurtosis_table(df: pl.DataFrame) -> pl.DataFrame:
    """κ per task, T, model, variant, quantity and level: mean and range over layers, heads
    and seeds."""
    kappa = _metric(df, "kurtosis", "kappa")
    if kappa.is_empty():
        return pl.DataFrame()
    return (kappa.group_by(*BY_MODEL, "quantity", "level")
            .agg(pl.col("value").mean().alias("kappa_mean"), pl.col("value").min().alias("kappa_min"),
                 pl.col("value").max().alias("kappa_max"), pl.col("seed").n_unique().alias("seeds"),
                 pl.len().alias("n"))
            .with_columns(pl.lit(1.0).alias("gaussian"),
                          pl.when(pl.col("quantity") == "scores").then(pl.lit(PAPER_KAPPA))
                          .otherwise(None).alias("paper"))
            .sort(*BY_MODEL, "quantity", "level"))


def kurtosis_display(t: pl.DataFrame) -> Display:
    header = ["task", "T", "model", "variant", "quantity", "level", "seeds", "κ mean", "κ min–max",
              "Gaussian", "paper"]
    rows = [[r["task"], str(r["length"]), r["model"], r["variant"], r["quantity"], str(r["level"]),
             str(r["seeds"]),
             fmt(r["kappa_mean"]), f"{r['kappa_min']:.2f}–{r['kappa_max']:.2f}", "1",
             fmt(r["paper"], 0)]
            for r in t.iter_rows(named=True)]
    return header, rows


def kernel_table(df: pl.DataFrame) -> pl.DataFrame:
    """Per task, T, model, variant and level: the bilinear kernel's structure, with the PSD
    condition and Gram rank of that model (all levels)."""
    kern = df.filter((pl.col("section") == "kernel") & (pl.col("level") >= 0))
    if kern.is_empty():
        return pl.DataFrame()
    wide = kern.pivot(on="metric", index=[*KEY, "layer", "head", "level"], values="value")
    per_level = (wide.group_by(*BY_MODEL, "level")
                 .agg(pl.col("antisym_share").mean().alias("antisym_mean"),
                      pl.col("antisym_share").std().alias("antisym_std"),
                      pl.col("lambda_min").mean().alias("lambda_min_mean"),
                      pl.col("neg_mass_share").mean().alias("neg_mass_share"),
                      pl.col("psd").mean().alias("psd_share"), pl.len().alias("n")))
    cond = (_metric(df, "kernel", "psd_condition").group_by(BY_MODEL)
            .agg(pl.col("value").mean().alias("psd_condition_share")))
    # only the metrics used: gram rows also hold a "length" metric (the example's), not T
    gram = df.filter((pl.col("section") == "gram") & pl.col("metric").is_in(["rank", "rank_bound"]))
    if not gram.is_empty():
        g = (gram.pivot(on="metric", index=[*KEY, "layer", "head", "quantity"], values="value")
             .group_by(BY_MODEL)
             .agg(pl.col("rank").mean().alias("gram_rank"),
                  pl.col("rank_bound").mean().alias("gram_rank_bound")))
        cond = cond.join(g, on=BY_MODEL, how="left")
    return per_level.join(cond, on=BY_MODEL, how="left").sort(*BY_MODEL, "level")


def kernel_display(t: pl.DataFrame) -> Display:
    header = ["task", "T", "model", "variant", "level", "‖M_a‖/‖M‖", "λ_min(M_s)", "negative mass", "M_s PSD",
              "PSD condition (all levels)", "Gram rank / bound"]
    rows = []
    for r in t.iter_rows(named=True):
        gram = (f"{r['gram_rank']:.1f} / {r['gram_rank_bound']:.1f}"
                if r.get("gram_rank") is not None else "")
        rows.append([r["task"], str(r["length"]), r["model"], r["variant"], str(r["level"]),
                     pm(r["antisym_mean"], r["antisym_std"]), fmt(r["lambda_min_mean"], 3),
                     fmt(r["neg_mass_share"]),
                     f"{100 * r['psd_share']:.0f}%", f"{100 * r['psd_condition_share']:.0f}%", gram])
    return header, rows


def truncation_table(df: pl.DataFrame) -> pl.DataFrame:
    """Accuracy (%) per task, T, variant and levels kept, and its change from keeping all levels."""
    acc = _metric(df, "truncation", "accuracy")
    if acc.is_empty():
        return pl.DataFrame()
    full = (acc.group_by(KEY).agg(pl.col("level").max().alias("levels"))
            .join(acc, on=KEY).filter(pl.col("level") == pl.col("levels"))
            .select(*KEY, pl.col("value").alias("full")))
    examples = (_metric(df, "truncation", "examples").group_by(*KEY, "level")
                .agg(pl.col("value").max().cast(pl.Int64).alias("examples")))
    acc = acc.join(examples, on=[*KEY, "level"], how="left") if not examples.is_empty() else \
        acc.with_columns(pl.lit(None, dtype=pl.Int64).alias("examples"))
    return (acc.join(full, on=KEY)
            .with_columns(((pl.col("value") - pl.col("full")) * 100).alias("delta_pp"))
            .group_by("task", "length", "variant", "level")
            .agg((pl.col("value") * 100).mean().alias("acc_mean"), (pl.col("value") * 100).std().alias("acc_std"),
                 pl.col("delta_pp").mean().alias("delta_pp"), pl.col("seed").n_unique().alias("seeds"),
                 pl.col("examples").max().alias("examples"))
            .sort("task", "length", "variant", "level"))


def truncation_display(t: pl.DataFrame) -> Display:
    header = ["task", "T", "variant", "levels kept L′", "seeds", "test examples", "test acc (%)",
              "Δ vs all levels (pp)"]
    rows = [[r["task"], str(r["length"]), r["variant"], str(r["level"]), str(r["seeds"]),
             fmt(r["examples"]), pm(r["acc_mean"], r["acc_std"]), f"{r['delta_pp']:+.2f}"]
            for r in t.iter_rows(named=True)]
    return header, rows


def truncation_caption(t: pl.DataFrame, runs: pl.DataFrame) -> str:
    """The truncation table's caption, saying whether its sample is the main table's: the
    analysis reads a seeded sample of ``truncation_examples`` (config/analysis.yaml) of the
    split, the main table the runs' whole test evaluation."""
    caption = "Level truncation: test accuracy with only levels < L′ (λ renormalised)"
    if t.is_empty() or "examples" not in t.columns:
        return caption
    differ = []
    for task, length, n in t.select("task", "length", "examples").unique().sort("task", "length").rows():
        sel = runs.filter((pl.col("task") == task) & (pl.col("length") == length)) \
            if not runs.is_empty() else runs
        main_n = sorted({v for v in sel["test_examples"].to_list() if v is not None}) \
            if "test_examples" in sel.columns else []
        if n is not None and main_n and main_n != [n]:
            differ.append(f"{task} T={length}: {n} here, {'/'.join(map(str, main_n))} in the main table")
    if differ:
        return (f"{caption}. A different sample from the main table's (the analysis' seeded "
                f"sample of the test split: {'; '.join(differ)}), so L′ = L need not equal it.")
    return f"{caption}, on the same test examples as the main table."


#: The cost table's ``key`` of its analytic score-cost row and of its measured attention times
#: (the claims find the rows by it; the written table has no such column).
ANALYTIC, MEASURED_TIME = "analytic", "time"


def cost_table(runs: pl.DataFrame, bench_csv: str | Path | None,
               main_variant: str = "main") -> pl.DataFrame:
    """Analytic score cost vs measured attention time/memory ratios and training ms/step ratios.

    The analytic rows are at the paper's setting (:data:`hkt.paper.LEVELS`, ``STRIDE``),
    computed here and set beside the paper's figures; the training row compares the
    ``main_variant`` runs of HKT and MHA per task and T. Each row's ``key`` names it
    (``analytic``, ``bound``, ``time``, ``memory``, ``step``); the written table drops it.
    """
    levels, s = PAPER_LEVELS, PAPER_STRIDE
    rows = [{"key": ANALYTIC, "what": f"analytic score FLOPs (L={levels}, s={s})", "setting": "Σ_l s^(-2l)",
             "ratio": score_cost_ratio(levels, s), "paper": SCORE_COST["levels3"]},
            {"key": "bound", "what": f"analytic bound (any L, s={s})", "setting": "s²/(s²-1)",
             "ratio": score_cost_limit(s), "paper": SCORE_COST["bound"]}]
    if bench_csv is not None and Path(bench_csv).is_file():
        bench = pl.read_csv(bench_csv).filter(pl.col("variant") == "hkt-fused")
        for r in bench.iter_rows(named=True):
            rows.append({"key": MEASURED_TIME, "what": "attention fwd+bwd time, measured", "setting": f"T={r['T']} ({r['device']})",
                         "ratio": r["time_ratio"], "paper": None})
            rows.append({"key": "memory", "what": "attention peak memory, measured", "setting": f"T={r['T']} ({r['device']})",
                         "ratio": r["memory_ratio"], "paper": None})
    if not runs.is_empty() and "ms_per_step" in runs.columns:
        step = (runs.filter(pl.col("variant") == main_variant)
                .group_by(BY_MODEL).agg(pl.col("ms_per_step").mean()))
        for task, length in step.select("task", "length").unique().sort("task", "length").rows():
            sub = dict(step.filter((pl.col("task") == task) & (pl.col("length") == length))
                       .select("model", "ms_per_step").iter_rows())
            if sub.get("hkt") and sub.get("mha"):
                rows.append({"key": "step", "what": "training ms/step, measured",
                             "setting": f"{task} T={length} (runs' mean)",
                             "ratio": sub["hkt"] / sub["mha"], "paper": None})
    return pl.DataFrame(rows, schema={"key": pl.String, "what": pl.String, "setting": pl.String, "ratio": pl.Float64,
                                      "paper": pl.Float64})


def cost_display(t: pl.DataFrame) -> Display:
    header = ["HKT / MHA", "setting", "ratio", "paper"]
    rows = [[r["what"], r["setting"], fmt(r["ratio"], 3), fmt(r["paper"], 4)] for r in t.iter_rows(named=True)]
    return header, rows


# why an analysis table of a suite can be empty (its caption then says so)
EMPTY_NOTES = {
    "kurtosis": "Empty: no analysed run exposes its attention scores.",
    "kernel": "Empty: no analysed run exposes its query/key projections.",
    "truncation": "Empty: level truncation applies to HKT only, and no HKT run was analysed.",
}


def write_analysis_tables(analyses: pl.DataFrame, runs: pl.DataFrame, bench_csv: str | Path | None,
                          tables: Path, main_variant: str = "main"
                          ) -> tuple[list[Path], dict[str, pl.DataFrame]]:
    """Write kurtosis/kernel/truncation (when analyses exist) and cost tables under ``tables``;
    returns the paths and the tables by name (the figures and the claims read them, so that
    nothing is computed twice)."""
    written: list[Path] = []
    frames: dict[str, pl.DataFrame] = {}
    if not analyses.is_empty():
        for name, build, show, caption in (
            ("kurtosis", kurtosis_table, kurtosis_display,
             f"Normalised Mardia kurtosis κ (Gaussian = 1; the paper reports κ ≈ {PAPER_KAPPA:g})"),
            ("kernel", kernel_table, kernel_display,
             "Kernel structure per level: antisymmetric share, spectrum of M_s, PSD condition, Gram rank"),
            ("truncation", truncation_table, truncation_display, None),
        ):
            t = frames[name] = build(analyses)
            caption = caption or truncation_caption(t, runs)
            if t.is_empty():  # still written: the workflow declares every analysis table
                caption = f"{caption}. {EMPTY_NOTES[name]}"
            written += write_table(t, show(t), tables / name, caption)
    cost = frames["cost"] = cost_table(runs, bench_csv, main_variant)
    written += write_table(cost.drop("key"), cost_display(cost), tables / "cost",
                           "Cost of HKT relative to MHA: analytic score FLOPs vs measured")
    return written, frames
