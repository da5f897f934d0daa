"""``hkt aggregate [RECORDS…] --out DIR``: tables, figures and a summary from run records.

Sources: run records (``record.json`` files, run directories, or trees searched for them), or
``--mlflow URI`` to read the finished runs of MLflow experiments instead (``hkt-<task>`` unless
``--experiment`` names them), e.g. runs logged on a cluster to a tracking server. Writes
``DIR/tables/{main,gap,ablation}.{md,csv,tex}``, ``DIR/tables/runs.csv``,
``DIR/figures/{val_curves,accuracy_vs_levels,main_bar}.png`` and ``DIR/summary.md``.
``--check-mlflow`` also checks that every record's MLflow run exists and holds the same final
metrics (``DIR/tables/mlflow_check.{md,csv}``) and fails when one does not.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

TABLES = ("main", "gap", "ablation")
FIGURES = ("val_curves", "accuracy_vs_levels", "main_bar")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0].strip("`") if __doc__ else None
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("sources", nargs="*", metavar="RECORDS",
                        help="record.json files, run directories or trees holding them")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where tables/, figures/ and summary.md go")
    parser.add_argument("--mlflow", metavar="URI",
                        help="read runs from this MLflow tracking store/server instead of records")
    parser.add_argument("--experiment", action="append", default=[], metavar="NAME",
                        help="MLflow experiment to read (repeatable; default: every hkt-* one)")
    parser.add_argument("--main-variant", default="main",
                        help="variant label of the main-table runs (default: main)")
    parser.add_argument("--ablation-task", default="listops",
                        help="task of the ablation table and the levels figure (default: listops)")
    parser.add_argument("--ablation-length", type=int, default=None, metavar="T",
                        help="sequence length of the ablation task (default: the most common)")
    parser.add_argument("--check-mlflow", action="store_true",
                        help="check every record against its MLflow run; fail on a difference")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="for --check-mlflow: look runs up here instead of the records' URI")
    parser.add_argument("--no-tables", action="store_true",
                        help="skip tables, figures and summary (e.g. with --check-mlflow only)")
    parser.add_argument("--analyses", nargs="+", default=[], metavar="PATH",
                        help="`hkt analyze` outputs (analysis.parquet files or trees holding them): "
                             "adds the kurtosis, kernel and truncation tables")
    parser.add_argument("--bench", metavar="CSV", default=None,
                        help="`hkt bench attention` CSV: measured ratios for the cost table")
    parser.add_argument("--no-validate", action="store_true",
                        help="read records without checking them against the schema")


def run(args: argparse.Namespace) -> int:
    from hkt.report import aggregate as agg
    from hkt.report import environments

    out = Path(args.out)
    if args.mlflow and args.sources:
        raise agg.AggregateError("give record paths or --mlflow URI, not both")
    if not args.mlflow and not args.sources:
        raise agg.AggregateError("nothing to aggregate: give record.json files/run directories, "
                                 "or --mlflow URI to read an MLflow experiment")
    if args.check_mlflow and args.mlflow:
        raise agg.AggregateError("--check-mlflow compares records with MLflow: give records")
    records: list[dict[str, Any]] = []
    if args.mlflow:
        runs, curves = agg.runs_from_mlflow(args.mlflow, args.experiment)
        source = f"MLflow {args.mlflow}"
    else:
        records = agg.load_records(args.sources, validate=not args.no_validate)
        runs = agg.runs_from_records(records)
        curves = agg.curves_from_records(records, runs)
        source = f"{len(records)} run records"
    if runs.is_empty() and not args.no_tables:
        raise agg.AggregateError(f"no finished runs found in {', '.join(args.sources) or args.mlflow}")
    for warning in environments.mixed_warnings(runs):
        print(f"hkt: warning: {warning} (summary.md lists what differs)", file=sys.stderr)
    written: list[Path] = []
    if not args.no_tables:
        written += write_all(runs, curves, out, main_variant=args.main_variant,
                             ablation_task=args.ablation_task,
                             ablation_length=args.ablation_length, source=source)
        from hkt.report import analysis_tables

        analyses = analysis_tables.load_analyses(args.analyses)
        if args.analyses and analyses.is_empty():
            raise agg.AggregateError(f"no analysis.parquet found in {', '.join(args.analyses)}")
        written += analysis_tables.write_analysis_tables(analyses, runs, args.bench, out / "tables",
                                                         main_variant=args.main_variant)
        if not analyses.is_empty():
            written.append(analysis_tables.kappa_figure(analyses, out / "figures" / "kappa_by_level.png"))
            written.append(analysis_tables.truncation_figure(analyses, out / "figures" / "truncation.png"))
    failed = 0
    if args.check_mlflow:
        check = agg.check_mlflow(records, args.tracking_uri)
        bad = check.filter(~check["status"].is_in(["ok", "no mlflow"]))
        failed = len(bad)
        n_ok = int((check["status"] == "ok").sum())
        caption = (f"MLflow audit: {n_ok} of {len(check)} records match their MLflow run "
                   f"(val/test accuracy, parameters); {failed} problem(s).")
        written += agg.write_table(check, agg.check_display(check), out / "tables" / "mlflow_check",
                                   caption)
        print(caption)
    for p in written:
        print(p)
    if failed:
        shown = "; ".join(f"{r['task']}/{r['model']}/{r['variant']}/seed {r['seed']}: "
                          f"{r['status']} {r['detail']}" for r in bad.head(5).iter_rows(named=True))
        raise agg.AggregateError(f"{failed} record(s) disagree with MLflow: {shown}")
    return 0


def write_all(runs, curves, out: Path, *, main_variant: str = "main",
              ablation_task: str = "listops", ablation_length: int | None = None,
              source: str = "") -> list[Path]:
    """Every table, figure and the summary under ``out``; returns the paths written."""
    from hkt.report import aggregate as agg
    from hkt.report import figures

    tables, figs = out / "tables", out / "figures"
    main = agg.main_table(runs, (main_variant,))
    gap = agg.gap_table(main)
    abl = agg.ablation_table(runs, ablation_task, ablation_length, reference=main_variant,
                             main_variant=main_variant)
    abl_len = abl["length"][0] if len(abl) else ablation_length
    written = []
    written += agg.write_table(main, agg.main_display(main), tables / "main",
                               "Main table: accuracy (%) as mean ± std over seeds; the paper's "
                               "figure beside ours; Δ = ours − paper (test).")
    written += agg.write_table(gap, agg.gap_display(gap), tables / "gap",
                               "HKT − MHA test accuracy (percentage points): ours and the paper's.")
    written += agg.write_table(abl, agg.ablation_display(abl), tables / "ablation",
                               f"Ablations on {ablation_task} (T={abl_len}): Δ = test accuracy − "
                               "the full HKT's; paper Δ: removing the hierarchy (L=1).")
    runs_csv = tables / "runs.csv"
    runs.sort(agg.KEY).write_csv(runs_csv)
    written.append(runs_csv)
    written.append(figures.val_curves(curves, figs / "val_curves.png", (main_variant,)))
    written.append(figures.accuracy_vs_levels(runs, figs / "accuracy_vs_levels.png",
                                              ablation_task, abl_len, main_variant))
    written.append(figures.main_bar(runs, figs / "main_bar.png", (main_variant,)))
    written.append(write_summary(out / "summary.md", runs, main, gap, abl, source=source,
                                 ablation_task=ablation_task, ablation_length=abl_len))
    return written


def write_summary(path: Path, runs, main, gap, abl, *, source: str, ablation_task: str,
                  ablation_length: int | None) -> Path:
    """A few lines on the suite, the main and ablation tables, and links to every output."""
    from hkt.report import aggregate as agg
    from hkt.report import environments

    profiles = ", ".join(sorted({p for p in runs["profile"].to_list() if p}))
    tasks = ", ".join(f"{t} (T={n})" for t, n in runs.select("task", "length").unique()
                      .sort("task", "length").rows())
    models = ", ".join(sorted(set(runs["model"].to_list())))
    seeds = ", ".join(str(s) for s in sorted(set(runs["seed"].to_list())))
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = [
        "# Results summary", "",
        f"{len(runs)} runs from {source}; profile: {profiles or '?'}; tasks: {tasks}; "
        f"models: {models}; seeds: {seeds}. Written by `hkt aggregate` at {now}.", "",
        "Accuracies are percentages, mean ± std over seeds (sample std; none with one seed). "
        "Only the `paper` profile is meant to be compared with the paper's figures.", "",
        "## Main table", "", agg.markdown(*agg.main_display(main)),
        "## HKT − MHA", "", agg.markdown(*agg.gap_display(gap)),
        f"## Ablations on {ablation_task} (T={ablation_length})", "",
        agg.markdown(*agg.ablation_display(abl)),
        *environments.summary_section(runs),
        "## Files", "",
        "- Tables (Markdown, CSV, LaTeX): " + ", ".join(
            f"[{t}](tables/{t}.md) ([csv](tables/{t}.csv), [tex](tables/{t}.tex))" for t in TABLES)
        + ", every run: [runs.csv](tables/runs.csv)",
        "- Figures: " + ", ".join(f"[{f}](figures/{f}.png)" for f in FIGURES),
    ]
    if (path.parent / "tables" / "mlflow_check.md").exists():
        lines.append("- MLflow audit: [mlflow_check](tables/mlflow_check.md)")
    lines.append("- Report (after `snakemake --report results/report.html`): [report.html](report.html)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
