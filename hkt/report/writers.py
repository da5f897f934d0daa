"""The one table writer: cell formatting, Markdown and LaTeX (booktabs) text, and
:func:`write_table` (``.md``, ``.csv`` and ``.tex`` of one table). Tables pass a *display*,
``(header, rows)`` of strings, built with :func:`fmt`, :func:`pm` and :func:`signed`; the
benchmarks use :func:`markdown` too."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from hkt.fileio import atomic_path, atomic_write_text

Display = tuple[list[str], list[list[str]]]

#: The in-memory columns of how many test examples a table row's accuracies rest on (the fewest
#: and the most over its runs); a written table holds their display, ``test_examples``, instead.
EXAMPLES_MIN, EXAMPLES_MAX, EXAMPLES = "test_examples_min", "test_examples_max", "test_examples"


def examples_text(row: dict[str, Any]) -> str | None:
    """A row's test examples as tables show them: ``2000``, ``1990–2000``, ``?`` where none is
    known; None on a difference table's row that is no difference (no ``seeds_a``: the
    ablation's full variant)."""
    fewest, most = row.get(EXAMPLES_MIN), row.get(EXAMPLES_MAX)
    if fewest is None:
        return None if "seeds_a" in row and row["seeds_a"] is None else "?"
    return str(fewest) if fewest == most else f"{fewest}–{most}"


def for_writing(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` as its file holds it: the test-example counts (:data:`EXAMPLES_MIN`,
    :data:`EXAMPLES_MAX`) replaced, in their place, by their display :data:`EXAMPLES`."""
    if EXAMPLES_MIN not in df.columns or EXAMPLES_MAX not in df.columns:
        return df
    text = pl.Series(EXAMPLES, [examples_text(r) for r in df.iter_rows(named=True)],
                     dtype=pl.String)
    cols = [EXAMPLES if c == EXAMPLES_MIN else c for c in df.columns if c != EXAMPLES_MAX]
    return df.with_columns(text).select(cols)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt(v: Any, digits: int = 2) -> str:
    """A cell: floats with ``digits`` decimals, ints with thousands separators, '' for none."""
    if _missing(v):
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def learning_rate(lr: float) -> str:
    """A learning rate as configs write it: ``3e-4``, ``2.5e-4``, ``1e-3``."""
    mantissa, exponent = f"{lr:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def pm(mean: Any, std: Any) -> str:
    """``mean ± std`` (two decimals); the mean alone without a std (one seed)."""
    if mean is None:
        return ""
    if _missing(std):
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {std:.2f}"


def signed(v: Any) -> str:
    """A difference with its sign (two decimals), '' for none."""
    if _missing(v):
        return ""
    return f"{v:+.2f}"


def markdown(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A Markdown table; ``align`` has one letter per column, ``l`` or ``r`` (default: none).

    polars can print a frame as Markdown (``pl.Config(tbl_formatting="MARKDOWN")``), but only
    through its repr, which truncates rows, columns and long strings unless every limit is
    lifted; the tables here are already formatted strings (``55.10 ± 0.29``), so twenty lines
    of our own are the simpler, exact path."""
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    rule = ["---" if align is None else ("---:" if a == "r" else "---") for a in
            (align or "l" * len(header))]
    lines = ["| " + " | ".join(map(esc, header)) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    if not rows:
        lines.append("| " + " | ".join(["(no runs)"] + [""] * (len(header) - 1)) + " |")
    return "\n".join(lines) + "\n"


_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
        "±": r"$\pm$", "Δ": r"$\Delta$", "−": "--"}


def latex(header: list[str], rows: list[list[str]], caption: str = "", label: str = "") -> str:
    """A booktabs LaTeX table (first three columns left-aligned, the rest right-aligned)."""
    def esc(s: str) -> str:
        return "".join(_TEX.get(ch, ch) for ch in s)

    spec = "l" * min(3, len(header)) + "r" * max(0, len(header) - 3)
    out = [r"\begin{table}[t]", r"\centering", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
           " & ".join(esc(h) for h in header) + r" \\", r"\midrule"]
    out += [" & ".join(esc(c) for c in row) + r" \\" for row in rows]
    out += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        out.append(rf"\caption{{{esc(caption)}}}")
    if label:
        out.append(rf"\label{{{label}}}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


def write_table(df: pl.DataFrame, display: Display, stem: Path, caption: str) -> list[Path]:
    """Write ``stem``.md (display), .csv (all numeric columns; the test-example counts as their
    display, :func:`for_writing`) and .tex (display, booktabs)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    header, rows = display
    md, csv, tex = stem.with_suffix(".md"), stem.with_suffix(".csv"), stem.with_suffix(".tex")
    atomic_write_text(md, f"{caption}\n\n" + markdown(header, rows))
    with atomic_path(csv) as tmp:  # each file whole or not at all (a stop mid-way, a full disk)
        for_writing(df).write_csv(tmp)
    atomic_write_text(tex, latex(header, rows, caption, f"tab:{stem.name}"))
    return [md, csv, tex]
