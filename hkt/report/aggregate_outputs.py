"""What ``hkt aggregate`` writes: the one list of a suite's tables and figures.

The workflow declares exactly these files as the aggregate step's outputs (with the report
captions of ``workflow/report/CAPTION.rst``), and ``hkt aggregate`` writes every one of them,
whatever subset of models, tasks and analyses the suite has: a product without data (the level
truncation of a suite that analyses no HKT run) is still written, saying why it is empty. So the
files declared and the files written cannot drift apart (a test walks the suite's switches).
The per-example readings (``predictions``) are written when the runs have predictions; runs made
before they were kept have none, and a publication of them gains no such file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Product", "PRODUCTS", "RUNS_TABLE", "SUMMARY", "MLFLOW_CHECK", "products",
           "aggregate_files"]

TABLE_FORMATS = ("csv", "md", "tex")  # a table's files; the CSV carries the report caption


@dataclass(frozen=True)
class Product:
    """One table or figure of the aggregate step."""

    name: str       # tables/NAME.{csv,md,tex} or figures/NAME.png
    kind: str       # "table" or "figure"
    category: str   # its section of `snakemake --report`
    caption: str    # workflow/report/CAPTION.rst
    analyses: bool = False  # written only when the suite analyses trained runs
    predictions: bool = False  # written only when runs have predictions (hkt.report.example_runs)
    leaderboard: bool = False  # written only when the suite reads published figures (--leaderboard)

    def files(self, out: str | Path) -> list[Path]:
        """Its files under the results directory ``out`` (the captioned one first)."""
        out = Path(out)
        if self.kind == "figure":
            return [out / "figures" / f"{self.name}.png"]
        return [out / "tables" / f"{self.name}.{ext}" for ext in TABLE_FORMATS]


def _table(name: str, category: str = "Tables", analyses: bool = False,
           predictions: bool = False) -> Product:
    return Product(name, "table", category, f"{name}_table", analyses, predictions)


def _figure(name: str, category: str = "Figures", caption: str | None = None,
            analyses: bool = False, predictions: bool = False) -> Product:
    return Product(name, "figure", category, caption or name, analyses, predictions)


PRODUCTS: tuple[Product, ...] = (
    _table("main"), _table("gap"), _table("controls"), _table("ablation"), _table("convergence"), _table("time"),
    _table("sweep"), _table("sweep_gap"),
    _figure("val_curves"), _figure("accuracy_vs_levels"), _figure("main_bar"),
    _table("kurtosis", "Analyses", True), _table("kernel", "Analyses", True),
    _table("truncation", "Analyses", True), _table("approximation", "Analyses", True),
    _table("cost", "Analyses"),
    _figure("kappa_by_level", "Analyses", analyses=True),
    _figure("truncation", "Analyses", "truncation_curve", analyses=True),
    _figure("approximation", "Analyses", "approximation_figure", analyses=True),
    _table("paired", "Per example", predictions=True),
    _table("rule_agreement", "Per example", predictions=True),
    _table("breakdown", "Per example", predictions=True),
    _table("breakdown_gap", "Per example", predictions=True),
    _figure("accuracy_by_depth", "Per example", predictions=True),
    Product("leaderboard", "table", "Tables", "leaderboard_table", leaderboard=True),
)
RUNS_TABLE = Product("runs", "table", "Tables", "runs_table")  # tables/runs.csv only
SUMMARY = "summary.md"
MLFLOW_CHECK = Product("mlflow_check", "table", "Audit", "mlflow_check")  # hkt aggregate --check-mlflow


def products(*, analyses: bool, predictions: bool = False,
             leaderboard: bool = False) -> list[Product]:
    """The tables and figures of a suite that does (or does not) analyse trained runs, whose
    runs do (or do not) write their predictions, and that does (or does not) read published
    figures against its rule references (``leaderboard``)."""
    return [p for p in PRODUCTS if (analyses or not p.analyses)
            and (predictions or not p.predictions) and (leaderboard or not p.leaderboard)]


def aggregate_files(out: str | Path, *, analyses: bool, predictions: bool = False,
                    leaderboard: bool = False) -> list[Path]:
    """Every file ``hkt aggregate`` writes under ``out`` (tables, figures, runs.csv, summary)."""
    files = [f for p in products(analyses=analyses, predictions=predictions,
                                 leaderboard=leaderboard) for f in p.files(out)]
    return [*files, Path(out) / "tables" / "runs.csv", Path(out) / SUMMARY]
