"""What the benchmarks share: their arguments, threads and writing their tables. The timing
and peak-memory measurement (and the training step as ``hkt train`` takes it) are
:mod:`hkt.train.step_timing`'s, shared with ``hkt doctor`` and ``hkt plan``."""

from __future__ import annotations

import argparse
import csv
import io
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from hkt.fileio import atomic_write_text
from hkt.report.writers import markdown


def add_run_arguments(parser: argparse.ArgumentParser, *, steps: int, warmup: int) -> None:
    """The options every training-step benchmark takes: steps, device, threads, seed, output."""
    parser.add_argument("--steps", type=int, default=steps, help=f"timed training steps (default {steps})")
    parser.add_argument("--warmup", type=int, default=warmup, help=f"untimed steps first (default {warmup})")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/bench"),
                        help="output directory (default results/bench)")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (None: unchanged), restoring the count afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def number(v: object) -> str:
    """A measured number for a benchmark table: three significant digits, whole numbers from
    100 on, "–" for NaN (not measurable here)."""
    if isinstance(v, float):
        return "–" if v != v else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def markdown_numbers(header: list[str], rows: list[list[object]], align: str | None = None) -> str:
    """A Markdown table of measurements (the one table writer, :func:`hkt.report.writers.markdown`)."""
    return markdown(header, [[number(v) for v in row] for row in rows], align)


def csv_text(rows: Iterable[dict[str, Any]], columns: Iterable[str]) -> str:
    """Rows as CSV with the given columns (others dropped); full precision (tables round)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_outputs(out_dir: Path, stem: str, csv_text: str, markdown: str) -> tuple[Path, Path]:
    """``{stem}.csv`` and ``{stem}.md`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    atomic_write_text(csv_path, csv_text)
    atomic_write_text(md_path, markdown.rstrip("\n") + "\n")
    return csv_path, md_path
