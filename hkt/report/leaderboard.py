"""Published figures read against the rule references: the leaderboard table of ``hkt aggregate
--leaderboard FILE`` (issue 60: LRA's own ListOps results, ``config/report/lra_listops.yaml``).

The file names a task and T (the rule references it is read against, as the runs give them), the
test set's size of the published figures, and one entry per published result: its model, accuracy,
spread over seeds as its source gives it (``{sd: X}`` a standard deviation, ``{se: X}`` a standard
error of the mean, or none), seed count (or none), source and where it was checked. Each accuracy
is read with :func:`hkt.rule_references.reading`, the rule the summary's claims read every model's
accuracy against, its error :func:`hkt.rule_references.figure_error` (the seed spread where the
source gives one, plus the test set's binomial error; without a spread the binomial error alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from hkt.report.report_settings import load_settings
from hkt.report.writers import markdown, write_table
from hkt.rule_references import figure_error, lines, reading
from hkt.report.report_settings import confidence
from hkt.runs_frame import AggregateError

__all__ = ["Entry", "Leaderboard", "load_leaderboard", "leaderboard_table", "leaderboard_display",
           "figure_text", "write_leaderboard", "LEADERBOARD_SCHEMA",
           "SPREAD_KINDS"]

#: The table's columns and their types.
LEADERBOARD_SCHEMA = {"model": pl.Utf8, "accuracy": pl.Float64, "spread": pl.Float64,
                      "spread_kind": pl.Utf8, "seeds": pl.Int64, "error_pp": pl.Float64,
                      "position": pl.Utf8, "reading": pl.Utf8, "recipe": pl.Utf8,
                      "source": pl.Utf8, "checked_in": pl.Utf8}
_ENTRY_KEYS = ("model", "accuracy", "spread", "seeds", "source", "checked_in", "recipe")
#: What a spread can be, as a source gives it: its key in the file and what it means.
SPREAD_KINDS = {"sd": "standard deviation over seeds",
                "se": "standard error of the mean over seeds"}


@dataclass(frozen=True)
class Entry:
    """One published figure: test accuracy (%), its spread and seed count where the source gives
    them (``spread_kind`` a key of :data:`SPREAD_KINDS`)."""

    model: str
    accuracy: float
    spread: float | None
    spread_kind: str | None
    seeds: int | None
    source: str
    checked_in: str
    recipe: str

    def error(self, test_examples: int) -> float:
        """The figure's standard error (pp): its seed spread and the test set's binomial error."""
        return figure_error(self.accuracy, self.spread if self.spread_kind == "sd" else None,
                            self.seeds, test_examples,
                            sem=self.spread if self.spread_kind == "se" else None)


@dataclass(frozen=True)
class Leaderboard:
    """A file of published figures on one task and T."""

    task: str
    length: int
    test_examples: int
    entries: tuple[Entry, ...]


def _bad(path: Path, what: str) -> AggregateError:
    return AggregateError(f"{path}: {what}; see config/report/lra_listops.yaml for the format")


def _number(v: Any, path: Path, where: str, *, whole: bool = False, lo: float = 0.0,
            hi: float | None = None) -> float:
    ok = isinstance(v, int if whole else (int, float)) and not isinstance(v, bool)
    if not ok or v < lo or (hi is not None and v > hi):
        span = f"{lo:g}..{hi:g}" if hi is not None else f"at least {lo:g}"
        raise _bad(path, f"{where} is {v!r}, not a {'whole ' if whole else ''}number {span}")
    return v


def _spread(v: Any, path: Path, where: str) -> tuple[float | None, str | None]:
    """A spread as the file gives it: null, ``{sd: X}`` or ``{se: X}``."""
    if v is None:
        return None, None
    kinds = " or ".join(f"{{{k}: X}} ({what})" for k, what in SPREAD_KINDS.items())
    if not isinstance(v, dict) or len(v) != 1 or next(iter(v)) not in SPREAD_KINDS:
        raise _bad(path, f"{where}: spread is {v!r}; give null (the source gives none), {kinds}")
    kind, value = next(iter(v.items()))
    return float(_number(value, path, f"{where}: spread {kind}")), kind


def _entry(e: Any, i: int, path: Path) -> Entry:
    """One entry of the file, checked; an :class:`AggregateError` names the entry and key."""
    where = f"entry {i + 1}"
    if not isinstance(e, dict):
        raise _bad(path, f"{where} is not a mapping")
    unknown = sorted(set(e) - set(_ENTRY_KEYS))
    absent = [k for k in _ENTRY_KEYS if k not in e]
    if unknown or absent:
        raise _bad(path, f"{where} ({e.get('model', '?')}): "
                         + "; ".join(filter(None, (
                             f"unknown keys {', '.join(unknown)}" if unknown else "",
                             f"missing {', '.join(absent)}"
                             + (" (every figure names where it is published)"
                                if "source" in absent else "") if absent else ""))))
    where = f"{where} ({e['model']})"
    for key in ("model", "source", "checked_in", "recipe"):
        if not isinstance(e[key], str) or not e[key].strip():
            raise _bad(path, f"{where}: {key} must be a non-empty text")
    spread, kind = _spread(e["spread"], path, where)
    seeds = None if e["seeds"] is None else int(_number(e["seeds"], path, f"{where}: seeds",
                                                        whole=True, lo=1))
    return Entry(e["model"], float(_number(e["accuracy"], path, f"{where}: accuracy", hi=100.0)),
                 spread, kind, seeds, e["source"], e["checked_in"], e["recipe"])


def load_leaderboard(path: str | Path) -> Leaderboard:
    """Read and check a leaderboard file; an :class:`AggregateError` names the first bad key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise AggregateError(f"cannot read the leaderboard file {path}: {e}") from None
    if not isinstance(raw, dict):
        raise _bad(path, "expected a mapping with task, length, test_examples and entries")
    missing = [k for k in ("task", "length", "test_examples", "entries") if k not in raw]
    if missing:
        raise _bad(path, f"missing {', '.join(missing)}")
    if not isinstance(raw["entries"], list) or not raw["entries"]:
        raise _bad(path, "entries must be a non-empty list")
    entries = tuple(_entry(e, i, path) for i, e in enumerate(raw["entries"]))
    return Leaderboard(str(raw["task"]), int(_number(raw["length"], path, "length", whole=True,
                                                     lo=1)),
                       int(_number(raw["test_examples"], path, "test_examples", whole=True, lo=1)),
                       entries)


def leaderboard_table(board: Leaderboard, runs: pl.DataFrame) -> pl.DataFrame:
    """One row per published figure with its reading against the rule references of ``runs`` on
    (board.task, board.length); an :class:`AggregateError` when the runs hold none there."""
    refs = lines(runs, board.task, board.length)
    if not refs:
        raise AggregateError(f"the leaderboard is read against the rule references on "
                             f"{board.task} T={board.length}, and the runs hold none there: "
                             "enable them in the suite (external: root_op_prior, ...)")
    rows = []
    for e in board.entries:
        err = e.error(board.test_examples)
        placed = reading(e.accuracy, err, refs, confidence())
        rows.append({"model": e.model, "accuracy": e.accuracy, "spread": e.spread,
                     "spread_kind": e.spread_kind, "seeds": e.seeds, "error_pp": err,
                     "position": placed.position, "reading": placed.text,
                     "recipe": e.recipe, "source": e.source, "checked_in": e.checked_in})
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def figure_text(accuracy: float, spread: float | None, kind: str | None, seeds: int | None) -> str:
    """A published figure as shown: "59.60 ± 0.07 (sd, seeds not given)", "60.20 ± 0.80 (se, 3
    seeds)", "63.14 (5 seeds, no spread)", "36.37"."""
    count = f"{seeds} seeds" if seeds is not None else "seeds not given"
    if spread is None:
        return f"{accuracy:.2f}" + (f" ({count}, no spread)" if seeds is not None else "")
    return f"{accuracy:.2f} ± {spread:.2f} ({kind}, {count})"


def leaderboard_display(table: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The table as shown: the published figure (with its spread and seeds where given), where it
    sits among the rules with the differences, the recipe and the source."""
    header = ["model", "published test acc (%)", "reading against the rules", "recipe", "source"]
    rows = [[r["model"], figure_text(r["accuracy"], r["spread"], r["spread_kind"], r["seeds"]),
             r["reading"], r["recipe"], r["source"]] for r in table.iter_rows(named=True)]
    return header, rows


def caption(board: Leaderboard, table: pl.DataFrame) -> str:
    """The table's caption: what is read against what, how the error is counted, how many figures
    carry a spread, and how many entries sit at each position. The interval's level is the
    report's configured confidence (:func:`hkt.report.report_settings.load_settings`)."""
    counts: dict[str, int] = {}
    for p in table["position"].to_list():
        counts[p] = counts.get(p, 0) + 1
    tally = "; ".join(f"{n} {p}" for p, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    kinds = {k: table.filter(pl.col("spread_kind") == k).height for k in SPREAD_KINDS}
    none = table.filter(pl.col("spread").is_null()).height
    sd_no_seeds = table.filter((pl.col("spread_kind") == "sd") & pl.col("seeds").is_null()).height
    level = load_settings().level
    return (f"Published results on {board.task} (T={board.length}) read against the rule "
            f"references of these runs (docs/listops.md): at a rule when the {level} interval of "
            f"the difference holds 0, else above the highest rule it clears and below the next. "
            f"The error of a figure: its spread over seeds where the source gives one (a "
            f"standard deviation sd over n seeds counts sd²/n; a standard error se counts se²), "
            f"plus the test set's binomial error p(1 − p)/N with N = {board.test_examples:,} "
            f"(the published test set's size), and the rule's own binomial error. "
            f"{kinds['sd']} of {table.height} figures give an sd ({sd_no_seeds} of them without "
            f"a seed count: read as one seed, the widest their spread allows), {kinds['se']} an "
            f"se; {none} come with no spread: they are read with the test set's error alone, "
            f"which understates their error by the seed spread their sources do not give. Where "
            f"the figures sit: {tally}.")


def write_leaderboard(path: str, runs: pl.DataFrame, tables: Path
                      ) -> tuple[list[Path], list[str]]:
    """The leaderboard table under ``tables``: the published figures of ``path`` read against
    the rule references of ``runs``; and the summary's section on it."""
    board = load_leaderboard(path)
    table = leaderboard_table(board, runs)
    text = caption(board, table)
    made = write_table(table, leaderboard_display(table), tables / "leaderboard", text)
    return made, ["## Published results read against the rules", "", text, "",
                  markdown(*leaderboard_display(table)), ""]
