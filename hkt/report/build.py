"""The aggregate command and its products: what ``hkt aggregate`` builds
(:mod:`hkt.report.aggregate` parses its arguments). :func:`aggregate` reads the runs, has every
product written into a staging folder and moved into place, logs the suite run and runs the
MLflow audit. The products, in the order :func:`write_all` writes them: the result tables and
figures (:mod:`hkt.report.result_tables`), the learning-rate tables
(:func:`hkt.report.sweep.write_sweep`), the per-example tables and figure
(:func:`_write_per_example`); then the analysis and cost tables (:func:`_write_analyses`), the
leaderboard (:func:`hkt.report.leaderboard.write_leaderboard`), the claims
(:mod:`hkt.report.claims`) and the summary (:mod:`hkt.report.summary`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from hkt.figures import per_example as per_example_figures
from hkt.figures import suite as figures
from hkt.figures.common import budget_title
from hkt.paper import ABLATION_TASK
from hkt.predictions import RECORD_FIELD
from hkt.provenance import NO_SUITE, RESULTS_DIR_TAG, SuiteRun, suite_name
from hkt.publication import RETABLE, sealed_publication
from hkt.report import analysis_tables, buckets, environments, result_tables
from hkt.report.aggregate_outputs import SUMMARY, aggregate_files
from hkt.report.approximation_table import write_approximation
from hkt.report.audit import check_display, check_mlflow
from hkt.report.claims import Budget, claims_section, load_minimum
from hkt.report.example_display import agreement_display, paired_display
from hkt.report.example_runs import Readings, compared_variants, data_dirs, load_readings, undrawn
from hkt.report.leaderboard import write_leaderboard
from hkt.report.mlflow_runs import runs_from_mlflow
from hkt.report.paired import NAMES_PREDICTIONS
from hkt.report.rule_agreement import agreement_table
from hkt.report.report_settings import load_settings
from hkt.report.rule_readings import rule_readings_frame
from hkt.report.suite_choice import SuiteChoice
from hkt.report.suite_run import log_suite_run
from hkt.report.summary import data_warnings, record_data_warning, write_summary
from hkt.report.sweep import write_sweep
from hkt.report.tables import main_display
from hkt.report.writers import write_table
from hkt.rule_references import lines_note
from hkt.runs_frame import (KEY, AggregateError, curves_from_records, load_records,
                            runs_from_records, unreadable_histories)
from hkt.staging import STAGE, move_into, staged_files  # noqa: F401 (STAGE: where it stages)


def aggregate(args: argparse.Namespace) -> int:
    """`hkt aggregate`: read the runs, write every output, log the suite run, run the audit
    (see the CLI). The tables, figures and summary are written to a staging folder inside
    ``--out`` and moved into place only once all of them are (:mod:`hkt.staging`, holding
    ``--out``'s lock: a second aggregate there is refused): a failure leaves ``--out`` as it
    was, never a partial set."""
    out = Path(args.out)
    choice = _check_args(args)
    runs, curves, records, source, unreadable = _read_runs(args, choice)
    for warning in environments.mixed_warnings(runs):
        print(f"hkt: warning: {warning} (summary.md lists what differs)", file=sys.stderr)
    written: list[Path] = []
    warnings = data_warnings(runs)  # data prepared from an alternative archive
    for (task, length), warning in warnings.items():
        print(f"hkt: warning: {warning}", file=sys.stderr)
    if not args.no_tables:
        borrowed = _borrowed_runs(args)
        settings = load_settings()
        readings = None if args.mlflow else load_readings(
            runs, data_dirs(records, Path(args.data) if args.data else None), settings)
        # the learning-rate gap names the runs without predictions (none of MLflow's are read)
        sweep_readings = readings if readings is not None or args.mlflow else \
            Readings({}, {}, settings)
        with staged_files(out) as stage:
            made, (main, gap, abl, abl_len, read) = write_all(
                runs, curves, stage, main_variant=args.main_variant,
                ablation_task=args.ablation_task, ablation_length=args.ablation_length,
                data_warnings=warnings, derived=derived_spec(args.derived),
                borrowed=borrowed, unreadable=unreadable, readings=readings,
                sweep_readings=sweep_readings)
            written += made
            made, sections, frames = _write_analyses(args, runs, stage)
            written += made
            if args.leaderboard:
                made, section = write_leaderboard(args.leaderboard, runs, stage / "tables")
                written += made
                sections = [*sections, *section]
            budget = Budget(runs, load_minimum(), args.main_variant)
            sections = [*claims_section(main=main, gap=gap, abl=abl, tables={**frames, **read},
                                        budget=budget, borrowed=borrowed), *sections]
            # last: it links every table and figure written above
            written.append(write_summary(stage / SUMMARY, runs, main, gap, abl, source=source,
                                         ablation_task=args.ablation_task,
                                         ablation_length=abl_len, sections=sections,
                                         data_warnings=warnings, controls=read["controls"],
                                         out=out, report_command=args.report_command))
            _check_declared(stage, written, analyses=bool(args.analyses),
                            leaderboard=bool(args.leaderboard), predictions=readings is not None)
            written = move_into(stage, out, written)
        if args.suite_run:
            _log_suite_run(args, out, runs, gap, main)
    for p in written:
        print(p)
    if args.check_mlflow:
        _audit(records, args, out)
    return 0


def _check_args(args: argparse.Namespace) -> SuiteChoice:
    if args.mlflow and args.sources:
        raise AggregateError("give record paths or --mlflow URI, not both")
    if not args.mlflow and not args.sources:
        raise AggregateError("nothing to aggregate: give record.json files/run directories, "
                             "or --mlflow URI to read an MLflow experiment")
    if args.check_mlflow and args.mlflow:
        raise AggregateError("--check-mlflow compares records with MLflow: give records")
    sealed = sealed_publication(args.out)
    if sealed is not None:
        raise AggregateError(f"--out {args.out} is inside the sealed publication {sealed} (it has "
                             f"its SHA256SUMS): its tables are rebuilt from its own records with "
                             f"`{RETABLE} {sealed}`; aggregate into another --out")
    choice = SuiteChoice(args.suite, args.results_dir, args.untagged)
    if (args.results_dir or args.untagged) and not args.mlflow:
        raise AggregateError(f"{choice.describe()} chooses among the runs of an MLflow store: "
                             "give --mlflow URI, or pass the records of one suite run")
    if args.suite_run and args.suite is None:
        raise AggregateError("--suite-run logs the run of one suite: name it with --suite NAME "
                             f"({NO_SUITE} for runs of no suite)")
    return choice


def check_record_suites(records: list[dict[str, Any]], suite: str) -> None:
    """Every record is of ``suite`` (the aggregate's ``--suite``), or an :class:`AggregateError`
    listing those of another. Records of no suite (run by hand, or written before records named
    their suite) are taken as ``suite``'s, with a warning: the documented fallback."""
    want = suite_name(suite)
    named = [(r, SuiteRun.from_record(r).suite) for r in records]
    other = [(r, s) for r, s in named if s not in (want, NO_SUITE)]
    if other:
        listed = "; ".join(f"{r.get('_path') or r.get('task')} (suite {s})" for r, s in other[:5])
        more = f" and {len(other) - 5} more" if len(other) > 5 else ""
        raise AggregateError(f"{len(other)} of {len(records)} records are of another suite than "
                             f"--suite {want}: {listed}{more}; pass the records of suite {want} "
                             "only, or the --suite they name")
    unnamed = sum(s == NO_SUITE for _, s in named)
    if unnamed and want != NO_SUITE:
        print(f"hkt: warning: {unnamed} of {len(records)} records name no suite (run by hand, or "
              f"written before records named their suite): taken as suite {want}'s (--suite)",
              file=sys.stderr)


def _read_runs(args: argparse.Namespace, choice: SuiteChoice
               ) -> tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]], str,
                          pl.DataFrame | None]:
    """The runs frame, the validation curves, the records (none from MLflow), where from, and
    the runs whose history.csv is unreadable (None from MLflow)."""
    records: list[dict[str, Any]] = []
    unreadable = None
    if args.mlflow:
        runs, curves = runs_from_mlflow(args.mlflow, args.experiment, choice=choice)
        source = f"MLflow {args.mlflow}"
        if not runs.is_empty() and runs[RESULTS_DIR_TAG].is_null().all():
            print(f"hkt: warning: the {len(runs)} MLflow runs read have no results_dir tag "
                  "(logged before runs named their results directory): runs of another results "
                  "directory logged so too would be mixed in", file=sys.stderr)
    else:
        records = load_records(args.sources, validate=not args.no_validate)
        if args.suite is not None:
            check_record_suites(records, args.suite)
        # the data's provenance warning, which an MLflow run carries as a tag
        data_root = Path(args.data) if args.data else None
        runs = runs_from_records([{**r, "data_warning": record_data_warning(r, data_root)}
                                  for r in records])
        curves = curves_from_records(records, runs)
        unreadable = unreadable_histories(records, runs)
        for r in unreadable.iter_rows(named=True) if not args.no_tables else ():
            print(f"hkt: warning: {r['history']} is not readable as its run's history "
                  f"({r['why']}): {r['task']} T={r['length']} {r['model']}/{r['variant']} seed "
                  f"{r['seed']} has no curve in the convergence table and figures/val_curves.png "
                  "(the table says so)", file=sys.stderr)
        source = f"{len(records)} run records"
    if runs.is_empty() and not args.no_tables:
        raise AggregateError(f"no finished runs found in {', '.join(args.sources) or args.mlflow}")
    return runs, curves, records, source, unreadable


def _borrowed_runs(args: argparse.Namespace) -> pl.DataFrame | None:
    """The borrowed runs (``--borrow``: records of another publication, read beside the suite's
    own in the learning-rate tables and their claims), each with the path it was named by as its
    source."""
    frames = []
    for src in args.borrow:
        records = load_records([src], validate=not args.no_validate)
        named = {r.get("_path"): bool(r.get(RECORD_FIELD)) for r in records}
        frames.append(runs_from_records(records).with_columns(
            pl.col("source").replace_strict(named, default=False, return_dtype=pl.Boolean)
            .alias(NAMES_PREDICTIONS), pl.lit(src).alias("source")))
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _write_analyses(args: argparse.Namespace, runs: pl.DataFrame, out: Path
                    ) -> tuple[list[Path], list[str], dict[str, pl.DataFrame]]:
    """The analysis and cost tables and figures, the summary's approximation section, and the
    tables by name (for the claims)."""
    analyses = analysis_tables.load_analyses(args.analyses)
    if args.analyses and analyses.is_empty():
        raise AggregateError(f"no analysis.parquet found in {', '.join(args.analyses)}")
    written, frames = analysis_tables.write_analysis_tables(
        analyses, runs, args.bench, out / "tables", main_variant=args.main_variant)
    sections: list[str] = []
    if not analyses.is_empty():
        keys = [k for k in KEY if k in analyses.columns]
        budget = budget_title(runs.join(analyses.select(keys).unique(), on=keys))
        written.append(figures.kappa_by_level(frames["kurtosis"],
                                              out / "figures" / "kappa_by_level.png", budget))
        written.append(figures.truncation_by_task(analyses, out / "figures" / "truncation.png",
                                                  budget, runs))
        files, sections, frames["approximation"] = write_approximation(analyses, out, budget)
        written += files
    return written, sections, frames


def _log_suite_run(args: argparse.Namespace, out: Path, runs: pl.DataFrame, gap: pl.DataFrame,
                   main: pl.DataFrame) -> None:
    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise AggregateError("--suite-run needs --tracking-uri URI or $MLFLOW_TRACKING_URI")
    # the suite is --suite's; its results directory its runs' one (else where the tables go)
    dirs = {d for d in runs[RESULTS_DIR_TAG].to_list() if d}
    suite_run = SuiteRun.of(args.suite, dirs.pop() if len(dirs) == 1 else out)
    run_id, experiment = log_suite_run(uri, out, runs, gap, main_display(main), suite_run)
    print(f"MLflow: suite run {run_id} in experiment '{experiment}' at {uri}")


def _audit(records: list[dict[str, Any]], args: argparse.Namespace, out: Path) -> None:
    """The MLflow audit table; an error naming the records that disagree with their run."""
    check = check_mlflow(records, args.tracking_uri)
    bad = check.filter(~check["status"].is_in(["ok", "no mlflow"]))
    n_ok = int((check["status"] == "ok").sum())
    caption = (f"MLflow audit: {n_ok} of {len(check)} records match their MLflow run "
               f"(val/test accuracy, parameters); {len(bad)} problem(s).")
    written = write_table(check, check_display(check), out / "tables" / "mlflow_check", caption)
    print(caption)
    for p in written:
        print(p)
    if len(bad):
        shown = "; ".join(f"{r['task']}/{r['model']}/{r['variant']}/seed {r['seed']}: "
                          f"{r['status']} {r['detail']}" for r in bad.head(5).iter_rows(named=True))
        raise AggregateError(f"{len(bad)} record(s) disagree with MLflow: {shown}")


def _check_declared(out: Path, written: list[Path], *, analyses: bool,
                    leaderboard: bool = False, predictions: bool = False) -> None:
    """Every file the workflow declares for this aggregate (hkt.report.aggregate_outputs) was written."""
    declared = aggregate_files(out, analyses=analyses, leaderboard=leaderboard,
                               predictions=predictions)
    missing = sorted(set(declared) - {Path(p) for p in written})
    if missing:
        raise AggregateError("hkt aggregate did not write what the workflow declares for it: "
                             f"{', '.join(map(str, missing))} (a bug: please report it)")


def derived_spec(pairs: list[str] | None) -> dict[str, tuple[str, int | None]]:
    """``--derived NAME=MODEL`` words as ``{NAME: (MODEL, levels)}``, the levels read from the
    variant file (``model.mixer.levels`` of config/variant/NAME.yaml)."""
    from omegaconf import OmegaConf

    from hkt.config_compose import config_dir

    spec: dict[str, tuple[str, int | None]] = {}
    for pair in pairs or []:
        name, sep, model = pair.partition("=")
        path = config_dir() / "variant" / f"{name}.yaml"
        if not sep or not model or not path.is_file():
            raise AggregateError(f"--derived {pair}: expected VARIANT=MODEL with a variant "
                                 f"file config/variant/VARIANT.yaml (e.g. levels1=mha)")
        levels = OmegaConf.select(OmegaConf.load(path), "model.mixer.levels")
        spec[name] = (model, None if levels is None else int(levels))
    return spec


def write_all(runs: pl.DataFrame, curves: pl.DataFrame, out: Path, *, main_variant: str = "main",
              ablation_task: str = ABLATION_TASK, ablation_length: int | None = None,
              data_warnings: dict[tuple[str, int | None], str] | None = None,
              derived: dict[str, tuple[str, int | None]] | None = None,
              borrowed: pl.DataFrame | None = None, unreadable: pl.DataFrame | None = None,
              readings: Readings | None = None,
              sweep_readings: Readings | None = None
              ) -> tuple[list[Path], tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int | None,
                                           dict[str, pl.DataFrame]]]:
    """The result tables and figures under ``out``; returns the paths written and the main,
    gap and ablation tables, the ablation's T and the controls and learning-rate tables by name
    (``controls``, ``sweep``, ``sweep_gap``), for the summary. ``data_warnings``
    (per (task, T), :func:`hkt.report.summary.data_warnings`) go into the tables' captions;
    ``derived`` (:func:`derived_spec`) adds ablation rows taken from a model's main runs;
    ``borrowed`` (runs with a ``source``) joins ``runs`` in the learning-rate tables only;
    ``unreadable`` (:func:`hkt.runs_frame.unreadable_histories`) marks the convergence table;
    ``readings`` (the runs' predictions, :mod:`hkt.report.example_runs`) pair the gap's and the
    controls' test-set intervals and add the per-example tables, when there are any;
    ``sweep_readings`` (``readings``, or none found: the runs read for predictions) pair the
    learning-rate gap's rows."""
    tables = out / "tables"
    compared = result_tables.Compared(runs, main_variant, readings)
    abl = result_tables.Ablation(runs, ablation_task, ablation_length, derived, main_variant,
                                 readings)
    notes = result_tables.caveats(data_warnings or {})
    refs = lines_note(runs)  # the ListOps rule references, which every table reads against
    written = result_tables.write_comparisons(compared, runs, tables, notes, refs, main_variant)
    written += result_tables.write_ablation(abl, tables, notes, refs)
    written += result_tables.write_run_tables(runs, curves, unreadable, tables, refs, main_variant)
    made, sweeps = write_sweep(runs, borrowed, tables, notes, refs,
                               readings if sweep_readings is None else sweep_readings)
    written += made
    written += result_tables.write_runs_and_figures(runs, curves, abl, out, main_variant)
    read: dict[str, pl.DataFrame] = {"controls": compared.controls, **sweeps}
    if readings is not None:
        made, frames = _write_per_example(readings, runs, compared.paired, out, main_variant,
                                          refs)
        written += made
        read.update(frames)
    return written, (compared.main, compared.gap, abl.table, abl.length, read)


def _write_per_example(readings: Readings, runs: pl.DataFrame,
                       paired: pl.DataFrame, out: Path, variant: str, refs: str
                       ) -> tuple[list[Path], dict[str, pl.DataFrame]]:
    """The per-example tables and figure (:mod:`hkt.report.example_runs`, :mod:`hkt.report.paired`, :mod:`hkt.report.rule_agreement`); the frames the
    claims read (``mechanism``, ``rule_readings``)."""
    tables, settings = out / "tables", readings.settings
    missing = " " + readings.notes() if readings.notes() else ""
    written = write_table(paired, paired_display(paired, settings),
                          tables / "paired",
                          "HKT − MHA in each variant both models trained, and each control "
                          "against HKT and MHA, where every run of both sides has its "
                          "predictions on the same test examples. Unit of replication: the "
                          f"seed. 'seeds + test set, paired' ({settings.level}; the primary "
                          "reading): Welch's seed terms plus the test set's paired sampling "
                          "variance of the difference (the variance over examples of the "
                          "per-example difference of the seed-averaged correctness, over n), on "
                          "t with the seed terms' degrees of freedom: never narrower than Welch "
                          "over seeds (shown beside it, with the binomial reading). 'given these "
                          "runs': the trained networks held fixed and only the examples drawn "
                          "again (normal, the paired variance alone): whether these networks "
                          "differ on the population of examples, not whether the models do; no "
                          "verdict rests on it (hkt/report/stats.py, docs/per-example.md)."
                          + missing)
    variants = compared_variants(runs, variant)

    def each(table: Callable[..., pl.DataFrame]) -> pl.DataFrame:
        """A per-example table over every variant read (:func:`compared_variants`)."""
        return pl.concat([table(readings, runs, v) for v in variants])

    agreement = each(agreement_table)
    written += write_table(agreement, agreement_display(agreement),
                           tables / "rule_agreement",
                           "Agreement with the rule references: per ListOps model, the share (%) "
                           "of test examples on which its prediction equals each rule's answer "
                           "(mean ± std over seeds), and its accuracy on the examples the "
                           "root-operator prior gets wrong (what it learned beyond the first "
                           "token)." + (f" {refs}" if refs else "") + missing)
    breakdown = each(buckets.breakdown_table)
    written += write_table(breakdown, buckets.breakdown_display(breakdown),
                           tables / "breakdown",
                           "Where the accuracy comes from: test accuracy (%) per bucket of each "
                           "per-example fact, mean ± std over seeds (a rule: its one answer). "
                           "ListOps: tree depth (the root is 1), the shallowest, middle and "
                           f"deepest of {settings.depth_groups} groups by depth, length quartile "
                           "(tokens) and root operator; IMDB: length quartile (bytes); CIFAR-10: "
                           f"class. Quartiles: {settings.length_buckets} buckets at the test "
                           "set's quantiles of length." + missing)
    gaps = each(buckets.breakdown_gap_table)
    written += write_table(gaps, buckets.breakdown_gap_display(gaps, settings),
                           tables / "breakdown_gap",
                           buckets.gap_caption(settings) + missing)
    written.append(per_example_figures.accuracy_by_depth(
        buckets.labelled_by_variant(breakdown, variant),
        out / "figures" / "accuracy_by_depth.png",
        [s for v in variants for s in undrawn(readings, runs, v, variant, "depth")]))
    frames = {"mechanism": each(buckets.mechanism_table),
              "rule_readings": rule_readings_frame(readings, runs, agreement, variants)}
    return written, frames
