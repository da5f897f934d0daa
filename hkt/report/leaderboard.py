"""Published figures read against the rule references: the leaderboard table of ``hkt aggregate
--leaderboard FILE`` (issue 60: LRA's own ListOps results, ``config/report/lra_listops.yaml``).

The file names a task and T (the rule references it is read against, as the runs give them), the
test set's size of the published figures, and one entry per published result: its model, accuracy,
spread (``std`` over ``seeds``, or none), source and where it was checked. Each accuracy is read
with :func:`hkt.rule_references.reading`, the rule the summary's claims read every model's accuracy
against, its error :func:`hkt.rule_references.figure_error` (the spread over seeds where the source
gives one, plus the test set's binomial error; without a spread the binomial error alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from hkt.rule_references import figure_error, lines, reading
from hkt.runs_frame import AggregateError

__all__ = ["Entry", "Leaderboard", "load_leaderboard", "leaderboard_table", "leaderboard_display",
           "short_reading", "LEADERBOARD_SCHEMA"]

#: The table's columns and their types.
LEADERBOARD_SCHEMA = {"model": pl.Utf8, "accuracy": pl.Float64, "std": pl.Float64,
                      "seeds": pl.Int64, "error_pp": pl.Float64, "position": pl.Utf8,
                      "reading": pl.Utf8, "recipe": pl.Utf8, "source": pl.Utf8,
                      "checked_in": pl.Utf8}
_ENTRY_KEYS = ("model", "accuracy", "std", "seeds", "source", "checked_in", "recipe")


@dataclass(frozen=True)
class Entry:
    """One published figure: test accuracy (%), its spread where the source gives one."""

    model: str
    accuracy: float
    std: float | None
    seeds: int | None
    source: str
    checked_in: str
    recipe: str


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
    entries = []
    for i, e in enumerate(raw["entries"]):
        where = f"entry {i + 1}"
        if not isinstance(e, dict):
            raise _bad(path, f"{where} is not a mapping")
        unknown = sorted(set(e) - set(_ENTRY_KEYS))
        absent = [k for k in _ENTRY_KEYS if k not in e]
        if unknown or absent:
            raise _bad(path, f"{where} ({e.get('model', '?')}): "
                             + "; ".join(filter(None, (
                                 f"unknown keys {', '.join(unknown)}" if unknown else "",
                                 f"missing {', '.join(absent)}" if absent else ""))))
        where = f"{where} ({e['model']})"
        for key in ("model", "source", "checked_in", "recipe"):
            if not isinstance(e[key], str) or not e[key].strip():
                raise _bad(path, f"{where}: {key} must be a non-empty text")
        std = None if e["std"] is None else float(_number(e["std"], path, f"{where}: std"))
        seeds = None if e["seeds"] is None else int(_number(e["seeds"], path, f"{where}: seeds",
                                                            whole=True, lo=1))
        if (std is None) != (seeds is None):
            raise _bad(path, f"{where}: std and seeds go together (both, or both null)")
        entries.append(Entry(e["model"], float(_number(e["accuracy"], path, f"{where}: accuracy",
                                                       hi=100.0)),
                             std, seeds, e["source"], e["checked_in"], e["recipe"]))
    return Leaderboard(str(raw["task"]), int(_number(raw["length"], path, "length", whole=True,
                                                     lo=1)),
                       int(_number(raw["test_examples"], path, "test_examples", whole=True, lo=1)),
                       tuple(entries))


def short_reading(text: str) -> str:
    """A reading without its differences: "at the root-operator prior", "above the depth-1
    rule, below the depth-2 rule"."""
    return re.sub(r" \([^)]*\)", "", text)


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
        err = figure_error(e.accuracy, e.std, e.seeds, board.test_examples)
        text = reading(e.accuracy, err, refs)
        rows.append({"model": e.model, "accuracy": e.accuracy, "std": e.std, "seeds": e.seeds,
                     "error_pp": err, "position": short_reading(text), "reading": text,
                     "recipe": e.recipe, "source": e.source, "checked_in": e.checked_in})
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def leaderboard_display(table: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The table as shown: the published figure (with its spread where one is given), where it
    sits among the rules with the differences, the recipe and the source."""
    header = ["model", "published test acc (%)", "reading against the rules", "recipe", "source"]
    rows = []
    for r in table.iter_rows(named=True):
        figure = (f"{r['accuracy']:.2f}" if r["std"] is None
                  else f"{r['accuracy']:.2f} ± {r['std']:.2f} ({r['seeds']} seeds)")
        rows.append([r["model"], figure, r["reading"], r["recipe"], r["source"]])
    return header, rows


def caption(board: Leaderboard, table: pl.DataFrame) -> str:
    """The table's caption: what is read against what, how the error is counted, and how many
    entries sit at each position."""
    counts: dict[str, int] = {}
    for p in table["position"].to_list():
        counts[p] = counts.get(p, 0) + 1
    tally = "; ".join(f"{n} {p}" for p, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    none = table.filter(pl.col("std").is_null()).height
    return (f"Published results on {board.task} (T={board.length}) read against the rule "
            f"references of these runs (docs/listops.md): at a rule when the 95% interval of "
            f"the difference holds 0, else above the highest rule it clears and below the next. "
            f"The error of a figure: its spread over seeds where the source gives one, plus the "
            f"test set's binomial error p(1 − p)/N with N = {board.test_examples:,} (the "
            f"published test set's size), and the rule's own binomial error. {none} of "
            f"{table.height} figures come with no spread: they are read with the test set's "
            f"error alone, which understates their error by the seed spread their sources do "
            f"not give. Where the figures sit: {tally}.")
