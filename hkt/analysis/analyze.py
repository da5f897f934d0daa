"""``hkt analyze RUN_DIR --out DIR [OVERRIDES…]``: the paper's analyses of one trained run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
from omegaconf import OmegaConf

from hkt import environment
from hkt.analysis.run import analyze_run, load_trained_run
from hkt.config_compose import compose
from hkt.analysis import approximation
from hkt.device import resolve_device
from hkt.fileio import atomic_path, atomic_write_text
from hkt.figures import analysis as figures
from hkt.run_record import ANALYSIS_FILE
from hkt.runs_frame import KEY, record_row
from hkt.mlflow_store import with_retry
from hkt.train.tracking import log_dataset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a finished run (holds record.json)")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--data", type=Path, default=None,
                        help="prepared-data directory (default: the one in the run record)")
    parser.add_argument("overrides", nargs="*", help="overrides of config/analysis.yaml, e.g. examples=64")


def summarise(table: pl.DataFrame) -> str:
    """A few lines for the terminal and summary.md: κ, antisymmetric share, truncation."""
    lines = []
    kappa = (table.filter((pl.col("section") == "kurtosis") & (pl.col("metric") == "kappa"))
             .group_by("quantity", "level").agg(pl.col("value").mean()).sort("quantity", "level"))
    for quantity in ("scores", "queries", "keys"):
        sub = kappa.filter(pl.col("quantity") == quantity)
        if not sub.is_empty():
            vals = ", ".join(f"l{lv}: {v:.2f}" for lv, v in zip(sub["level"], sub["value"]))
            lines.append(f"kappa of {quantity} (mean over layers, heads): {vals}")
    anti = (table.filter((pl.col("section") == "kernel") & (pl.col("metric") == "antisym_share"))
            .group_by("level").agg(pl.col("value").mean()).sort("level"))
    lines.append("antisymmetric share ||M_a||/||M||: " +
                 ", ".join(f"l{lv}: {v:.3f}" for lv, v in zip(anti["level"], anti["value"])))
    psd = table.filter((pl.col("section") == "kernel") & (pl.col("metric") == "psd_condition"))
    lines.append(f"PSD sufficient condition holds for {int(psd['value'].sum())}/{psd.height} (layer, head)")
    gram = table.filter(pl.col("section") == "gram")
    if not gram.is_empty():
        rank = gram.filter(pl.col("metric") == "rank")["value"]
        bound = gram.filter(pl.col("metric") == "rank_bound")["value"]
        lines.append(f"symmetrised Gram rank {rank.mean():.1f} (mean) vs bound {bound.mean():.1f}")
    trunc = table.filter((pl.col("section") == "truncation") & (pl.col("metric") == "accuracy")).sort("level")
    if not trunc.is_empty():
        lines.append("truncation accuracy: " +
                     ", ".join(f"L'={lv}: {100 * v:.2f}%" for lv, v in zip(trunc["level"], trunc["value"])))
    lines += approximation.summary_lines(table)
    return "\n".join(lines)


def _log_to_mlflow(record: dict, out: Path, table: pl.DataFrame, tags: dict[str, str]) -> bool:
    run_id, uri = record.get("mlflow_run_id"), record.get("mlflow_tracking_uri")
    if not run_id or not uri:
        return False
    from hkt.mlflow_store import open_client  # mlflow takes seconds to import: only when logging

    client = open_client(uri, create=False)
    if record.get("data_checksums"):  # the data it read (runs logged before datasets lack it)
        log_dataset(client, run_id, record["task"], record["data_dir"], record["data_checksums"],
                    None, context="analysis")
    kappa = (table.filter((pl.col("section") == "kurtosis") & (pl.col("metric") == "kappa"))
             .group_by("quantity", "level").agg(pl.col("value").mean()))
    metrics = {f"analysis/kappa_{q}_level{lv}": v for q, lv, v in kappa.iter_rows()}
    trunc = table.filter((pl.col("section") == "truncation") & (pl.col("metric") == "accuracy"))
    metrics.update({f"analysis/truncation_acc_L{lv}": v for lv, v in zip(trunc["level"], trunc["value"])})
    for key, value in sorted(metrics.items()):
        with_retry(client.log_metric, run_id, key, float(value), what="MLflow log_metric")
    for key, value in tags.items():
        with_retry(client.set_tag, run_id, key, value, what="MLflow set_tag")
    with_retry(client.log_artifacts, run_id, str(out), "analysis", what="MLflow log_artifacts")
    return True


def run(args: argparse.Namespace) -> int:
    cfg = compose("analysis", args.overrides)
    device = resolve_device(str(cfg.device))
    trained = load_trained_run(args.run_dir, data_dir=args.data, device=device)
    rec = trained.record
    print(f"analysing {args.run_dir} ({rec['task']}/{rec['model']}/{rec['variant']} seed {rec['seed']}) on {device}")
    rows, extra = analyze_run(trained, cfg, device)
    row = record_row(rec)  # the run's identity as the runs tables have it, T included
    ident = {k: row[k] for k in KEY}
    table = pl.DataFrame(rows).with_columns(
        *(pl.lit(v).alias(k) for k, v in ident.items()), pl.lit(str(args.run_dir)).alias("run_dir"))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / ANALYSIS_FILE) as tmp:
        table.write_parquet(tmp, compression="zstd")
    # the budget too (profile, steps): a figure read alone says what the run trained for
    title = (f"{rec['task']} / {rec['model']} / {rec['variant']} / seed {rec['seed']}"
             + (f" ({row['budget']})" if row.get("budget") else ""))
    figures.kappa_per_level(table, out / "kappa_per_level.png", title)
    if extra["example_lambdas"] is not None:
        figures.lambda_distribution(extra["lambda_samples"], out / "lambda_distribution.png", title)
        figures.lambda_example(extra["example_lambdas"], out / "lambda_example.png",
                                      f"{title}: λ per token, layer 0, test example {cfg.figure_example}")
        figures.truncation_curve(table, out / "truncation.png", title)
        figures.approximation_residuals(table, out / "approximation.png", row.get("budget") or "")
    summary = summarise(table)
    atomic_write_text(out / "summary.md", f"# Analysis of {title}\n\n```\n{summary}\n```\n\n"
                      f"Settings:\n\n```yaml\n{OmegaConf.to_yaml(cfg)}```\n")
    atomic_write_text(out / "settings.json", json.dumps(OmegaConf.to_container(cfg), indent=2))
    env_digest = environment.save(out)  # OUT/environment.json, logged with the rest
    print(summary)
    if cfg.mlflow and _log_to_mlflow(rec, out, table, {"analysis.env_digest": env_digest}):
        print(f"logged to MLflow run {rec['mlflow_run_id']} (artifacts under analysis/)")
    print(f"wrote {out / ANALYSIS_FILE} and figures in {out}")
    return 0
