"""``hkt aggregate [RECORDS…] --out DIR``: tables, figures and a summary from run records.

Sources: run records (``record.json`` files, run directories, or trees searched for them), or
``--mlflow URI`` to read the finished runs of MLflow experiments instead (every ``hkt-*`` one
unless ``--experiment`` names them), e.g. runs logged on a cluster to a tracking server. The
runs of one suite run only: a store holding several (a suite run is a suite and its results
directory) needs ``--suite NAME`` and/or ``--results-dir DIR`` (or ``--untagged``, for runs
logged before runs named their results directory); the error lists those present. Given
records, ``--suite NAME`` is the suite they are of (the workflow's aggregate step passes its
own): a record of another suite is an error, one of no suite is taken as NAME's with a
warning; ``--suite-run`` logs the run of that suite (it needs ``--suite``). Writes
``DIR/tables/{main,gap,ablation}.{md,csv,tex}``, ``DIR/tables/runs.csv``,
``DIR/figures/{val_curves,accuracy_vs_levels,main_bar}.png`` and ``DIR/summary.md``.
``--check-mlflow`` also checks that every record's MLflow run exists and holds the same final
metrics (``DIR/tables/mlflow_check.{md,csv}``) and fails when one does not. The summary's
claims read "cannot tell at this budget" below the minimum steps and seeds of
``config/report/settings.yaml``.
"""

from __future__ import annotations

import argparse
import os

from hkt.data_layout import DATA_METADATA
from hkt.paper import ABLATION_TASK

#: How the workflow hands its report command to ``hkt aggregate`` for ``summary.md``
#: (:mod:`hkt.workflow.next_steps` makes the command).
REPORT_COMMAND_ENV = "HKT_REPORT_COMMAND"


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
    parser.add_argument("--suite", metavar="NAME",
                        help="the suite of the runs: with --mlflow, its runs only; with records, "
                             "the one each must name; needed by --suite-run (none: no suite)")
    parser.add_argument("--results-dir", metavar="DIR",
                        help="with --mlflow: the runs of the suite run writing this results "
                             "directory only (as tagged: absolute; a relative DIR is made absolute "
                             "here)")
    parser.add_argument("--untagged", action="store_true",
                        help="with --mlflow: the runs without a results_dir tag only (logged before "
                             "runs named their results directory)")
    parser.add_argument("--main-variant", default="main",
                        help="variant label of the main-table runs (default: main)")
    parser.add_argument("--ablation-task", default=ABLATION_TASK,
                        help="task of the ablation table and the levels figure "
                             f"(default: {ABLATION_TASK}, the paper's)")
    parser.add_argument("--ablation-length", type=int, default=None, metavar="T",
                        help="sequence length of the ablation task (default: the most common)")
    parser.add_argument("--derived", action="append", default=[], metavar="VARIANT=MODEL",
                        help="an ablation row taken from MODEL's main runs instead of trained ones "
                             "(levels1=mha: HKT with L = 1 is MHA); repeatable")
    parser.add_argument("--borrow", action="append", default=[], metavar="RECORDS",
                        help="borrowed runs: records of another publication read beside the "
                             "suite's own for the learning-rate tables only (the sweep and "
                             "sweep_gap tables, and their claims), e.g. a publication's runs at "
                             "the default setting (the profile's rate and budget) beside a "
                             "sensitivity suite's; repeatable")
    parser.add_argument("--leaderboard", metavar="YAML", default=None,
                        help="published figures (config/report/lra_listops.yaml's format) read "
                             "against the runs' rule references: tables/leaderboard.*")
    parser.add_argument("--check-mlflow", action="store_true",
                        help="check every record against its MLflow run; fail on a difference")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="for --check-mlflow: look runs up here instead of the records' URI; "
                             "for --suite-run: the store the suite run goes to")
    parser.add_argument("--suite-run", action="store_true",
                        help="log --suite's run as one MLflow run (experiment hkt-suite-<suite>: "
                             "summary, tables and figures, HKT - MHA per task) to --tracking-uri "
                             "or $MLFLOW_TRACKING_URI, and link every run to it")
    parser.add_argument("--no-tables", action="store_true",
                        help="skip tables, figures and summary (e.g. with --check-mlflow only)")
    parser.add_argument("--analyses", nargs="+", default=[], metavar="PATH",
                        help="`hkt analyze` outputs (analysis.parquet files or trees holding them): "
                             "adds the kurtosis, kernel, truncation and approximation tables")
    parser.add_argument("--bench", metavar="CSV", default=None,
                        help="`hkt bench attention` CSV: measured ratios for the cost table")
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="where the runs' prepared data lie now, one folder per task (DIR/TASK/, "
                             "named as the record's data_dir): its train.parquet, or the "
                             f"{DATA_METADATA} that scripts/publish_results.py keeps of it; read for the "
                             "data's provenance warnings, and its examples.parquet (made there from "
                             "the splits if missing) for the per-example readings of runs with "
                             "predictions.parquet (default: each record's data_dir)")
    parser.add_argument("--report-command", metavar="CMD", default=os.environ.get(REPORT_COMMAND_ENV),
                        help="the command that builds this suite's report, printed in summary.md "
                             f"(default: ${REPORT_COMMAND_ENV}, which the workflow sets; without "
                             "it, summary.md names `snakemake --report OUT/report.html` alone)")
    parser.add_argument("--no-validate", action="store_true",
                        help="read records without checking them against the schema")


def run(args: argparse.Namespace) -> int:
    # polars, matplotlib and torch (the cost table) load only when the command runs, so that
    # `hkt aggregate --help` answers at once
    from hkt.report.build import aggregate

    return aggregate(args)
