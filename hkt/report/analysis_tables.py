"""Tables across runs from ``hkt analyze`` outputs, and the cost table (issue: the paper's analyses).

- kurtosis: κ per task, model, quantity and level (mean over layers, heads and seeds) beside the
  Gaussian value 1 and the paper's ≈ 33;
- kernel: antisymmetric share, spectrum of M_s, PSD-condition status and Gram rank per level;
- truncation: accuracy with levels < L′ kept, per task and variant (mean ± std over seeds);
- cost: the analytic score-FLOP ratio beside the measured time and memory ratios of
  ``hkt bench attention`` and the training runs' ms/step of HKT vs MHA.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from hkt.attention import score_cost_ratio
from hkt.report.aggregate import _fmt, _pm, write_table
from hkt.report.paper import KURTOSIS as PAPER_KAPPA
from hkt.report.paper import SCORE_COST

ANALYSIS_FILE = "analysis.parquet"


def find_analyses(paths: Iterable[str | Path]) -> list[Path]:
    """analysis.parquet files given directly or found under directories."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            found.extend(sorted(p.rglob(ANALYSIS_FILE)))
    return found


def load_analyses(paths: Iterable[str | Path]) -> pl.DataFrame:
    files = find_analyses(paths)
    if not files:
        return pl.DataFrame()
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")


def _metric(df: pl.DataFrame, section: str, metric: str) -> pl.DataFrame:
    return df.filter((pl.col("section") == section) & (pl.col("metric") == metric))


def kurtosis_table(df: pl.DataFrame) -> pl.DataFrame:
    kappa = _metric(df, "kurtosis", "kappa")
    if kappa.is_empty():
        return pl.DataFrame()
    return (kappa.group_by("task", "model", "quantity", "level")
            .agg(pl.col("value").mean().alias("kappa_mean"), pl.col("value").min().alias("kappa_min"),
                 pl.col("value").max().alias("kappa_max"), pl.col("seed").n_unique().alias("seeds"),
                 pl.len().alias("n"))
            .with_columns(pl.lit(1.0).alias("gaussian"),
                          pl.when(pl.col("quantity") == "scores").then(pl.lit(PAPER_KAPPA))
                          .otherwise(None).alias("paper"))
            .sort("task", "model", "quantity", "level"))


def kurtosis_display(t: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "model", "quantity", "level", "seeds", "κ mean", "κ min–max", "Gaussian", "paper"]
    rows = [[r["task"], r["model"], r["quantity"], str(r["level"]), str(r["seeds"]), _fmt(r["kappa_mean"]),
             f"{r['kappa_min']:.2f}–{r['kappa_max']:.2f}", "1", _fmt(r["paper"], 0)]
            for r in t.iter_rows(named=True)]
    return header, rows


def kernel_table(df: pl.DataFrame) -> pl.DataFrame:
    kern = df.filter((pl.col("section") == "kernel") & (pl.col("level") >= 0))
    if kern.is_empty():
        return pl.DataFrame()
    wide = kern.pivot(on="metric", index=["task", "model", "seed", "layer", "head", "level"], values="value")
    per_level = (wide.group_by("task", "model", "level")
                 .agg(pl.col("antisym_share").mean().alias("antisym_mean"),
                      pl.col("antisym_share").std().alias("antisym_std"),
                      pl.col("lambda_min").mean().alias("lambda_min_mean"),
                      pl.col("neg_mass_share").mean().alias("neg_mass_share"),
                      pl.col("psd").mean().alias("psd_share"), pl.len().alias("n")))
    cond = (_metric(df, "kernel", "psd_condition").group_by("task", "model")
            .agg(pl.col("value").mean().alias("psd_condition_share")))
    gram = df.filter(pl.col("section") == "gram")
    if not gram.is_empty():
        g = (gram.pivot(on="metric", index=["task", "model", "seed", "layer", "head", "quantity"], values="value")
             .group_by("task", "model").agg(pl.col("rank").mean().alias("gram_rank"),
                                            pl.col("rank_bound").mean().alias("gram_rank_bound")))
        cond = cond.join(g, on=["task", "model"], how="left")
    return per_level.join(cond, on=["task", "model"], how="left").sort("task", "model", "level")


def kernel_display(t: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "model", "level", "‖M_a‖/‖M‖", "λ_min(M_s)", "negative mass", "M_s PSD",
              "PSD condition (all levels)", "Gram rank / bound"]
    rows = []
    for r in t.iter_rows(named=True):
        gram = (f"{r['gram_rank']:.1f} / {r['gram_rank_bound']:.1f}"
                if r.get("gram_rank") is not None else "")
        rows.append([r["task"], r["model"], str(r["level"]), _pm(r["antisym_mean"], r["antisym_std"]),
                     _fmt(r["lambda_min_mean"], 3), _fmt(r["neg_mass_share"]),
                     f"{100 * r['psd_share']:.0f}%", f"{100 * r['psd_condition_share']:.0f}%", gram])
    return header, rows


def truncation_table(df: pl.DataFrame) -> pl.DataFrame:
    acc = _metric(df, "truncation", "accuracy")
    if acc.is_empty():
        return pl.DataFrame()
    full = (acc.group_by("task", "variant", "seed").agg(pl.col("level").max().alias("levels"))
            .join(acc, on=["task", "variant", "seed"]).filter(pl.col("level") == pl.col("levels"))
            .select("task", "variant", "seed", pl.col("value").alias("full")))
    return (acc.join(full, on=["task", "variant", "seed"])
            .with_columns(((pl.col("value") - pl.col("full")) * 100).alias("delta_pp"))
            .group_by("task", "variant", "level")
            .agg((pl.col("value") * 100).mean().alias("acc_mean"), (pl.col("value") * 100).std().alias("acc_std"),
                 pl.col("delta_pp").mean().alias("delta_pp"), pl.col("seed").n_unique().alias("seeds"))
            .sort("task", "variant", "level"))


def truncation_display(t: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "variant", "levels kept L′", "seeds", "test acc (%)", "Δ vs all levels (pp)"]
    rows = [[r["task"], r["variant"], str(r["level"]), str(r["seeds"]), _pm(r["acc_mean"], r["acc_std"]),
             f"{r['delta_pp']:+.2f}"] for r in t.iter_rows(named=True)]
    return header, rows


def cost_table(runs: pl.DataFrame, bench_csv: str | Path | None) -> pl.DataFrame:
    """Analytic score cost vs measured attention time/memory ratios and training ms/step ratios."""
    rows = [{"what": "analytic score FLOPs (L=3, s=2)", "setting": "Σ_l s^(-2l)",
             "ratio": score_cost_ratio(3, 2), "paper": SCORE_COST["levels3"]},
            {"what": "analytic bound (any L, s=2)", "setting": "s²/(s²-1)", "ratio": SCORE_COST["bound"],
             "paper": SCORE_COST["bound"]}]
    if bench_csv is not None and Path(bench_csv).is_file():
        bench = pl.read_csv(bench_csv).filter(pl.col("variant") == "hkt-fused")
        for r in bench.iter_rows(named=True):
            rows.append({"what": "attention fwd+bwd time, measured", "setting": f"T={r['T']} ({r['device']})",
                         "ratio": r["time_ratio"], "paper": None})
            rows.append({"what": "attention peak memory, measured", "setting": f"T={r['T']} ({r['device']})",
                         "ratio": r["memory_ratio"], "paper": None})
    if not runs.is_empty() and "ms_per_step" in runs.columns:
        step = (runs.filter(pl.col("variant") == "main").group_by("task", "model")
                .agg(pl.col("ms_per_step").mean()))
        for task in sorted(step["task"].unique().to_list()):
            sub = dict(step.filter(pl.col("task") == task).select("model", "ms_per_step").iter_rows())
            if sub.get("hkt") and sub.get("mha"):
                rows.append({"what": "training ms/step, measured", "setting": f"{task} (runs' mean)",
                             "ratio": sub["hkt"] / sub["mha"], "paper": None})
    return pl.DataFrame(rows, schema={"what": pl.String, "setting": pl.String, "ratio": pl.Float64,
                                      "paper": pl.Float64})


def cost_display(t: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["HKT / MHA", "setting", "ratio", "paper"]
    rows = [[r["what"], r["setting"], _fmt(r["ratio"], 3), _fmt(r["paper"], 4)] for r in t.iter_rows(named=True)]
    return header, rows


def write_analysis_tables(analyses: pl.DataFrame, runs: pl.DataFrame, bench_csv: str | Path | None,
                          tables: Path) -> list[Path]:
    """Write kurtosis/kernel/truncation (when analyses exist) and cost tables under ``tables``."""
    written: list[Path] = []
    if not analyses.is_empty():
        for name, build, show, caption in (
            ("kurtosis", kurtosis_table, kurtosis_display,
             f"Normalised Mardia kurtosis κ (Gaussian = 1; the paper reports κ ≈ {PAPER_KAPPA:g})"),
            ("kernel", kernel_table, kernel_display,
             "Kernel structure per level: antisymmetric share, spectrum of M_s, PSD condition, Gram rank"),
            ("truncation", truncation_table, truncation_display,
             "Level truncation: test accuracy with only levels < L′ (λ renormalised)"),
        ):
            t = build(analyses)
            if not t.is_empty():
                written += write_table(t, show(t), tables / name, caption)
    cost = cost_table(runs, bench_csv)
    written += write_table(cost, cost_display(cost), tables / "cost",
                           "Cost of HKT relative to MHA: analytic score FLOPs vs measured")
    return written


def kappa_figure(analyses: pl.DataFrame, path: Path) -> Path:
    """κ of the score entries per level, one panel per task, HKT and MHA beside 1 and the paper."""
    from hkt.report.figures import _plt, _save

    plt = _plt()
    t = kurtosis_table(analyses).filter(pl.col("quantity") == "scores")
    tasks = sorted(t["task"].unique().to_list())
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4 * max(1, len(tasks)), 3.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for offset, model in zip((-0.1, 0.1, 0.0), sorted(t.filter(pl.col("task") == task)["model"].unique())):
            sub = t.filter((pl.col("task") == task) & (pl.col("model") == model)).sort("level")
            mean = sub["kappa_mean"].to_numpy()
            err = [mean - sub["kappa_min"].to_numpy(), sub["kappa_max"].to_numpy() - mean]
            ax.errorbar(sub["level"].to_numpy() + offset, mean, yerr=err, fmt="o", capsize=3, label=model)
        ax.axhline(1.0, color="gray", ls="--", lw=1, label="Gaussian")
        ax.axhline(PAPER_KAPPA, color="tab:red", ls=":", lw=1, label=f"paper ≈ {PAPER_KAPPA:g}")
        ax.set_yscale("log")
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("level l")
        ax.set_ylabel("κ of scores (d = 1)")
        ax.legend(fontsize=7)
    return _save(fig, path)


def truncation_figure(analyses: pl.DataFrame, path: Path) -> Path:
    """Accuracy vs levels kept L′ per task (HKT variants), mean over seeds with the seed range."""
    from hkt.report.figures import _plt, _save

    plt = _plt()
    acc = _metric(analyses, "truncation", "accuracy")
    tasks = sorted(acc["task"].unique().to_list())
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4 * max(1, len(tasks)), 3.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        sub = acc.filter(pl.col("task") == task)
        for variant in sorted(sub["variant"].unique().to_list()):
            curve = (sub.filter(pl.col("variant") == variant).group_by("level")
                     .agg((pl.col("value") * 100).mean().alias("mean"), (pl.col("value") * 100).min().alias("lo"),
                          (pl.col("value") * 100).max().alias("hi")).sort("level"))
            mean = curve["mean"].to_numpy()
            ax.errorbar(curve["level"].to_numpy(), mean, capsize=3, marker="o", label=variant,
                        yerr=[mean - curve["lo"].to_numpy(), curve["hi"].to_numpy() - mean])
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("levels kept L′")
        ax.set_ylabel("test accuracy (%)")
        ax.legend(fontsize=7)
    return _save(fig, path)
