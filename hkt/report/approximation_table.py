"""The `approximation` table and figure (issue 16): per-level decay ratio ρ of the level-truncation
residual, trained against initialisation, from the rows :mod:`hkt.analysis.approximation` writes.

- :func:`approximation_table`: ρ per task, T, variant, layer and model state, pooled over heads
  and seeds (mean, std, range), with the residual and KL of keeping level 0 only and the share of
  heads in which every added level reduced the residual;
- :func:`approximation_figure`: score residual against levels kept L′ on a log scale, one line
  per layer, trained solid and initialisation dashed;
- :func:`findings`: what the numbers say, in sentences, beside :data:`CLAIM`;
- :func:`write_approximation`: all of it under an ``hkt aggregate`` output directory, and its
  section of the summary.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hkt.figures.analysis import approximation_residuals
from hkt.run_record import APPROXIMATION_SECTION, APPROXIMATION_STATES
from hkt.report.writers import fmt, markdown, pm, write_table

SECTION = APPROXIMATION_SECTION
STATES = APPROXIMATION_STATES
BY = ["task", "length", "variant"]

#: What the paper says (docs/design.md §4; arXiv 2604.08829's abstract).
CLAIM = ("The paper claims that HKT's approximation error splits into hierarchical, quantisation "
         "and optimisation terms and decays geometrically with the number of levels, provided "
         "each new level reduces the residual.")

#: How to read the table and the figure.
READING = ("ρ is the per-level decay ratio of the relative residual ‖S_{L′} − S_L‖_F / ‖S_L‖_F of "
           "the fused scores when only levels < L′ are kept (λ renormalised), fitted as "
           "log r = a + L′ log ρ over L′ = 1..L−1 (L′ = L is 0 by definition); ρ < 1 means each "
           "added level shrinks the residual by that factor. The same architecture at "
           "initialisation (the run's seed, untrained) separates what training produces from what "
           "the architecture imposes.")


def _section(df: pl.DataFrame) -> pl.DataFrame:
    if df.is_empty() or "section" not in df.columns:
        return pl.DataFrame()
    return df.filter(pl.col("section") == SECTION)


def _state_order() -> pl.Expr:
    return pl.col("quantity").replace_strict({s: i for i, s in enumerate(STATES)}, default=len(STATES))


def approximation_table(analyses: pl.DataFrame) -> pl.DataFrame:
    """ρ per task, T, variant, layer and state (``trained``/``init``), over heads and seeds."""
    rows = _section(analyses)
    if rows.is_empty():
        return pl.DataFrame()
    head = (rows.filter(pl.col("level") < 0)
            .pivot(on="metric", index=[*BY, "seed", "layer", "head", "quantity"], values="value"))
    first = (rows.filter((pl.col("level") == 1) & pl.col("metric").is_in(["score_residual", "kl"]))
             .pivot(on="metric", index=[*BY, "seed", "layer", "head", "quantity"], values="value")
             .rename({"score_residual": "residual_1", "kl": "kl_1"}))
    levels = (rows.group_by(*BY, "seed", "layer", "head", "quantity")
              .agg(pl.col("level").max().alias("levels")))
    joined = head.join(first, on=[*BY, "seed", "layer", "head", "quantity"], how="left").join(
        levels, on=[*BY, "seed", "layer", "head", "quantity"], how="left")
    return (joined.group_by(*BY, "layer", "quantity")
            .agg(pl.col("levels").max(), pl.col("seed").n_unique().alias("seeds"),
                 pl.len().alias("n"),
                 pl.col("rho").mean().alias("rho_mean"), pl.col("rho").std().alias("rho_std"),
                 pl.col("rho").min().alias("rho_min"), pl.col("rho").max().alias("rho_max"),
                 pl.col("rho_se").mean().alias("rho_se_mean"),
                 pl.col("residual_1").log().mean().exp().alias("residual_1"),
                 pl.col("kl_1").mean().alias("kl_1"),
                 pl.col("all_reduced").mean().alias("reduced_share"),
                 pl.col("examples").max().alias("examples"))
            .with_columns(_state_order().alias("_order"))
            .sort(*BY, "layer", "_order").drop("_order")
            .rename({"quantity": "state"}))


def approximation_display(t: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "T", "variant", "layer", "model", "L", "seeds", "heads × seeds",
              "ρ (mean ± std)", "ρ min–max", "mean se(ρ)", "residual, level 0 only",
              "KL, level 0 only", "each level reduced"]
    rows = [[r["task"], str(r["length"]), r["variant"], str(r["layer"]), r["state"], str(r["levels"]),
             str(r["seeds"]), str(r["n"]), pm(r["rho_mean"], r["rho_std"]),
             f"{fmt(r['rho_min'])}–{fmt(r['rho_max'])}", fmt(r["rho_se_mean"], 3),
             fmt(r["residual_1"], 3), fmt(r["kl_1"], 4), f"{100 * (r['reduced_share'] or 0):.0f}%"]
            for r in t.iter_rows(named=True)]
    return header, rows


def findings(analyses: pl.DataFrame) -> str:
    """What the measured ρ say, one sentence per task, T and variant (pooled over layers)."""
    rows = _section(analyses)
    if rows.is_empty():
        return "No HKT run was analysed, so there is no approximation measurement."
    heads = rows.filter(pl.col("level") < 0).pivot(
        on="metric", index=[*BY, "seed", "layer", "head", "quantity"], values="value")
    out = []
    for (task, length, variant), part in sorted(heads.group_by(BY), key=lambda kv: kv[0]):
        levels = int(rows.filter((pl.col("task") == task) & (pl.col("length") == length)
                                 & (pl.col("variant") == variant))["level"].max())
        said = []
        for state in STATES:
            sub = part.filter(pl.col("quantity") == state)
            if sub.is_empty():
                continue
            rho = sub["rho"].drop_nans().drop_nulls()
            where = "trained" if state == "trained" else "at initialisation"
            if rho.is_empty():
                said.append(f"{where} no ρ could be fitted")
                continue
            said.append(f"{where} ρ = {pm(rho.mean(), rho.std())} (range {rho.min():.2f}–"
                        f"{rho.max():.2f}); every added level reduced the residual in "
                        f"{int(sub['all_reduced'].sum())} of {sub.height} heads")
        note = ""
        if levels == 3:
            note = (" With L = 3 only two truncations lie below L, so ρ is the ratio of their "
                    "residuals and the geometric shape itself is not tested.")
        elif levels == 2:
            note = " With L = 2 a single truncation lies below L: there is no decay to fit."
        out.append(f"{task} (T={length}), {variant}, L = {levels}: " + "; ".join(said) + "." + note)
    return "\n".join(out)


def write_approximation(analyses: pl.DataFrame, out: Path, budget: str = ""
                        ) -> tuple[list[Path], list[str], pl.DataFrame]:
    """``out/tables/approximation.{md,csv,tex}`` and ``out/figures/approximation.png``, and the
    section of ``summary.md`` (the claim, how to read ρ, what the numbers say, the table and the
    figure), from one table and one reading. Written even without HKT analyses (saying so), so
    that a workflow can declare them. ``budget``: the analysed runs'
    (:func:`hkt.figures.common.budget_title`), in the figure's title. Returns the paths, the
    section and the table."""
    out = Path(out)
    table, said = approximation_table(analyses), findings(analyses)
    display = approximation_display(table)
    caption = (f"Approximation: per-level decay ratio ρ of the level-truncation residual. {CLAIM} "
               f"Measured: {' '.join(said.splitlines())}")
    written = write_table(table, display, out / "tables" / SECTION, caption)
    written.append(approximation_residuals(analyses, out / "figures" / f"{SECTION}.png", budget))
    section = ["## Approximation: does the truncation error decay geometrically in L?", "",
               CLAIM, "", READING, "", "What the numbers say:", "", said, "", markdown(*display),
               f"![residual vs levels kept](figures/{SECTION}.png) "
               f"([table](tables/{SECTION}.md), [csv](tables/{SECTION}.csv))", ""]
    return written, section, table
