"""Reporting: tables (polars) and figures from run records or an MLflow experiment.

``hkt aggregate`` (:mod:`hkt.report.cli`) is the command; :mod:`hkt.report.aggregate` builds the
tables, :mod:`hkt.report.figures` the PNG figures, :mod:`hkt.report.paper` holds the paper's
published numbers as data.
"""
