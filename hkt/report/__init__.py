"""Reporting: the suite's tables, figures and summary from run records or MLflow (``hkt aggregate``).

- :mod:`hkt.report.aggregate`: the command's arguments; :mod:`hkt.report.build`: what it writes.
- :mod:`hkt.report.tables`: main, gap (HKT − MHA) and ablation tables, each with its display.
- :mod:`hkt.report.analysis_tables`: kurtosis, kernel, truncation and cost tables.
- the readings of the runs' predictions, example by example: :mod:`hkt.report.example_runs`
  (the runs' predictions and their tasks' facts), :mod:`hkt.report.paired` (paired differences),
  :mod:`hkt.report.rule_agreement` and :mod:`hkt.report.rule_readings` (the ListOps rules),
  :mod:`hkt.report.buckets` (accuracy by fact, the mechanism), :mod:`hkt.report.example_display`.
- :mod:`hkt.report.reading`: verdicts and readings as types, rendered to prose once;
  :mod:`hkt.report.claims`: the paper's claims, one file a claim (config/report/claims.yaml).
- :mod:`hkt.report.result_tables`, :mod:`hkt.report.sweep`, :mod:`hkt.report.leaderboard`:
  the products of ``hkt aggregate`` beside the main tables.
- :mod:`hkt.report.mlflow_runs`: the runs frame read from MLflow instead of records.
- :mod:`hkt.report.suite_choice`: which suite run's MLflow runs it reads.
- :mod:`hkt.report.audit`: every record against its MLflow run.
- :mod:`hkt.report.writers`: the one table writer (Markdown, CSV, LaTeX).
- :mod:`hkt.report.summary`: ``summary.md``.

The runs frame itself (:mod:`hkt.runs_frame`), the paper's numbers (:mod:`hkt.paper`) and the figures
(:mod:`hkt.figures`) sit below, shared with the analyses.
"""
