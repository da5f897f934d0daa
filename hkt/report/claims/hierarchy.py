"""The ablation: removing the hierarchy (L = 1) costs −18.4 pp on ListOps, read as an accuracy
difference (the ablation table's row of the paper's no-hierarchy variant against the full HKT)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hkt import paper
from hkt.report.claims.budget import NO_BUDGET, Budget
from hkt.report.claims.config import claim_config
from hkt.report.claims.differences import both, interval_text, size_text
from hkt.report.reading import ClaimRow

KEYS: tuple[str, ...] = ()
TABLES = ("ablation",)


def hierarchy_claim(abl: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[ClaimRow]:
    """The ablation row of the paper's no-hierarchy variant against the full HKT."""
    nh = paper.ABLATION_NO_HIERARCHY
    if abl.is_empty():
        return []
    sel = abl.filter((pl.col("model") == nh["model"]) & (pl.col("levels") == nh["levels"]))
    if sel.is_empty():
        return []
    r = sel.row(0, named=True)
    verdict, said = both(r, nh["delta_pp"])
    ours = interval_text({**r, "ours_pp": r["delta_pp"]}) + size_text(nh["delta_pp"], r)
    how = f"; {r['setting']}" if "derived" in (r.get("setting") or "") else ""
    # the two sides' runs: the ablated variant's (trained, or derived from MHA's) and the
    # full model's; a learning-rate variant beside them is another claim's
    sides = None if budget.main_variant is None else [r["variant"], budget.main_variant]
    steps = budget.steps(r.get("task"), r.get("length"), paper.COMPARED_MODELS, sides)
    title = claim_config("hierarchy")["title"].format(task=nh["task"], length=nh["length"])
    row = ClaimRow(title, f"{nh['delta_pp']:+.1f} pp", ours + how, verdict, said)
    return [budget.read(row, steps=steps, seeds=(r.get("seeds_a"), r.get("seeds_b")))]


def rows(tables: Mapping[str, pl.DataFrame], budget: Budget) -> list[ClaimRow]:
    return hierarchy_claim(tables["ablation"], budget)
