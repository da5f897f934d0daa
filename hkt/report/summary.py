"""``summary.md``: a few lines on the suite, its main tables, and links to every output."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from hkt.report import environments
from hkt.report.tables import ablation_display, gap_display, main_display
from hkt.report.writers import markdown

TABLES = ("main", "gap", "ablation")
FIGURES = ("val_curves", "accuracy_vs_levels", "main_bar")


def write_summary(path: Path, runs: pl.DataFrame, main: pl.DataFrame, gap: pl.DataFrame,
                  abl: pl.DataFrame, *, source: str, ablation_task: str,
                  ablation_length: int | None) -> Path:
    """A few lines on the suite, the main and ablation tables, and links to every output."""
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
        "## Main table", "", markdown(*main_display(main)),
        "## HKT − MHA", "", markdown(*gap_display(gap)),
        f"## Ablations on {ablation_task} (T={ablation_length})", "",
        markdown(*ablation_display(abl)),
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
