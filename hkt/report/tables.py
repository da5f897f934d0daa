"""The result tables from the runs frame (:mod:`hkt.runs_frame`), each with its display.

* :func:`main_table`: per task, T and model, mean ± std over seeds of validation and test
  accuracy, parameters, time per step; the paper's figure beside ours and the difference.
* :func:`gap_table`: HKT − MHA per task and T, ours and the paper's, with Welch's test over
  seeds (95% CI of the difference, p-value, significant at 5%?) and the test examples behind it.
* :func:`ablation_table`: the variants on one task against the full HKT, with the paper's L=1
  figure and the same test of each difference.
* :func:`with_test_interval`: each run's Wilson 95% interval of its test accuracy (runs.csv).

``*_display`` turns a table into the strings of its Markdown/LaTeX form
(:mod:`hkt.report.writers`). Accuracies are fractions in the runs frame, percentages here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from hkt import paper
from hkt.rule_references import RULE_REFERENCES
from hkt.report.report_settings import confidence
from hkt.report.stats import difference_with_test_set, welch_difference, wilson_interval
from hkt.report.writers import (EXAMPLES_MAX, EXAMPLES_MIN, Display, examples_text, fmt, pm,
                                signed)
from hkt.runs_frame import (EXTERNAL_BUDGETS, MIXER_FIELDS, MODEL_ORDER, TASK_ORDER, AggregateError,
                      most_common_length, order_key)

#: How an ablation row states its token-mixer settings (model.mixer): field -> format (in this order).
SETTING_FORMAT = {"levels": "L={}", "stride": "s={}", "fusion": "{}", "upsample": "{}"}


def seed_stats(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group: seeds, mean and sample std (percent) of val/test accuracy, params, ms/step."""
    return runs.group_by(by, maintain_order=True).agg(
        pl.col("seed").n_unique().alias("seeds"),
        (pl.col("val_accuracy").mean() * 100).alias("val_mean"),
        (pl.col("val_accuracy").std(ddof=1) * 100).alias("val_std"),
        (pl.col("test_accuracy").mean() * 100).alias("test_mean"),
        (pl.col("test_accuracy").std(ddof=1) * 100).alias("test_std"),
        pl.col("n_params").mean().round(0).cast(pl.Int64).alias("n_params"),
        pl.col("ms_per_step").mean().alias("ms_per_step"),
        pl.col("profile").unique().sort().str.join(",").alias("profile"),
    )


MAIN_SCHEMA = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "seeds": pl.UInt32,
    "val_mean": pl.Float64, "val_std": pl.Float64, "test_mean": pl.Float64,
    "test_std": pl.Float64, "n_params": pl.Int64, "ms_per_step": pl.Float64,
    "profile": pl.String, "budget": pl.String, "paper_mean": pl.Float64, "paper_std": pl.Float64,
    "lra_transformer": pl.Float64, "delta_vs_paper": pl.Float64, EXAMPLES_MIN: pl.Int64,
    EXAMPLES_MAX: pl.Int64,
    "steps": pl.Int64, "epochs": pl.Float64}


def main_table(runs: pl.DataFrame, variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """Per task, T and model: mean ± std over seeds, with the paper's figure and our difference.

    Columns: task, length, model, seeds, val_mean, val_std, test_mean, test_std, n_params,
    ms_per_step, profile, budget (each run's :func:`hkt.runs_frame.run_budget`), paper_mean, paper_std, delta_vs_paper (ours − paper, pp),
    lra_transformer (the LRA paper's vanilla Transformer at that T, for context),
    test_examples_min/_max (how many test examples each accuracy rests on: the fewest and the
    most over its runs; written as one number, or a range when runs differ).
    """
    sel = runs.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return pl.DataFrame(schema=MAIN_SCHEMA)
    t = seed_stats(sel, ["task", "length", "model"])
    budget = sel.group_by(["task", "length", "model"]).agg(
        pl.col("budget").unique().sort().str.join("; ").alias("budget"),
        pl.col("steps").max().alias("steps"),
        (pl.col("steps") * pl.col("batch_size") / pl.col("train_examples")).mean().alias("epochs"))
    t = t.join(budget, on=["task", "length", "model"], how="left")
    # an external baseline's "step" is its own (an n-gram pass, nothing for a rule): no time per
    # step of a training step to set beside the trained models'
    t = t.with_columns(pl.when(_external(pl.col("budget"))).then(None)
                       .otherwise(pl.col("ms_per_step")).alias("ms_per_step"))
    pm_, ps, lra = [], [], []
    for task, length, model in t.select("task", "length", "model").iter_rows():
        ref = paper.paper_accuracy(task, length or -1, model)
        pm_.append(ref.mean if ref else None)
        ps.append(ref.std if ref else None)
        ctx = paper.lra_published(task, length or -1, model)
        lra.append(ctx.mean if ctx else None)
    t = t.with_columns(pl.Series("paper_mean", pm_, dtype=pl.Float64),
                       pl.Series("paper_std", ps, dtype=pl.Float64),
                       pl.Series("lra_transformer", lra, dtype=pl.Float64))
    t = t.with_columns((pl.col("test_mean") - pl.col("paper_mean")).alias("delta_vs_paper"))
    examples = [_examples(runs_of(sel, task=task, length=length, model=model))
                for task, length, model in t.select("task", "length", "model").iter_rows()]
    t = t.with_columns(pl.Series(EXAMPLES_MIN, [n[0] for n in examples], dtype=pl.Int64),
                       pl.Series(EXAMPLES_MAX, [n[1] for n in examples], dtype=pl.Int64))
    return t.select(*MAIN_SCHEMA).sort(order_key("task", TASK_ORDER), "task", "length",
                  order_key("model", MODEL_ORDER), "model")


#: Columns of a difference between two groups of runs (gap, controls, ablation tables): over
#: seeds alone (Welch: ``ci_*``, ``p_value``); the error model with the test set's binomial
#: error (``ts_*``: :func:`hkt.report.stats.difference_with_test_set`); and with its paired
#: error where both sides' predictions are read (``paired_*``:
#: :func:`hkt.report.paired.with_paired`), the primary reading where present.
DIFF_SCHEMA = {"ci_low_pp": pl.Float64, "ci_high_pp": pl.Float64, "p_value": pl.Float64,
               "significant": pl.String, "ts_ci_low_pp": pl.Float64, "ts_ci_high_pp": pl.Float64,
               "ts_p_value": pl.Float64, "ts_significant": pl.String,
               "paired_ci_low_pp": pl.Float64, "paired_ci_high_pp": pl.Float64,
               "paired_p_value": pl.Float64, "paired_significant": pl.String,
               "seeds_a": pl.Int64, "seeds_b": pl.Int64, EXAMPLES_MIN: pl.Int64,
               EXAMPLES_MAX: pl.Int64}


def level() -> str:
    """The intervals' level (config/report/settings.yaml ``confidence``), ``95%``."""
    return f"{100 * confidence():g}%"


def alpha() -> str:
    """The tests' level, ``5%``."""
    return f"{100 * (1 - confidence()):.3g}%"


def difference_note() -> str:
    """What a difference table's caption says of its unit and its intervals."""
    return (f"The unit of replication is the seed. '{level()} CI, Welch over seeds', 'p (Welch)' "
            "and 'Welch significant': Welch's t over the seeds alone, no verdict's reading. 'seeds + test set, binomial' (ts): the error model "
            "(hkt/report/stats.py, docs/per-example.md): the seeds' variance plus the test "
            "set's binomial sampling variance p(1 − p)/N of each side, the sides counted as "
            "independent, on t with the seed terms' Welch–Satterthwaite degrees of freedom: "
            "never narrower than Welch's. One seed on a side: no interval.")


def runs_of(runs: pl.DataFrame, **where: Any) -> pl.DataFrame:
    """The runs whose columns equal ``where``'s values."""
    sel = runs
    for k, v in where.items():
        sel = sel.filter(pl.col(k) == v)
    return sel


def _examples(sel: pl.DataFrame) -> tuple[int | None, int | None]:
    """The fewest and the most test examples behind the accuracies (None where unknown)."""
    n = sel["test_examples"].drop_nulls()
    return (int(n.min()), int(n.max())) if len(n) else (None, None)


def _fewest_examples(sel: pl.DataFrame) -> int | None:
    n = sel["test_examples"].drop_nulls()
    return int(n.min()) if len(n) else None


def difference_columns(a: pl.DataFrame, b: pl.DataFrame) -> dict[str, Any]:
    """Welch's test of mean test accuracy (pp) of runs ``a`` minus runs ``b``, over seeds, and
    the same with the test set's sampling error added (``ts_*``)."""
    xa, xb = (a["test_accuracy"] * 100).to_list(), (b["test_accuracy"] * 100).to_list()
    d = welch_difference(xa, xb, confidence())
    t = difference_with_test_set(xa, xb, _fewest_examples(a), _fewest_examples(b), confidence())

    def num(v: float) -> float | None:
        return None if math.isnan(v) else v

    return {"ci_low_pp": num(d.ci_low), "ci_high_pp": num(d.ci_high), "p_value": num(d.p_value),
            "significant": d.verdict, "ts_ci_low_pp": num(t.ci_low),
            "ts_ci_high_pp": num(t.ci_high), "ts_p_value": num(t.p_value),
            "ts_significant": t.verdict, "paired_ci_low_pp": None, "paired_ci_high_pp": None,
            "paired_p_value": None, "paired_significant": None, "seeds_a": d.n_a, "seeds_b": d.n_b,
            **dict(zip((EXAMPLES_MIN, EXAMPLES_MAX), _examples(pl.concat([a, b]))))}


def gap_table(main: pl.DataFrame, runs: pl.DataFrame, a: str = paper.COMPARED_MODELS[0],
              b: str = paper.COMPARED_MODELS[1],
              variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """Per task and T: ours a − b (pp) with Welch's test over seeds (95% CI, p, significant at
    5%?, seeds and test examples), beside the paper's a − b and the difference of the two."""
    cols = ["task", "length", "test_mean", "paper_mean"]
    left = main.filter(pl.col("model") == a).select(cols)
    right = main.filter(pl.col("model") == b).select(cols)
    g = left.join(right, on=["task", "length"], suffix="_b").select(
        "task", "length",
        (pl.col("test_mean") - pl.col("test_mean_b")).alias("ours_pp"),
        (pl.col("paper_mean") - pl.col("paper_mean_b")).alias("paper_pp"),
    ).with_columns((pl.col("ours_pp") - pl.col("paper_pp")).alias("difference_pp"))
    sel = runs.filter(pl.col("variant").is_in(list(variants)))
    stats = [difference_columns(runs_of(sel, task=t, length=n, model=a),
                                runs_of(sel, task=t, length=n, model=b))
             for t, n in g.select("task", "length").iter_rows()]
    return pl.concat([g, pl.DataFrame(stats, schema=DIFF_SCHEMA)], how="horizontal")


def with_test_interval(runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` plus ``test_ci_low`` / ``test_ci_high``: the Wilson interval (config's confidence) of each run's
    test accuracy (correct answers out of ``test_examples``; null where that is unknown)."""
    lo, hi = [], []
    for acc, n in runs.select("test_accuracy", "test_examples").iter_rows():
        ci = wilson_interval(round(acc * n), n, confidence()) if acc is not None and n else (None, None)
        lo.append(ci[0])
        hi.append(ci[1])
    return runs.with_columns(pl.Series("test_ci_low", lo, dtype=pl.Float64),
                             pl.Series("test_ci_high", hi, dtype=pl.Float64))


def describe_variant(row: dict[str, Any]) -> str:
    """What an ablation row's model is, in words: its token-mixer settings where its config has
    them (``HKT L=3, s=2, dynamic, nearest``), else its FFN width (``MHA (d_ffn=128)``)."""
    name = row["model"].upper()
    settings = [f.format(row[k]) for k, f in SETTING_FORMAT.items() if row.get(k) is not None]
    if settings:
        return f"{name} {', '.join(settings)}"
    return f"{name} (d_ffn={row.get('d_ffn')})"


ABLATION_SCHEMA = {"variant": pl.String, "model": pl.String, "setting": pl.String,
                   "seeds": pl.UInt32, "val_mean": pl.Float64, "val_std": pl.Float64,
                   "test_mean": pl.Float64, "test_std": pl.Float64, "n_params": pl.Int64,
                   "ms_per_step": pl.Float64, "delta_pp": pl.Float64,
                   "paper_delta_pp": pl.Float64, **DIFF_SCHEMA, "levels": pl.Int64,
                   "task": pl.String, "length": pl.Int64}


DERIVED = "derived_from"  # column of ablation rows taken from another model's runs (derived_runs)


def derived_runs(runs: pl.DataFrame, derived: dict[str, tuple[str, int | None]], task: str,
                 main_variant: str = "main") -> pl.DataFrame:
    """Rows for the ablations a suite derives instead of training (``ablation.derived``): per
    ``name -> (model, levels)``, a copy of ``model``'s ``main_variant`` runs on ``task``, filed
    as HKT's variant ``name`` with ``levels`` and the source model in ``derived_from``. For
    ``levels1 -> (mha, 1)``: HKT with one level is MHA (same parameters and initial weights;
    tests/test_levels1_identity.py), so its row is MHA's, not three more trainings."""
    parts = []
    for name, (model, levels) in derived.items():
        src = runs.filter((pl.col("task") == task) & (pl.col("model") == model)
                          & (pl.col("variant") == main_variant))
        if src.is_empty():
            raise AggregateError(f"ablation '{name}' is derived from the {model} {main_variant} runs "
                                 f"on {task}, but there are none among the records; train them "
                                 f"(main.models) or train '{name}' itself (ablation.include)")
        parts.append(src.with_columns(pl.lit("hkt").alias("model"), pl.lit(name).alias("variant"),
                                      pl.lit(levels, dtype=pl.Int64).alias("levels"),
                                      pl.lit(model).alias(DERIVED)))
    return pl.concat(parts, how="diagonal_relaxed") if parts else runs.clear()


def ablation_table(runs: pl.DataFrame, task: str = paper.ABLATION_TASK, length: int | None = None,
                   full_variant: str = "main", main_variant: str = "main",
                   models: Sequence[str] = ("hkt", "mha"), subject: str = "hkt",
                   notes: Mapping[tuple[str, str], str] | None = None) -> pl.DataFrame:
    """Variants on one task against the full model ``subject`` (its ``full_variant``).

    Rows: every run of ``models`` on (task, T) (T defaults to the most common one), grouped by
    model and variant. Columns add ``setting`` (what the variant is, followed by ``notes`` of its
    (model, variant): what else it sets, e.g. ``lr=3e-4``), ``delta_pp`` (test accuracy minus the
    full variant's) and ``paper_delta_pp`` (the paper's −18.4 for L=1).
    """
    sel = runs.filter((pl.col("task") == task) & pl.col("model").is_in(list(models)))
    if length is None:
        length = most_common_length(sel)
    sel = sel.filter(pl.col("length") == length) if length is not None else sel.clear()
    if sel.is_empty():
        return pl.DataFrame(schema=ABLATION_SCHEMA)
    t = seed_stats(sel, ["model", "variant"]).join(
        sel.group_by(["model", "variant"]).agg(
            *(pl.col(k).first() for k in MIXER_FIELDS if k != "kernel_size"),
            pl.col("d_ffn").first()),
        on=["model", "variant"])
    ref = t.filter((pl.col("model") == subject) & (pl.col("variant") == full_variant))
    ref_acc = ref["test_mean"][0] if len(ref) else None
    if DERIVED in sel.columns:
        t = t.join(sel.group_by(["model", "variant"]).agg(pl.col(DERIVED).first()),
                   on=["model", "variant"], how="left")
    notes = notes or {}
    setting = [describe_variant(row)
               + (f", {notes[key]}" if (key := (row["model"], row["variant"])) in notes else "")
               + (f" (derived: the {row[DERIVED].upper()} runs, not trained again)"
                  if row.get(DERIVED) else "")
               for row in t.iter_rows(named=True)]
    paper_delta = [paper.ablation_delta(task, length, m, lv)
                   for m, lv in t.select("model", "levels").iter_rows()]
    t = t.with_columns(
        pl.Series("setting", setting, dtype=pl.String),
        (pl.col("test_mean") - ref_acc if ref_acc is not None
         else pl.lit(None, dtype=pl.Float64)).alias("delta_pp"),
        pl.Series("paper_delta_pp", paper_delta, dtype=pl.Float64),
        pl.lit(task).alias("task"), pl.lit(length, dtype=pl.Int64).alias("length"),
    )
    ref_runs = runs_of(sel, model=subject, variant=full_variant)
    stats = [difference_columns(runs_of(sel, model=m, variant=v), ref_runs)
             if (m, v) != (subject, full_variant) else dict.fromkeys(DIFF_SCHEMA)
             for m, v in t.select("model", "variant").iter_rows()]
    t = pl.concat([t, pl.DataFrame(stats, schema=DIFF_SCHEMA)], how="horizontal")
    rank = (pl.when((pl.col("model") == subject) & (pl.col("variant") == full_variant)).then(0)
              .when(pl.col("model") == subject).then(1).otherwise(2))
    main_first = pl.when(pl.col("variant") == main_variant).then(0).otherwise(1)
    t = t.sort(rank, order_key("model", MODEL_ORDER), main_first, "levels", "variant",
               nulls_last=True)
    return t.select(*ABLATION_SCHEMA)


def _external(budget: pl.Expr) -> pl.Expr:
    """Whether a main-table row's budget is an external baseline's (:data:`EXTERNAL_BUDGETS`)."""
    return pl.any_horizontal(*(budget.str.starts_with(b) for b in EXTERNAL_BUDGETS)).fill_null(False)


#: Where a step means nothing (an external baseline: no training step of a profile's budget).
NO_STEP = "—"
#: The mark on a row whose test set is smaller than another row's of the same table
#: (:func:`smaller_test_sets`); the table's notes name the sizes (:func:`test_sets_note`).
FEWER_EXAMPLES = "†"


def _groups(table: pl.DataFrame) -> list[tuple[Any, ...]]:
    """Each row's (task, T): the rows whose test sets are set side by side (one task's)."""
    keys = [c for c in ("task", "length") if c in table.columns]
    return list(table.select(keys).iter_rows()) if keys else [()] * len(table)


def smaller_test_sets(table: pl.DataFrame) -> list[bool]:
    """Per row of a table with test-example counts: whether its accuracies rest on fewer test
    examples than another row's of the same task and T (so a larger test-set error): the rows
    :data:`FEWER_EXAMPLES` marks. All False where every row of a task tested on as many."""
    if EXAMPLES_MIN not in table.columns:
        return [False] * len(table)
    fewest, groups = table[EXAMPLES_MIN].to_list(), _groups(table)
    most: dict[tuple[Any, ...], int] = {}
    for g, m in zip(groups, table[EXAMPLES_MAX].to_list()):
        if m is not None:
            most[g] = max(m, most.get(g, m))
    return [g in most and n is not None and n < most[g] for g, n in zip(groups, fewest)]


def test_sets_note(table: pl.DataFrame, label: str = "model") -> str:
    """The table's note where rows of one task tested on test sets of different sizes: per
    task and T, the sizes and the rows (by ``label``) on the smaller ones, marked
    :data:`FEWER_EXAMPLES`; empty otherwise."""
    marked = smaller_test_sets(table)
    if not any(marked):
        return ""
    parts = []
    groups = _groups(table)
    for g in dict.fromkeys(g for g, m in zip(groups, marked) if m):
        here = [i for i, h in enumerate(groups) if h == g]
        sizes = sorted({n for i in here for n in (table[EXAMPLES_MIN][i], table[EXAMPLES_MAX][i])
                        if n is not None})
        rows = ", ".join(dict.fromkeys(str(table[label][i]) for i in here if marked[i]))
        where = f"{g[0]} T={g[1]}: " if len(g) == 2 else ""
        parts.append(f"{where}{', '.join(map(str, sizes))} examples, the rows marked "
                     f"{FEWER_EXAMPLES} ({rows}) on fewer")
    return (f"{FEWER_EXAMPLES} Test sets differ in size between rows of one task ("
            + "; ".join(parts) + "): the marked rows' accuracies carry a larger test-set error "
            "than the others'; set them side by side with that in mind.")


def main_notes(main: pl.DataFrame) -> str:
    """What the main table's rows need said beside them: test sets of different sizes
    (:func:`test_sets_note`), and why an external baseline has no time per step."""
    external = main.filter(_external(pl.col("budget"))) if len(main) else main
    names = ", ".join(dict.fromkeys(RULE_REFERENCES.get(m, m) for m in external["model"]))
    step = (f"ms/step {NO_STEP}: an external baseline ({names}), whose steps, if any, are not "
            "a profile's training steps." if len(external) else "")
    return " ".join(filter(None, (test_sets_note(main), step)))


def _examples_cell(row: dict[str, Any], marked: bool) -> str:
    return (examples_text(row) or "") + (f" {FEWER_EXAMPLES}" if marked else "")


def main_display(main: pl.DataFrame) -> Display:
    header = ["task", "T", "model", "seeds", "budget", "val acc (%)", "test acc (%)",
              "test examples", "paper (%)", "Δ vs paper (pp)", "params", "ms/step"]
    rows = []
    for r, marked in zip(main.iter_rows(named=True), smaller_test_sets(main)):
        external = (r["budget"] or "").startswith(EXTERNAL_BUDGETS)
        rows.append([r["task"], str(r["length"]), RULE_REFERENCES.get(r["model"], r["model"]),
                     str(r["seeds"]),
                     r["budget"] or "",
                     pm(r["val_mean"], r["val_std"]), pm(r["test_mean"], r["test_std"]),
                     _examples_cell(r, marked),
                     pm(r["paper_mean"], r["paper_std"]) if r["paper_mean"] is not None else
                     (f"({r['lra_transformer']:.2f} LRA)" if r["lra_transformer"] is not None else ""),
                     signed(r["delta_vs_paper"]), fmt(r["n_params"]),
                     NO_STEP if external else fmt(r["ms_per_step"], 1)])
    return header, rows


def ci_text(r: dict[str, Any], prefix: str = "") -> str:
    """A difference's 95% interval, ``[-0.12, +1.30]``; '' without one (one seed). ``prefix``
    ``ts_``: the interval with the test set's error."""
    if r.get(f"{prefix}ci_low_pp") is None:
        return ""
    return f"[{signed(r[f'{prefix}ci_low_pp'])}, {signed(r[f'{prefix}ci_high_pp'])}]"


def test_set_header(paired: bool = False) -> list[str]:
    """The header cells of :func:`test_set_cells`, after a difference's seed-only columns."""
    cells = [f"{level()} CI, seeds + test set, binomial (pp)", "p, seeds + test set, binomial"]
    return cells + ([f"{level()} CI, seeds + test set, paired (pp)",
                     "p, seeds + test set, paired"] if paired else [])


def test_set_cells(r: dict[str, Any], paired: bool = False) -> list[str]:
    """A difference's interval and p with the test set's binomial error, and with its paired
    error (``paired``)."""
    cells = [ci_text(r, "ts_"), p_text(r.get("ts_p_value"))]
    return cells + ([ci_text(r, "paired_"), p_text(r.get("paired_p_value"))] if paired else [])


def seeds_header() -> list[str]:
    """The header cells of a difference over seeds alone (Welch)."""
    return [f"{level()} CI, Welch over seeds (pp)", "p (Welch)", f"Welch significant ({alpha()})"]


def p_text(v: float | None) -> str:
    """A p-value: three decimals, or scientific below 0.001."""
    return "" if v is None else f"{v:.3f}" if v >= 0.001 else f"{v:.1e}"


def gap_display(gap: pl.DataFrame) -> Display:
    header = ["task", "T", "HKT − MHA, ours (pp)", *seeds_header(), *test_set_header(True),
              "seeds", "test examples", "HKT − MHA, paper (pp)",
              "difference (pp)"]
    rows = [[r["task"], str(r["length"]), signed(r["ours_pp"]), ci_text(r), p_text(r["p_value"]),
             r["significant"] or "", *test_set_cells(r, True), f"{r['seeds_a']} vs {r['seeds_b']}",
             examples_text(r) or "",
             signed(r["paper_pp"]), signed(r["difference_pp"])] for r in gap.iter_rows(named=True)]
    return header, rows


def ablation_label(row: dict[str, Any]) -> str:
    """An ablation row's name: its model and variant (``hkt/main``, ``mha/main``): two models'
    ``main`` variants are two rows."""
    return f"{row['model']}/{row['variant']}"


def ablation_display(abl: pl.DataFrame) -> Display:
    header = ["model/variant", "setting", "seeds", "val acc (%)", "test acc (%)",
              "Δ vs HKT (pp)", *seeds_header(), *test_set_header(True),
              "test examples", "paper Δ (pp)", "params", "ms/step"]
    rows = [[ablation_label(r), r["setting"], str(r["seeds"]), pm(r["val_mean"], r["val_std"]),
             pm(r["test_mean"], r["test_std"]), signed(r["delta_pp"]), ci_text(r), p_text(r["p_value"]),
             r["significant"] or "", *test_set_cells(r, True), examples_text(r) or "",
             signed(r["paper_delta_pp"]), fmt(r["n_params"]), fmt(r["ms_per_step"], 1)]
            for r in abl.iter_rows(named=True)]
    return header, rows
