"""``summary.md``: a few lines on the suite, its main tables, and links to every output."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from hkt.data_layout import DATA_METADATA, split_file
from hkt.data.parquet import read_metadata
from hkt.data.source_warning import provenance_warning
from hkt.errors import DataError
from hkt.fileio import atomic_write_text
from hkt.provenance import RESULTS_DIR_TAG, SUITE_TAG
from hkt.report import environments
from hkt.report.controls import controls_display
from hkt.report.aggregate_outputs import PRODUCTS
from hkt.report.tables import ablation_display, gap_display, main_display, main_notes
from hkt.report.writers import markdown
from hkt.runs_frame import KEY, examples_note, paper_caveat

# the order the summary lists them in: the workflow's (hkt.report.aggregate_outputs)
TABLES = tuple(p.name for p in PRODUCTS if p.kind == "table")
FIGURES = tuple(p.name for p in PRODUCTS if p.kind == "figure")


def data_metadata(data_dir: Path) -> dict | None:
    """The ``hkt`` metadata of the prepared data in ``data_dir``: its train split's, or the
    :data:`DATA_METADATA` kept of it; None where neither is there."""
    try:
        return read_metadata(data_dir / split_file("train"))
    except DataError:
        pass
    try:
        return json.loads((data_dir / DATA_METADATA).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def record_data_warning(rec: dict, data_root: Path | None = None) -> str | None:
    """The provenance warning of the data a record's run was trained on, when that data was
    prepared from an alternative to the official archive (read from the data's metadata: in its
    ``data_dir``, or under ``data_root`` by that directory's name when given; None for data no
    longer there). A run in MLflow carries it as a tag."""
    data_dir = rec.get("data_dir")
    if not data_dir:
        return None
    where = Path(data_dir) if data_root is None else data_root / Path(data_dir).name
    meta = data_metadata(where)
    return None if meta is None else provenance_warning(meta)


def data_warnings(runs: pl.DataFrame) -> dict[tuple[str, int | None], str]:
    """Per (task, T): the provenance warning of the data its runs were trained on (the runs
    frame's ``data_warning``), for captions and the summary."""
    flagged = runs.filter(pl.col("data_warning").is_not_null()).sort(KEY)
    return {(t, n): w for t, n, w in flagged.select("task", "length", "data_warning").rows()}


def _where(dirs: list[str], out: Path) -> str:
    """Where the runs were made, in words a reader of the summary can follow on any machine:
    "" (none recorded), this results directory, or how many results directories, each run's
    named in ``tables/runs.csv`` (their absolute paths are the machine's that made them)."""
    if not dirs:
        return ""
    if [Path(d) for d in dirs] == [out.resolve()]:
        return ", in this results directory"
    many = f"{len(dirs)} results directories" if len(dirs) > 1 else "1 results directory"
    return f", from {many} (each run's: `results_dir` in tables/runs.csv)"


def write_summary(path: Path, runs: pl.DataFrame, main: pl.DataFrame, gap: pl.DataFrame,
                  abl: pl.DataFrame, *, source: str, ablation_task: str,
                  ablation_length: int | None, sections: Sequence[str] = (),
                  data_warnings: dict[tuple[str, int | None], str] | None = None,
                  controls: pl.DataFrame | None = None, out: Path | None = None,
                  report_command: str | None = None) -> Path:
    """A few lines on the suite, the main and ablation tables, ``sections`` (more Markdown), and
    links to every table and figure in ``path``'s directory: write it after them.
    ``data_warnings`` (:func:`data_warnings`) head it, one quoted warning per (task, T);
    ``controls`` (:func:`hkt.report.controls.controls_table`), when it has rows, follows the gap.
    ``out``: the folder the summary and its files end up in, where that is not ``path``'s (a
    staging folder): its tables and figures are linked too. ``report_command``: the workflow's
    command that builds the report (hkt.workflow.next_steps)."""
    here = path.parent
    out = here if out is None else out
    profiles = ", ".join(sorted({p for p in runs["profile"].to_list() if p}))
    suites = sorted({s for s in runs[SUITE_TAG].to_list() if s})
    dirs = sorted({d for d in runs[RESULTS_DIR_TAG].to_list() if d})
    tasks = ", ".join(f"{t} (T={n})" for t, n in runs.select("task", "length").unique()
                      .sort("task", "length").rows())
    models = ", ".join(sorted(set(runs["model"].to_list())))
    seeds = ", ".join(str(s) for s in sorted(set(runs["seed"].to_list())))
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = [
        "# Results summary", "",
        f"{len(runs)} runs from {source}; suite: {', '.join(suites) or 'none named'}"
        f"{_where(dirs, out)}; "
        f"profile: {profiles or '?'}; tasks: {tasks}; "
        f"models: {models}; seeds: {seeds}. Written by `hkt aggregate` at {now}.", "",
        *[f"> **Warning ({t}, T={n}):** {w}\n" for (t, n), w in sorted((data_warnings or {}).items(),
                                                                     key=lambda kv: str(kv[0]))],
        "Accuracies are percentages, mean ± std over seeds (sample std; none with one seed). "
        "The seed is the unit of replication: a difference between two models is read with the "
        "seeds' error plus the test set's (paired where both sides' runs kept predictions, "
        "binomial otherwise) on the seed terms' degrees of freedom, and Welch's test over seeds "
        "alone beside it; verdicts rest on the former (docs/per-example.md, the error model). "
        "Only the `paper` profile is meant to be compared with the paper's figures.", "",
        "## Main table", "", markdown(*main_display(main)),
        "![main table as bars](figures/main_bar.png)", "",
        "Bars: mean over seeds (written at the bar's foot, or above its seeds where they lie "
        "that low); error bars: standard deviation; black dots: single seeds; red "
        "marks: the paper's figures. " + " ".join(filter(None, (
            paper_caveat(runs.filter(pl.col("variant") == "main")),
            examples_note(runs.filter(pl.col("variant") == "main")), main_notes(main)))), "",
        "## HKT − MHA", "", markdown(*gap_display(gap)),
        *(["## Controls against HKT and MHA", "", markdown(*controls_display(controls))]
          if controls is not None and len(controls) else []),
        f"## Ablations on {ablation_task} (T={ablation_length})", "",
        markdown(*ablation_display(abl)),
        *sections,
        *environments.summary_section(runs),
        "## Files", "",
    ]
    tables = sorted({p.stem for d in {here, out} for p in (d / "tables").glob("*.md")})
    ordered = [t for t in TABLES if t in tables] + [t for t in tables if t not in TABLES]
    lines.append("- Tables (Markdown, CSV, LaTeX): " + ", ".join(
        f"[{t}](tables/{t}.md) ([csv](tables/{t}.csv), [tex](tables/{t}.tex))" for t in ordered)
        + ", every run: [runs.csv](tables/runs.csv)")
    figures = sorted({p.stem for d in {here, out} for p in (d / "figures").glob("*.png")})
    ordered = [f for f in FIGURES if f in figures] + [f for f in figures if f not in FIGURES]
    lines.append("- Figures: " + ", ".join(f"[{f}](figures/{f}.png)" for f in ordered))
    if report_command:
        lines.append(f"- Report: not made by the workflow (it needs the finished DAG); "
                     f"`{report_command}`, run where the workflow ran, writes it: every table "
                     "and figure with its caption, in one HTML file")
    else:
        lines.append(f"- Report: not made by the workflow (it needs the finished DAG); "
                     f"`snakemake --report {shlex.quote(f'{out}/report.html')}`, run from the "
                     "repository, writes it: every table and figure with its caption, in one HTML file")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
