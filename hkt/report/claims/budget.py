"""The minimum budget a claim's runs need before the summary reads a verdict from them
(:class:`Minimum`, config/report/settings.yaml), and :class:`Budget`, which reads every verdict drawn
from runs against it: 12 smoke steps on one seed test the pipeline, not the paper."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from hkt import paper
from hkt.errors import ConfigValueError
from hkt.report.reading import ClaimRow, Verdict
from hkt.report.report_settings import SETTINGS_FILE, read_mapping
from hkt.runs_frame import AggregateError
from hkt.value_checks import integer

__all__ = ["Minimum", "load_minimum", "Budget", "NO_BUDGET", "REPORT_CONFIG", "profile_said"]

#: Where the minima live, under config/ (the report's settings).
REPORT_CONFIG = SETTINGS_FILE


@dataclass(frozen=True)
class Minimum:
    """The least training (steps) and seeds a claim's runs need before the summary reads a
    verdict from them: below either, the claim reads :attr:`Verdict.AT_THIS_BUDGET`."""

    steps: int
    seeds: int

    def shortfall(self, steps: Iterable[int | None] = (), seeds: Iterable[int | None] = ()) -> str:
        """What falls short, in words ("12 steps, 1 seed"); empty when the runs suffice.
        Unknown values (None) are not held against the runs."""
        fewest_steps = min((s for s in steps if s is not None), default=None)
        fewest_seeds = min((int(s) for s in seeds if s is not None), default=None)
        short = []
        if fewest_steps is not None and fewest_steps < self.steps:
            short.append(f"{fewest_steps:,} steps")
        if fewest_seeds is not None and fewest_seeds < self.seeds:
            short.append(f"{fewest_seeds} seed{'' if fewest_seeds == 1 else 's'}")
        return ", ".join(short)

    def note(self) -> str:
        """The claims table's note: both minima and where they are set."""
        return (f"A claim whose runs trained for fewer than {self.steps:,} steps or on fewer "
                f"than {self.seeds} seeds reads \"{Verdict.AT_THIS_BUDGET}\", whatever its "
                f"interval says (the minima: verdict_min_steps, verdict_min_seeds of "
                f"config/{REPORT_CONFIG}).")


def load_minimum(path: Path | None = None) -> Minimum:
    """The minima of the report's settings (or ``path``), or an :class:`AggregateError` naming
    the key that is missing or not a positive whole number."""
    from hkt.config_compose import config_dir

    path = path or config_dir() / REPORT_CONFIG
    cfg = read_mapping(path)
    try:
        return Minimum(steps=integer(cfg.get("verdict_min_steps"), "verdict_min_steps", lo=1),
                       seeds=integer(cfg.get("verdict_min_seeds"), "verdict_min_seeds", lo=1))
    except ConfigValueError as e:
        raise AggregateError(f"{path}: {e}; set it to a whole number of at least 1") from e


@dataclass(frozen=True)
class Budget:
    """Reads each claim's verdict against the :class:`Minimum`: the runs frame gives the steps
    a claim's trained runs took (the tables carry their seeds). Without a minimum (the
    default), every verdict stands as its rule reads it."""

    runs: pl.DataFrame | None = None
    minimum: Minimum | None = None
    main_variant: str | None = None

    @property
    def main(self) -> str:
        """The main variant's name (``main`` where not known)."""
        return self.main_variant or "main"

    def trained(self, models: Iterable[str] | None = None) -> pl.DataFrame:
        """The trained runs (no external baseline) of ``models`` (all when None): the one
        selection every claim's runs come from."""
        if self.runs is None or self.runs.is_empty():
            return pl.DataFrame()
        sel = self.runs.filter(pl.col("external").is_null())
        return sel if models is None else sel.filter(pl.col("model").is_in(list(models)))

    def steps(self, task: str | Iterable[str] | None, length: int | Iterable[int] | None,
              models: Iterable[str], variants: Iterable[str] | None = None) -> list[int | None]:
        """The steps of the trained runs of ``models`` on ``task`` (one or several) at T =
        ``length`` (one or several), of ``variants`` (all when None)."""
        sel = self.trained(models)
        if sel.is_empty():
            return []
        tasks = [task] if isinstance(task, str) else list(task or [])
        lengths = [length] if isinstance(length, int) else list(length or [])
        if tasks:
            sel = sel.filter(pl.col("task").is_in(tasks))
        if lengths:
            sel = sel.filter(pl.col("length").is_in(lengths))
        if variants is not None:
            sel = sel.filter(pl.col("variant").is_in(list(variants)))
        return sel["steps"].to_list()

    def main_steps(self, task: str, length: int, models: Iterable[str]) -> list[int | None]:
        """The steps of the main-variant runs of ``models`` on a task (every variant when the
        main one is not known)."""
        variants = None if self.main_variant is None else [self.main_variant]
        return self.steps(task, length, models, variants)

    def read(self, row: ClaimRow, *, steps: Iterable[int | None] = (),
             seeds: Iterable[int | None] = ()) -> ClaimRow:
        """``row``, or the row reading :attr:`Verdict.AT_THIS_BUDGET` with what falls short
        where the runs lie below the minimum."""
        short = "" if self.minimum is None else self.minimum.shortfall(steps, seeds)
        return row.judged(Verdict.AT_THIS_BUDGET, f"{Verdict.AT_THIS_BUDGET} ({short})") \
            if short else row


NO_BUDGET = Budget()


def profile_said(profiles: list[str], other: str) -> str:
    """The budget sentence of a claim's runs: at our paper profile (the paper's budget is not
    public), or ``other`` (what another budget's reading is); '' without profiles."""
    if not profiles:
        return ""
    if profiles == [paper.PROFILE]:
        return f"at our `{paper.PROFILE}` profile (the paper's budget is not public)"
    return other
