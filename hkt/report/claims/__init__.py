"""The summary's reading of the paper's claims: for each, what the paper says, what our runs
measured, and whether they **support** it, **refute** it or **cannot tell**.

One claim a file: each module of this package named in config/report/claims.yaml declares the
tables it reads (``TABLES``, by the names the aggregate step gives them: ``main``, ``gap``,
``ablation``, ``cost``, ``kurtosis``, ``approximation``, ``kernel``, ``mechanism``,
``rule_readings``, ``controls``, ``sweep``, ``sweep_gap``, ``borrowed``), the keys of its
entry (``KEYS``) and ``rows(tables, budget)``, its rows as :class:`~hkt.report.reading.ClaimRow`
(a verdict as a value, beside the text that says it). The YAML's order is the rows' order;
its ``section`` puts a row among the paper's claims or among what limits our values. Each
file's docstring states its verdict rule; the shared pieces are :mod:`.budget` (the minimum
budget every verdict drawn from runs is read against first), :mod:`.differences` (an accuracy
difference over seeds and by the error model, hkt/report/stats.py), :mod:`.analysed` and
:mod:`.settings_read`. Every verdict on a difference rests on the error model's interval (the
``paired_*`` columns of hkt.report.tables.DIFF_SCHEMA where both sides' predictions are read,
else ``ts_*``), never narrower than Welch's over seeds; where Welch's alone reads otherwise,
the row says so beside it. No verdict rests on a reading given the runs, nor on a bucket of the
exploratory tables.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import ModuleType

import polars as pl

from hkt.report.claims.budget import NO_BUDGET, Budget, load_minimum
from hkt.report.claims.config import SECTIONS, check_entry, load_claims_config
from hkt.report.reading import ClaimRow, render
from hkt.report.writers import markdown
from hkt.runs_frame import AggregateError

__all__ = ["Budget", "load_minimum", "NO_BUDGET", "claims_section", "claim_modules"]


def _claim_files() -> list[str]:
    """The modules of this package that are claims (they declare ``TABLES``)."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    return [n for n in names if hasattr(importlib.import_module(f"{__name__}.{n}"), "TABLES")]


def claim_modules(config: Mapping[str, dict] | None = None) -> list[tuple[str, str, ModuleType]]:
    """Each claim of config/report/claims.yaml in its order: (name, section, module), its
    entry checked against the keys its file declares; a claim file without an entry, or an
    entry without a file, is refused by name."""
    cfg = load_claims_config() if config is None else config
    files = _claim_files()
    if unlisted := sorted(set(files) - set(cfg)):
        raise AggregateError(f"config/report/claims.yaml has no entry for claim "
                             f"'{unlisted[0]}' (hkt/report/claims/{unlisted[0]}.py); add one")
    out = []
    for name, entry in cfg.items():
        if name not in files:
            raise AggregateError(f"config/report/claims.yaml: claim '{name}' has no file "
                                 f"hkt/report/claims/{name}.py; add it or remove the entry")
        module = importlib.import_module(f"{__name__}.{name}")
        check_entry(name, entry, module.KEYS)
        out.append((name, entry["section"], module))
    return out


def claims_section(*, main: pl.DataFrame, gap: pl.DataFrame, abl: pl.DataFrame,
                   tables: dict[str, pl.DataFrame], budget: Budget = NO_BUDGET,
                   borrowed: pl.DataFrame | None = None) -> list[str]:
    """The summary's section: one row per claim the tables can speak to. ``tables`` holds the
    analysis tables, the controls table, the learning-rate tables and the per-example readings
    by name, any of them absent. ``budget`` reads every verdict drawn from runs against the
    minimum budget. ``borrowed``: the borrowed runs (``hkt aggregate --borrow`` records), whose
    rule references a suite without its own reads its variants against."""
    empty = pl.DataFrame()
    named = {"main": main, "gap": gap, "ablation": abl, **tables}
    claims = claim_modules()  # config/report/claims.yaml read and checked once
    given = {name: named.get(name, empty) for _, _, module in claims for name in module.TABLES}
    given["rule_readings"] = tables.get("rule_readings")
    given["borrowed"] = borrowed
    rows: dict[str, list[ClaimRow]] = {section: [] for section in SECTIONS}
    for _, section, module in claims:
        rows[section] += module.rows(given, budget)
    paper_rows, limit_rows = rows["paper"], rows["limits"]
    if not paper_rows and not limit_rows:
        return []
    minimum = "" if budget.minimum is None else (
        f" {budget.minimum.note()} The score-cost row is an operation count, which reads the "
        "same at any budget.")
    limits = (" The rows on a control known to learn the task and on the learning rate read what "
              "limits our values (the data, the budget or the Transformers' recipe) by their own "
              "rules, in the same file." if limit_rows else "")
    return ["## The paper's claims, read against our runs", "",
            "For each claim: the paper's figure, ours, and whether our runs support it (direction "
            "and size), support its direction only (the paper's size lies outside our interval), "
            "refute it or cannot tell (the rules: `hkt/report/claims/`, one file a claim). A "
            "claim read at a CPU budget speaks of that budget only." + minimum + limits, "",
            markdown(["claim", "paper", "ours", "reading"], render(paper_rows + limit_rows)), ""]
