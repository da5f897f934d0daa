"""The summary's reading of the paper's claims: for each, what the paper says, what our runs
measured, and whether they **support** it, **refute** it or **cannot tell**.

The verdicts follow fixed rules on the tables the aggregate step has already built (nothing is
recomputed here), so that a reader can check each one:

- an accuracy difference (HKT − MHA per task; L = 1 − HKT for the hierarchy) is read for its
  direction and its size apart, from the error model's interval (:func:`_primary`: Welch's seed
  terms plus the test set's paired, else binomial, variance; hkt/report/stats.py): *supports* when
  the interval lies on the paper's side of zero and holds the paper's value (direction and size);
  *direction only* when it lies on the paper's side but the paper's value lies outside it;
  *refutes* when it lies on the other side of zero; *cannot tell* when it spans zero or the
  seeds cannot give one. A row at a budget other than the paper's reads the direction at that
  budget only, and says so;
- the score cost (≤ 4/3 for any L, 1.3125 for L = 3): an operation count, which the analytic
  formula settles; the measured time ratio is reported beside it, not judged against it;
- the kurtosis κ ≈ 33 of trained scores: *supports* when the paper's value lies within the
  range over layers, heads, levels and seeds of our trained HKT score κ, *refutes* when the
  whole range lies on one side of it; whether the scores are non-Gaussian at all (κ ≠ 1) is
  said beside it; this verdict and the decay's below name the budget of the runs they read
  (our `paper` profile, or another profile's steps: that budget's reading only);
- geometric decay of the truncation residual (ρ < 1 per added level): *supports* when every
  trained head's fitted ρ is below 1, *refutes* when the mean ρ of a layer is 1 or more,
  *cannot tell* otherwise;
- the kernel theory (a PSD sufficient condition, a rank bound): theorems, which runs cannot
  refute; we report how often their premises hold in trained heads.

Every verdict drawn from runs is read against a minimum budget first (:class:`Minimum`,
``verdict_min_steps`` and ``verdict_min_seeds`` of config/report.yaml): where the runs a row
reads trained for fewer steps or on fewer seeds, the row reads *cannot tell at this budget*
(what falls short in brackets), whatever its interval says. The cost row is an operation count,
which no run's budget changes.

Every verdict on a difference rests on the error model's interval (the ``paired_*`` columns of
hkt.report.tables.DIFF_SCHEMA where both sides' predictions are read, else ``ts_*``), never
narrower than Welch's over seeds; where Welch's alone reads otherwise, the row says so beside it.
No verdict rests on a reading given the runs, nor on a bucket of the exploratory tables.

Where runs keep their predictions (:mod:`hkt.report.per_example`, issue 58), two rows read them
example by example: the paper's mechanism ("HKT's gain comes from the hierarchy of operations":
HKT − MHA on the deepest group of ListOps test trees minus on the shallowest, by tree depth and
by the depth the answer needs: the contrast declared in config, with its own test over seeds
plus the paired test-set error; :func:`mechanism_claim`), and "which rule a model reaches",
against each rule on the same examples (t over the model's seeds plus the paired error).

Three further kinds of row read what limits our values against the paper's (issues 39, 48):

- per task with rule references (:mod:`hkt.rule_references`, docs/listops.md) and trained model:
  which rule its test mean reaches (*at* a rule when the 95% interval of their difference,
  seeds, test set and the rule's own test-set error counted, holds 0; else *above* and *below*
  the nearest), and the paper's figure for that model read the same way (confidence: config's);
  every other variant
  of a trained model (ablations, learning-rate and budget variants) read the same way, against
  the suite's own rules or else its ``--reference`` records' (:func:`variant_reference_claims`),
  so that every trained run of such a task gets its reading;

- a control known to learn the task (``paper.LEARNING_CONTROLS``: S4D) against the better of
  HKT and MHA (the higher test mean), from the controls table's error-model interval of the control
  minus that model: wholly above 0 → the control *climbs past* the Transformers: our data allow
  more than they reach, and their level is theirs (their recipe); spanning 0 → every model
  *stops at the same level*: the data or the budget is the limit at this budget, which the
  runs cannot tell apart; wholly below 0 → the control *stops below* them at this budget, which
  says nothing about the data (it needs its own recipe); no interval → *cannot tell*. Welch's
  reading over seeds alone is given beside it where it differs. A row at
  a budget other than the paper's says so;
- the learning rate (and the budget), from the learning-rate tables (present when the
  aggregate has runs at several settings: a peak rate and a number of steps): a model's
  plateau *moves* when its best setting by validation is not the reference setting (the lowest
  rate, then the fewest steps, of the runs read from ``--reference`` records: the profile's
  rate and budget) and its test mean there exceeds the reference's by more than the larger of
  the two seed stds; else it *does not move*; *cannot tell* when a side has one seed (no std).
  A plateau that moves is read again with the test set's error (each side's binomial error
  added, as the ``ts_*`` columns): where the 95% interval of the gain then holds 0, the row
  reads *moves over seeds; cannot tell with the test set's error (the verdict changes)*. Where
  the two settings' runs trained in different precisions (bf16 GPU runs beside an fp32 CPU
  reference), the row says so, and so does the each-at-best gap row below.
  Either way the row says how far the best setting's mean stays from the paper's figure for
  that model. A setting is named by its steps too where the model was trained for more than
  one budget. Without reference runs there is no such row. HKT − MHA with each model at its
  best setting is read as an accuracy difference above, against the paper's gap;
- the lead at a longer budget (issue 59: "HKT's lead holds at twice the budget"), per learning
  rate at which both models trained for more than one budget (the learning-rate gap's rows
  "both at one setting"): HKT − MHA at the longest budget read by :func:`difference_verdict`
  on the error model's interval (paired where both sides' runs have predictions, else binomial,
  and the row names the runs without) against the mean lead at the shortest (no test compares
  the two leads): *holds* when the interval lies above 0 (at its
  size when it holds the shorter budget's lead, at another size when not), *does not hold*
  when it lies below 0 (MHA leads), *cannot tell* when it holds 0 or there is none; no lead at
  the shorter budget reads *cannot tell* (nothing to hold). MHA catching up reads as the longer
  budget's interval reaching 0 (*cannot tell*) or below it (*does not hold*) while the shorter
  budget's stays above 0, beside it in the row. Every learning-rate gap row carries its paired
  interval or why it has none (:func:`hkt.report.per_example.paired_or_why`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from hkt import paper
from hkt.rule_references import RULE_REFERENCES, Line, figure_error, is_reference, lines, reading
from hkt.report.report_settings import confidence
from hkt.report.stats import binomial_variance, summary_difference_with_test_set
from hkt.report.sweep import EACH_AT_BEST, ONE_RATE, SETTING, THIS_SUITE
from hkt.errors import ConfigValueError
from hkt.runs_frame import EXTERNAL_BUDGETS, AggregateError
from hkt.value_checks import integer
from hkt.report.tables import level
from hkt.report.writers import learning_rate, markdown, pm

SUPPORTS, DIRECTION_ONLY, REFUTES, CANNOT_TELL = ("supports", "direction only", "refutes",
                                                  "cannot tell")
#: The one reading of a claim whose runs lie below the minimum budget (:class:`Minimum`).
AT_THIS_BUDGET = "cannot tell at this budget"
#: Where the minima live (beside the other configs).
REPORT_CONFIG = "report.yaml"


@dataclass(frozen=True)
class Minimum:
    """The least training (steps) and seeds a claim's runs need before the summary reads a
    verdict from them (config/report.yaml): below either, the claim reads
    :data:`AT_THIS_BUDGET`, since 12 smoke steps on one seed test the pipeline, not the paper."""

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
                f"than {self.seeds} seeds reads \"{AT_THIS_BUDGET}\", whatever its interval "
                f"says (the minima: verdict_min_steps, verdict_min_seeds of "
                f"config/{REPORT_CONFIG}).")


def load_minimum(path: Path | None = None) -> Minimum:
    """The minima of config/report.yaml (or ``path``), or an :class:`AggregateError` naming the
    key that is missing or not a positive whole number."""
    from hkt.config_compose import config_dir

    path = path or config_dir() / REPORT_CONFIG
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise AggregateError(f"cannot read the report's settings {path}: {e}") from e
    cfg = cfg if isinstance(cfg, dict) else {}
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

    def steps(self, task: str | Iterable[str] | None, length: int | Iterable[int] | None,
              models: Iterable[str], variants: Iterable[str] | None = None) -> list[int | None]:
        """The steps of the trained runs of ``models`` on ``task`` (one or several) at T =
        ``length`` (one or several), of ``variants`` (all when None)."""
        if self.runs is None or self.runs.is_empty():
            return []
        tasks = [task] if isinstance(task, str) else list(task or [])
        lengths = [length] if isinstance(length, int) else list(length or [])
        sel = self.runs.filter(pl.col("external").is_null() & pl.col("model").is_in(list(models)))
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

    def read(self, verdict: str, *, steps: Iterable[int | None] = (),
             seeds: Iterable[int | None] = ()) -> str:
        """``verdict``, or :data:`AT_THIS_BUDGET` with what falls short where the runs lie
        below the minimum."""
        short = "" if self.minimum is None else self.minimum.shortfall(steps, seeds)
        return f"{AT_THIS_BUDGET} ({short})" if short else verdict


NO_BUDGET = Budget()


def _primary(r: dict[str, Any]) -> tuple[float | None, float | None, float | None, str]:
    """A difference row's error-model interval, p and name: ``paired_*``, else ``ts_*``."""
    for prefix, how in (("paired_", "paired"), ("ts_", "binomial")):
        low, high = r.get(f"{prefix}ci_low_pp"), r.get(f"{prefix}ci_high_pp")
        if low is not None and high is not None:
            return low, high, r.get(f"{prefix}p_value"), f"seeds + test set, {how}"
    return None, None, None, "seeds + test set"


def _interval(r: dict[str, Any], key: str = "ours_pp") -> str:
    """A difference, its CI and p over seeds (Welch), then by the error model (the seeds and
    the test set: :func:`_primary`), or why a side has none."""
    ours = "?" if r.get(key) is None else f"{r[key]:+.2f}"
    if r.get("ci_low_pp") is None or r.get("ci_high_pp") is None:
        return f"{ours} pp (no interval: {r.get('significant') or 'too few seeds'})"
    p = "" if r.get("p_value") is None else f", p = {r['p_value']:.3g}"
    text = f"{ours} pp, Welch over seeds {level()} CI [{r['ci_low_pp']:+.2f}, {r['ci_high_pp']:+.2f}]{p}"
    low, high, tp, how = _primary(r)
    if low is not None:
        tp = "" if tp is None else f", p = {tp:.3g}"
        text += f"; {how} [{low:+.2f}, {high:+.2f}]{tp}"
    if r.get("paired_ci_low_pp") is None and r.get("paired_why"):
        text += f" (not paired: {r['paired_why']})"
    return text


def _both(r: dict[str, Any], claimed: float) -> str:
    """The verdict on a claimed difference by the error model's interval (:func:`_primary`),
    and, where Welch's over seeds alone reads otherwise, that reading beside it."""
    seeds = difference_verdict(r.get("ci_low_pp"), r.get("ci_high_pp"), claimed)
    low, high, _, how = _primary(r)
    if low is None:
        return seeds
    primary = difference_verdict(low, high, claimed)
    if primary == seeds:
        return f"{primary} ({how}, as over seeds alone)"
    return f"{primary} ({how}; over seeds alone: {seeds})"


def difference_verdict(low: float | None, high: float | None, claimed: float) -> str:
    """The reading of a claimed difference ``claimed`` (pp; its sign is the direction) from our
    95% CI [``low``, ``high``]: direction and size apart (the module's rules)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return CANNOT_TELL
    sign = 1 if claimed > 0 else -1
    if (low > 0 and sign > 0) or (high < 0 and sign < 0):
        return SUPPORTS if low <= claimed <= high else DIRECTION_ONLY
    if (high < 0 and sign > 0) or (low > 0 and sign < 0):
        return REFUTES
    return CANNOT_TELL


def _size(claimed: float, low: float | None, high: float | None,
          r: dict[str, Any] | None = None) -> str:
    """Whether the paper's value lies in our interval over seeds [``low``, ``high``] and, for a
    difference row ``r``, in the error model's (:func:`_primary`)."""
    if low is None or high is None:
        return ""
    where = "inside" if low <= claimed <= high else "outside"
    text = f"; the paper's {claimed:+.2f} pp lies {where} our interval over seeds"
    plow, phigh, _, how = _primary(r or {})
    if plow is not None:
        ts = "inside" if plow <= claimed <= phigh else "outside"
        text += f", {ts} the {how} one" + (" (the reading changes)" if ts != where else "")
    return text


def _budget(main: pl.DataFrame, task: str, length: int) -> str:
    rows = main.filter((pl.col("task") == task) & (pl.col("length") == length)
                       & pl.col("model").is_in(["hkt", "mha"]))
    profiles = sorted({p for p in rows["profile"].to_list() if p})
    if not profiles:
        return ""
    if profiles == [paper.PROFILE]:
        return f"at our `{paper.PROFILE}` profile (the paper's budget is not public)"
    epochs = [e for e in rows["epochs"].to_list() if e is not None] if "epochs" in rows.columns else []
    ep = f", {min(epochs):.2f} epochs" if epochs else ""
    return (f"at a {'/'.join(profiles)} budget{ep}, not the paper's: the direction at that "
            "budget, not the paper's value")


def accuracy_claims(gap: pl.DataFrame, main: pl.DataFrame,
                    budget: Budget = NO_BUDGET) -> list[list[str]]:
    """One row per task of the gap table: HKT − MHA, ours against the paper's."""
    rows = []
    for r in gap.iter_rows(named=True):
        if r.get("paper_pp") is None:
            continue
        verdict = _both(r, r["paper_pp"])
        why = _interval(r) + _size(r["paper_pp"], r.get("ci_low_pp"), r.get("ci_high_pp"), r)
        said = _budget(main, r["task"], r["length"])
        verdict += f" ({said})" if said else ""
        rows.append([f"HKT beats MHA on {r['task']} (T={r['length']})",
                     f"{r['paper_pp']:+.2f} pp", why,
                     budget.read(verdict, seeds=(r.get("seeds_a"), r.get("seeds_b")),
                                 steps=budget.main_steps(r["task"], r["length"],
                                                         paper.COMPARED_MODELS))])
    return rows


def hierarchy_claim(abl: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[list[str]]:
    """The ablation: removing the hierarchy (L = 1) costs −18.4 pp on ListOps."""
    nh = paper.ABLATION_NO_HIERARCHY
    if abl.is_empty():
        return []
    sel = abl.filter((pl.col("model") == nh["model"]) & (pl.col("levels") == nh["levels"]))
    if sel.is_empty():
        return []
    r = sel.row(0, named=True)
    verdict = _both(r, nh["delta_pp"])
    why = _interval({**r, "ours_pp": r["delta_pp"]}, "ours_pp") + _size(
        nh["delta_pp"], r.get("ci_low_pp"), r.get("ci_high_pp"), r)
    how = f"; {r['setting']}" if "derived" in (r.get("setting") or "") else ""
    # the two sides' runs: the ablated variant's (trained, or derived from MHA's) and the
    # reference's; a learning-rate variant beside them is another claim's
    sides = None if budget.main_variant is None else [r["variant"], budget.main_variant]
    steps = budget.steps(r.get("task"), r.get("length"), paper.COMPARED_MODELS, sides)
    return [[f"Removing the hierarchy (L = 1) hurts on {nh['task']} (T={nh['length']})",
             f"{nh['delta_pp']:+.1f} pp", why + how,
             budget.read(verdict, steps=steps, seeds=(r.get("seeds_a"), r.get("seeds_b")))]]


def cost_claim(cost: pl.DataFrame) -> list[list[str]]:
    """The score cost: analytic, with the measured time ratios beside it."""
    if cost.is_empty():
        return []
    analytic = cost.filter(pl.col("what").str.starts_with("analytic score FLOPs"))
    if analytic.is_empty():
        return []
    a = analytic.row(0, named=True)
    measured = cost.filter(pl.col("what").str.contains("time, measured"))
    times = ", ".join(f"{r['ratio']:.2f}× at {r['setting']}" for r in measured.iter_rows(named=True))
    verdict = SUPPORTS if a["paper"] is not None and math.isclose(a["ratio"], a["paper"]) \
        else REFUTES
    return [["Score computation costs ≤ 4/3 of MHA's (1.3125× at L = 3, s = 2)",
             f"{paper.SCORE_COST['levels3']}×",
             f"analytic {a['ratio']:.4f}× (an operation count)"
             + (f"; measured attention time: {times} (kernel speed, not operations)" if times else ""),
             f"{verdict} (as an operation count)"]]


def kurtosis_claim(kurt: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[list[str]]:
    """κ ≈ 33 for trained score distributions (d = 1 kurtosis of the score entries)."""
    if kurt.is_empty():
        return []
    sel = kurt.filter((pl.col("model") == "hkt") & (pl.col("quantity") == "scores"))
    if sel.is_empty():
        return []
    lo, hi = float(sel["kappa_min"].min()), float(sel["kappa_max"].max())
    claimed = paper.KURTOSIS
    verdict = SUPPORTS if lo <= claimed <= hi else REFUTES
    gaussian = "non-Gaussian (κ > 1)" if lo > 1 else (
        "Gaussian-like in places (κ ≤ 1 in some heads)")
    tasks = ", ".join(sorted(set(sel["task"].to_list())))
    return [["Trained score distributions are strongly non-Gaussian (Mardia κ ≈ 33)",
             f"κ ≈ {claimed:.0f}",
             f"trained HKT score κ {lo:.2f}–{hi:.2f} over layers, heads, levels and seeds "
             f"({tasks}): {gaussian}",
             budget.read(f"{verdict} the value{_analysed_budget(sel, budget)}; the scores are "
                         f"{gaussian}",
                         steps=_analysed_steps(sel, budget), seeds=_column(sel, "seeds"))]]


def _column(table: pl.DataFrame, name: str) -> list[Any]:
    """A table's column as a list; empty where the table lacks it."""
    return table[name].to_list() if name in table.columns else []


def _analysed_steps(table: pl.DataFrame, budget: Budget) -> list[int | None]:
    """The steps of the trained HKT runs an analysis table's rows read (by task, T, variant)."""
    steps: list[int | None] = []
    for row in table.select(c for c in ("task", "length", "variant") if c in table.columns) \
            .unique().iter_rows(named=True):
        steps += budget.steps(row.get("task"), row.get("length"), ["hkt"],
                              [row["variant"]] if row.get("variant") else None)
    return steps


def _analysed_budget(table: pl.DataFrame, budget: Budget) -> str:
    """The budget of the trained HKT runs an analysis table's rows read, in words, as the
    accuracy rows say theirs: at our paper profile, or at another budget (its steps), which the
    verdict then reads only; '' where the runs frame does not say."""
    if budget.runs is None or budget.runs.is_empty() or "profile" not in budget.runs.columns:
        return ""
    keys = [c for c in ("task", "length", "variant") if c in table.columns]
    sel = budget.runs.filter(pl.col("external").is_null() & (pl.col("model") == "hkt"))
    sel = sel.join(table.select(keys).unique(), on=keys) if keys else sel
    profiles = sorted({p for p in sel["profile"].to_list() if p})
    if not profiles:
        return ""
    if profiles == [paper.PROFILE]:
        return f" at our `{paper.PROFILE}` profile (the paper's budget is not public)"
    steps = sorted({n for n in sel["steps"].to_list() if n is not None})
    at = f" ({' and '.join(f'{n:,}' for n in steps)} steps)" if steps else ""
    many = len(profiles) > 1
    which = "those budgets" if many else "that budget"
    return (f" at our {' and '.join(f'`{p}`' for p in profiles)} profile{'s' if many else ''}"
            f"{at}, not the paper's budget: the reading of {which} only")


def decay_claim(approx: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[list[str]]:
    """Geometric decay of the truncation residual: the trained rows of the approximation table."""
    if approx.is_empty():
        return []
    trained = approx.filter(pl.col("state") == "trained")
    if trained.is_empty():
        return []
    means = trained["rho_mean"].drop_nulls().drop_nans()
    highs = trained["rho_max"].drop_nulls().drop_nans()
    if means.is_empty():
        return []
    if float(highs.max()) < 1:
        verdict = SUPPORTS
    elif float(means.max()) >= 1:
        verdict = REFUTES
    else:
        verdict = CANNOT_TELL
    levels = int(trained["levels"].max())
    caveat = (" With L = 3 only two truncations lie below L: ρ is a ratio of two residuals, the "
              "geometric shape itself is not tested." if levels == 3 else "")
    return [["The approximation error decays geometrically in L (ρ < 1 per added level)",
             "ρ < 1",
             f"trained ρ per layer {float(means.min()):.2f}–{float(means.max()):.2f} (mean over "
             f"heads and seeds), up to {float(highs.max()):.2f} in one head.{caveat}",
             budget.read(verdict + (_analysed_budget(trained, budget)
                                    if verdict != CANNOT_TELL else ""),
                         steps=_analysed_steps(trained, budget),
                         seeds=_column(trained, "seeds"))]]


def kernel_claim(kernel: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[list[str]]:
    """The kernel theorems: how often their premises hold in trained heads."""
    if kernel.is_empty() or "psd_condition_share" not in kernel.columns:
        return []
    sel = kernel.filter(pl.col("model") == "hkt")
    if sel.is_empty():
        return []
    share = float(sel["psd_condition_share"].mean())
    rank = ""
    if "gram_rank" in sel.columns and sel["gram_rank"].drop_nulls().len():
        rank = (f"; measured Gram rank {float(sel['gram_rank'].mean()):.1f} within the bound "
                f"{float(sel['gram_rank_bound'].mean()):.1f}")
    return [["The kernel is PSD under a sufficient condition; the Gram rank is bounded",
             "theorem",
             f"the PSD condition holds in {100 * share:.0f}% of trained HKT (run, layer, head) "
             f"cases{rank}",
             budget.read(f"{CANNOT_TELL} (a theorem: runs cannot refute it; its premise holds "
                         f"in {100 * share:.0f}% of the trained cases)",
                         steps=_analysed_steps(sel, budget), seeds=_analysed_seeds(sel, budget))]]


def _analysed_seeds(table: pl.DataFrame, budget: Budget) -> list[int]:
    """The seeds of the trained HKT runs an analysis table without a seeds column reads."""
    if budget.runs is None or budget.runs.is_empty():
        return []
    keys = [c for c in ("task", "length", "variant") if c in table.columns]
    sel = budget.runs.filter(pl.col("external").is_null() & (pl.col("model") == "hkt"))
    sel = sel.join(table.select(keys).unique(), on=keys) if keys else sel
    return sel.group_by(keys or ["model"]).agg(pl.col("seed").n_unique())["seed"].to_list()


def _stop(low: float | None, high: float | None, control: str, better: str = "") -> str:
    """Where a control known to learn the task stops against the better Transformer ``better``
    (the rule above), from the 95% CI [``low``, ``high``] of the control minus it."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return CANNOT_TELL
    if low > 0:
        return (f"{control} climbs past the Transformers: the data allow more, and the "
                "Transformers' level is theirs (their recipe)")
    if high < 0:
        than = f"the better Transformer ({better})" if better else "the better Transformer"
        return (f"{control} stops below {than} at this budget: it says nothing about the data "
                f"({control} needs its own recipe)")
    return ("every model stops at the same level: the data or the budget is the limit at this "
            "budget (the runs cannot tell which)")


def control_claims(controls: pl.DataFrame, main: pl.DataFrame,
                   budget: Budget = NO_BUDGET) -> list[list[str]]:
    """Per task, T and control known to learn the task: the control against the better of HKT
    and MHA (the controls table's rows), and against the paper's figures."""
    if controls.is_empty():
        return []
    sel = controls.filter(pl.col("model").is_in(list(paper.LEARNING_CONTROLS)))
    rows = []
    for (task, length, model), group in sel.group_by("task", "length", "model",
                                                      maintain_order=True):
        versus = sorted(group.iter_rows(named=True), key=lambda r: r["versus"])
        best = max(versus, key=lambda r: r["versus_mean"])
        name, other = model.upper(), best["versus"].upper()
        figures = ", ".join(f"{r['versus'].upper()} {r['versus_paper']:.2f}" for r in versus
                            if r["versus_paper"] is not None)
        behind = ", ".join(f"{name} − the paper's {r['versus'].upper()} "
                           f"{r['minus_paper_pp']:+.2f} pp" for r in versus
                           if r["minus_paper_pp"] is not None)
        ours = (f"{name} {pm(best['test_mean'], best['test_std'])}, "
                + ", ".join(f"{r['versus'].upper()} {pm(r['versus_mean'], r['versus_std'])}"
                            for r in versus)
                + f"; {name} − {other} (the better): "
                + _interval({**best, "ours_pp": best["difference_pp"]})
                + (f"; {behind}" if behind else ""))
        said = _budget(main, task, length)
        seeds = _stop(best.get("ci_low_pp"), best.get("ci_high_pp"), name, other)
        low, high, _, how = _primary(best)
        stop = seeds if low is None else _stop(low, high, name, other)
        stop += "" if low is None or stop == seeds else f" ({how}; over seeds alone: {seeds})"
        stop += f"; {said}" if said else ""
        steps = budget.main_steps(task, length, [model, *(r["versus"] for r in versus)])
        rows.append([f"Our data allow more than the Transformers reach on {task} (T={length}): "
                     f"a control known to learn it ({name}) climbs past them",
                     figures or "no figure", ours,
                     budget.read(stop, steps=steps,
                                 seeds=[n for r in versus
                                        for n in (r.get("seeds_a"), r.get("seeds_b"))])])
    return rows


def _setting(row: dict[str, Any], steps: bool, suffix: str = "") -> str:
    """A learning-rate table row's setting in words: its rate, with its steps where ``steps``
    (the model was trained for more than one budget). ``suffix`` picks the gap table's columns
    (``_a``, ``_b``)."""
    rate = learning_rate(row["lr" + suffix])
    return f"{rate} for {row['steps' + suffix]:,} steps" if steps else rate


def _moves(best: dict[str, Any], ref: dict[str, Any], steps: bool = False) -> str:
    """Whether a model's plateau moves from the reference setting ``ref`` to its best ``best``
    (rows of the learning-rate table; the rule above), over seeds and then with the test set's
    error, and what else differs between the two settings' runs (their precision)."""
    rate, at = _setting(best, steps), _setting(ref, steps)
    kind = "setting" if steps else "rate"
    if (best["lr"], best["steps"]) == (ref["lr"], ref["steps"]):
        return f"does not move: the reference {kind} {at} is the best by validation"
    if best["test_std"] is None or ref["test_std"] is None:
        return f"{CANNOT_TELL}: one seed at {rate} or {at} gives no seed spread"
    gain, spread = best["test_mean"] - ref["test_mean"], max(best["test_std"], ref["test_std"])
    word = "moves" if gain > spread else "does not move"
    than = "more" if gain > spread else "not more"
    text = f"{word}: {rate} − {at} is {gain:+.2f} pp, {than} than the seed spread ({spread:.2f})"
    if word == "moves" and best.get("test_examples") and ref.get("test_examples"):
        ts = summary_difference_with_test_set(
            best["test_mean"], best["test_std"] ** 2, int(best["seeds"]), best.get("test_examples"),
            ref["test_mean"], ref["test_std"] ** 2, int(ref["seeds"]), ref.get("test_examples"),
            confidence())
        if not math.isnan(ts.ci_low) and ts.ci_low <= 0:
            text = (f"moves over seeds; {CANNOT_TELL} with the test set's error (the verdict "
                    f"changes): {rate} − {at} is {gain:+.2f} pp, more than the seed spread "
                    f"({spread:.2f}), but its {level()} CI with the test set's error is "
                    f"[{ts.ci_low:+.2f}, {ts.ci_high:+.2f}]")
        elif not math.isnan(ts.ci_low):
            text += (f"; with the test set's error its {level()} CI [{ts.ci_low:+.2f}, "
                     f"{ts.ci_high:+.2f}] lies above 0 too")
    return text + _precisions((rate, best.get("precision")), (at, ref.get("precision")))


def _precisions(*sides: tuple[str, str | None]) -> str:
    """Where the runs compared trained in different precisions (each side: its setting in
    words and the precisions of its runs, from the learning-rate table), a sentence saying so:
    the difference then holds the precision (and the device) too. '' where they agree, or where
    a side's precision is not recorded (unknown, not different)."""
    known = [(what, prec) for what, prec in sides if prec]
    if len(known) < len(sides) or len({prec for _, prec in known}) < 2:
        return ""
    return ("; the runs compared differ in precision (" + ", ".join(
        f"{what}: {prec}" for what, prec in known) + "): the difference holds that change too")


def _reference_rows(sweep: pl.DataFrame) -> dict[tuple[str, int, str], dict[str, Any]]:
    """The learning-rate table's reference row of each (task, T, model): of those read from
    reference records, the one at the lowest rate, then the fewest steps (the profile's)."""
    refs = sweep.filter(pl.col("source") != THIS_SUITE).sort(["task", "length", "model", *SETTING])
    return {key: rows.row(0, named=True) for key, rows in
            refs.group_by("task", "length", "model", maintain_order=True)}


def _budgets_vary(sweep: pl.DataFrame, task: str, length: int) -> bool:
    """Whether a task's learning-rate table holds more than one budget (steps)."""
    here = sweep.filter((pl.col("task") == task) & (pl.col("length") == length))
    return here["steps"].n_unique() > 1


def learning_rate_claims(sweep: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[list[str]]:
    """Per task, T and Transformer of the learning-rate table that has reference runs: whether
    its plateau moves with the rate, and how far its best rate stays from the paper."""
    if sweep.is_empty():
        return []
    rows, refs = [], _reference_rows(sweep)
    sel = sweep.filter(pl.col("model").is_in(list(paper.COMPARED_MODELS)))
    for (task, length, model), group in sel.group_by("task", "length", "model",
                                                      maintain_order=True):
        bests = group.filter(pl.col("best"))
        ref = refs.get((task, length, model))
        if ref is None or bests.is_empty():
            continue
        steps = _budgets_vary(sweep, task, length)
        best = bests.sort(SETTING).row(0, named=True)
        tried = ", ".join(_setting(r, steps) for r in group.sort(SETTING).iter_rows(named=True))
        ours = (f"best by validation {_setting(best, steps)}: test "
                f"{pm(best['test_mean'], best['test_std'])}; reference {_setting(ref, steps)} "
                f"({ref['source']}): {pm(ref['test_mean'], ref['test_std'])}; "
                f"difference {best['test_mean'] - ref['test_mean']:+.2f} pp "
                f"({'settings' if steps else 'rates'}: {tried})")
        figure = paper.paper_accuracy(task, length, model)
        far = "" if figure is None else _from_paper(best["test_mean"], ref["test_mean"],
                                                    figure.mean, steps)
        what = "rate or the budget" if steps else "rate"
        rows.append([f"The Transformers' plateau on {task} (T={length}) is set by the learning "
                     f"{what} ({model.upper()})",
                     "no figure" if figure is None else f"{model.upper()} {figure.mean:.2f}",
                     ours, budget.read(_moves(best, ref, steps),
                                       steps=(best["steps"], ref["steps"]),
                                       seeds=(best.get("seeds"), ref.get("seeds"))) + far])
    return rows


def _from_paper(best: float, ref: float, figure: float, steps: bool = False) -> str:
    """How far the best setting's test mean stays from the paper's ``figure``, and how much of
    the reference setting's distance to it the best one closes."""
    side, kind = ("below" if best < figure else "above"), ("setting" if steps else "rate")
    return (f"; at its best {kind} still {abs(best - figure):.2f} pp {side} the paper's "
            f"{figure:.2f} (it closes {best - ref:+.2f} of the reference {kind}'s "
            f"{abs(ref - figure):.2f} pp)")


def tuned_gap_claims(sweep_gap: pl.DataFrame, sweep: pl.DataFrame,
                     budget: Budget = NO_BUDGET) -> list[list[str]]:
    """HKT − MHA with each model at its best rate by validation (the learning-rate gap table),
    read against the paper's gap as an accuracy difference; beside it, the gap with both at the
    reference rate where the learning-rate table ``sweep`` has one for both."""
    if sweep_gap.is_empty():
        return []
    a, b = paper.COMPARED_MODELS
    rows, refs = [], _reference_rows(sweep)
    for r in sweep_gap.filter(pl.col("comparison") == EACH_AT_BEST) \
            .iter_rows(named=True):
        pa, pb = (paper.paper_accuracy(r["task"], r["length"], m) for m in (a, b))
        if pa is None or pb is None:
            continue
        claimed = pa.mean - pb.mean
        steps = not sweep.is_empty() and _budgets_vary(sweep, r["task"], r["length"])
        rates = (f" ({a.upper()} at {_setting(r, steps, '_a')}, {b.upper()} at "
                 f"{_setting(r, steps, '_b')})")
        ref_a, ref_b = (refs.get((r["task"], r["length"], m)) for m in (a, b))
        shared = pl.DataFrame() if ref_a is None or ref_b is None else sweep_gap.filter(
            (pl.col("task") == r["task"]) & (pl.col("length") == r["length"])
            & (pl.col("comparison") == ONE_RATE) & (pl.col("lr_a") == ref_a["lr"])
            & (pl.col("steps_a") == ref_a["steps"]) & (pl.col("lr_b") == ref_b["lr"])
            & (pl.col("steps_b") == ref_b["steps"]))
        beside = "" if shared.is_empty() else (
            f"; both at the reference {'setting' if steps else 'rate'} {_setting(ref_a, steps)}: "
            + _interval(shared.row(0, named=True)))
        what = "setting (learning rate, steps)" if steps else "learning rate"
        precision = _precisions(*((f"{m.upper()} at {_setting(r, steps, k)}",
                                   _sweep_precision(sweep, r, m, k)) for m, k in ((a, "_a"),
                                                                                  (b, "_b"))))
        rows.append([f"{a.upper()} beats {b.upper()} with each model at its best {what} "
                     f"({r['task']}, T={r['length']})", f"{claimed:+.2f} pp",
                     _interval(r) + rates + _size(claimed, r.get("ci_low_pp"),
                                                  r.get("ci_high_pp"), r) + beside
                     + _grid_edge(sweep, r["task"], r["length"]) + precision,
                     budget.read(_both(r, claimed), steps=(r["steps_a"], r["steps_b"]),
                                 seeds=(r.get("seeds_a"), r.get("seeds_b")))])
    return rows


#: How the lead at a longer budget reads, by :func:`difference_verdict` of its interval against
#: the lead at the shorter budget (the rule of :func:`longer_budget_claims`).
LEAD_READINGS = {SUPPORTS: "holds (at its size at the shorter budget)",
                 DIRECTION_ONLY: "holds, at another size (the shorter budget's lead lies outside "
                                 "the interval)",
                 REFUTES: "does not hold: MHA leads at the longer budget",
                 CANNOT_TELL: "cannot tell (the interval holds 0: MHA may have caught up, or the "
                              "runs cannot tell the two apart)"}


def _lead(low: float | None, high: float | None, shorter: float) -> str:
    return LEAD_READINGS[difference_verdict(low, high, shorter)]


def longer_budget_claims(sweep_gap: pl.DataFrame,
                         budget: Budget = NO_BUDGET) -> list[list[str]]:
    """Per task, T and learning rate at which both models were trained for more than one budget
    (the learning-rate gap table's rows "both at one setting"): whether HKT's lead over MHA at
    the shortest budget holds at the longest. The lead at the longer budget is read by
    :func:`difference_verdict` against the lead at the shorter one (:data:`LEAD_READINGS`): its
    interval above 0 → *holds* (at its size, or at another where the shorter budget's lead lies
    outside it); below 0 → *does not hold* (MHA leads); holding 0, or none → *cannot tell*
    (MHA catching up reads so: the longer budget's interval reaching 0 or below while the
    shorter budget's stays above). Read over seeds (Welch) and over the test examples (paired,
    where both sides' runs have predictions; else with the test set's error, unpaired, and the
    row says why). No lead at the shorter budget (HKT − MHA ≤ 0): nothing to hold, *cannot
    tell*."""
    if sweep_gap.is_empty():
        return []
    a, b = (m.upper() for m in paper.COMPARED_MODELS)
    shared = sweep_gap.filter(pl.col("comparison") == ONE_RATE)
    rows = []
    for (task, length, lr), group in sorted(shared.group_by("task", "length", "lr_a"),
                                            key=lambda kv: str(kv[0])):
        steps = sorted(set(group["steps_a"].to_list()))
        if len(steps) < 2:
            continue
        short, long = (group.filter(pl.col("steps_a") == n).row(0, named=True)
                       for n in (steps[0], steps[-1]))
        ratio = steps[-1] / steps[0]
        times = "twice" if ratio == 2 else f"{ratio:g} times"
        lead = short["ours_pp"]
        low, high, _, how = _primary(long)
        if lead is None or lead <= 0:
            verdict = (f"{CANNOT_TELL} (no lead to hold: {a} − {b} is "
                       f"{'none' if lead is None else f'{lead:+.2f} pp'} at {steps[0]:,} steps)")
        else:
            seeds, model = (_lead(long.get("ci_low_pp"), long.get("ci_high_pp"), lead),
                            _lead(low, high, lead))
            verdict = (f"{model} ({how}, as over seeds alone)" if seeds == model else
                       f"{model} ({how}; over seeds alone: {seeds})")
        moved = "" if lead is None or long["ours_pp"] is None else (
            f" The lead moves {long['ours_pp'] - lead:+.2f} pp (a difference of means; no "
            "test compares the two budgets' leads)")
        ours = (f"at {steps[-1]:,} steps: {_interval(long)}. At {steps[0]:,} steps: "
                f"{_interval(short)}.{moved}")
        rows.append([f"{a}'s lead over {b} holds at {times} the budget ({task}, T={length}; "
                     f"lr {learning_rate(lr)}: {steps[-1]:,} against {steps[0]:,} steps)",
                     "not said (the paper's budget is not public)", ours,
                     budget.read(verdict, steps=(long["steps_a"],),
                                 seeds=(long.get("seeds_a"), long.get("seeds_b")))])
    return rows


def _sweep_precision(sweep: pl.DataFrame, r: dict[str, Any], model: str,
                     suffix: str) -> str | None:
    """The precisions of ``model``'s runs at the setting a learning-rate gap row ``r`` names
    (``suffix``: its ``_a`` or ``_b`` columns), from the learning-rate table; None if unknown."""
    if sweep.is_empty() or "precision" not in sweep.columns:
        return None
    sel = sweep.filter((pl.col("task") == r["task"]) & (pl.col("length") == r["length"])
                       & (pl.col("model") == model) & (pl.col("lr") == r["lr" + suffix])
                       & (pl.col("steps") == r["steps" + suffix]))
    return None if sel.is_empty() else (sel["precision"][0] or None)


def _grid_edge(sweep: pl.DataFrame, task: str, length: int) -> str:
    """Where a model's best rate is the highest or lowest rate tried, the grid's edge: a better
    rate may lie beyond it, untested."""
    sel = sweep.filter((pl.col("task") == task) & (pl.col("length") == length))
    if sel.is_empty():
        return ""
    top, bottom = sel["lr"].max(), sel["lr"].min()
    edge = [f"{m.upper()} {learning_rate(lr)}" for m, lr in
            sel.filter(pl.col("best")).select("model", "lr").iter_rows()
            if m in paper.COMPARED_MODELS and lr in (top, bottom)]
    return (f"; the best rate is an edge of the grid tried ({', '.join(sorted(edge))}): rates "
            "beyond it are untested" if edge else "")


def _main_error(r: dict[str, Any]) -> float:
    """The standard error (pp) of a main-table row's test mean: its seed spread over its seeds
    plus the test set's sampling error (hkt.report.stats)."""
    seeds = (r["test_std"] or 0.0) ** 2 / r["seeds"] if r.get("test_std") is not None else 0.0
    n = str(r.get("test_examples") or "").split("–")[0]
    return math.sqrt(seeds + binomial_variance(r["test_mean"], int(n) if n.isdigit() else None))


def reference_claims(main: pl.DataFrame, budget: Budget = NO_BUDGET,
                     paired: pl.DataFrame | None = None) -> list[list[str]]:
    """Per task, T and trained model with rule references (:mod:`hkt.rule_references`): which rule
    its test accuracy reaches, with its seed and test-set errors and the rule's test-set error;
    the paper's figure for the model read the same way (its error: its std over the paper's
    seeds, and a test set of our size). Where ``paired`` (task, length, model, reading: the
    per-example readings' :func:`hkt.report.per_example.rule_readings`) has the model, its
    reading is the paired one, example by example, instead (of the main variant's runs)."""
    main_variant = budget.main_variant or "main"
    by_example = {} if paired is None else {
        (t, n, m): text for t, n, m, text in
        (paired.filter(pl.col("variant") == main_variant) if "variant" in paired.columns
         else paired).select("task", "length", "model", "reading").iter_rows()}
    rows: list[list[str]] = []
    if main.is_empty() or not main["model"].is_in(list(RULE_REFERENCES)).any():
        return rows
    for (task, length), group in main.group_by("task", "length", maintain_order=True):
        refs = [Line(r["model"], RULE_REFERENCES[r["model"]], r["val_mean"], r["test_mean"],
                     int(r["test_examples"]) if str(r["test_examples"]).isdigit() else None)
                for r in group.iter_rows(named=True) if r["model"] in RULE_REFERENCES]
        refs.sort(key=lambda ln: list(RULE_REFERENCES).index(ln.model))
        if not refs:
            continue
        for r in group.iter_rows(named=True):
            if (r.get("budget") or "").startswith(EXTERNAL_BUDGETS):  # baselines: not read
                continue
            ours = (by_example.get((task, length, r["model"]))
                    or reading(r["test_mean"], _main_error(r), refs))
            figure = paper.paper_accuracy(task, length, r["model"])
            theirs = "no figure"
            if figure is not None:
                err = figure_error(figure.mean, figure.std, paper.SEEDS, refs[0].test_examples)
                theirs = (f"{r['model'].upper()} {figure.mean:.2f}: "
                          f"{reading(figure.mean, err, refs)}")
            rows.append([f"Which rule reference {r['model'].upper()} reaches on {task} "
                         f"(T={length})", theirs,
                         f"{pm(r['test_mean'], r['test_std'])} ({r['seeds']} seeds): {ours}",
                         budget.read(ours.split(" (")[0], seeds=[r["seeds"]],
                                     steps=budget.main_steps(task, length, [r["model"]]))])
    return rows


def variant_reference_claims(budget: Budget, reference: pl.DataFrame | None = None,
                             paired: pl.DataFrame | None = None) -> list[list[str]]:
    """Per task, T, trained model and variant other than the main one (ablations, learning-rate
    and budget variants: ``budget.runs``, the suite's own runs): which rule reference its test
    accuracy reaches, read as :func:`reference_claims` reads a main-table row, so that every
    trained run of a task with rules gets its reading. The rules are the suite's own runs', else
    those among the ``reference`` runs (``--reference`` records, which the row names). Where
    ``paired`` (:func:`reference_claims`' readings, with their variant) has the model and
    variant, its reading is the paired one, example by example, instead."""
    by_example = {} if paired is None or "variant" not in paired.columns else {
        (t, n, v, m): text for t, n, v, m, text in paired.select(
            "task", "length", "variant", "model", "reading").iter_rows()}
    runs = budget.runs
    if runs is None or runs.is_empty():
        return []
    main_variant = budget.main_variant or "main"
    trained = runs.filter(pl.col("external").is_null() & (pl.col("variant") != main_variant))
    rows: list[list[str]] = []
    for (task, length, model, variant), group in sorted(
            trained.group_by("task", "length", "model", "variant"), key=lambda kv: str(kv[0])):
        refs, where = lines(runs, task, length), ""
        if not refs and reference is not None:
            refs = lines(reference, task, length)
            sources = sorted({str(s) for s in reference.filter(
                is_reference(reference) & (pl.col("task") == task)
                & (pl.col("length") == length))["source"].to_list() if s})
            where = f"; the rules' records: {', '.join(sources)}" if refs and sources else ""
        if not refs:
            continue
        test = group["test_accuracy"]  # mean, then percent: as the tables (39.675 is 39.68 in both)
        n = group["test_examples"].drop_nulls()
        r = {"test_mean": float(test.mean()) * 100, "seeds": group["seed"].n_unique(),
             "test_std": None if len(test) < 2 else float(test.std(ddof=1)) * 100,
             "test_examples": str(int(n.min())) if len(n) else None}
        paired_reading = by_example.get((task, length, variant, model))
        if paired_reading:  # read against the rules' answers in the task's facts
            ours, where = paired_reading, ""
        else:
            ours = reading(r["test_mean"], _main_error(r), refs)
        rows.append([f"Which rule reference {model.upper()} ({variant}) reaches on {task} "
                     f"(T={length})", "no figure (a variant)",
                     f"{pm(r['test_mean'], r['test_std'])} ({r['seeds']} "
                     f"seed{'' if r['seeds'] == 1 else 's'}): {ours}{where}",
                     budget.read(ours.split(" (")[0], seeds=[r["seeds"]],
                                 steps=budget.steps(task, length, [model], [variant]))])
    return rows


def mechanism_claim(mechanism: pl.DataFrame, budget: Budget = NO_BUDGET) -> list[list[str]]:
    """The paper's mechanism, "HKT's gain comes from the hierarchy of operations", read on the
    trees' depth and on the depth their answer needs, one row each (the per-example readings'
    :func:`hkt.report.per_example.mechanism_table`): *supports* when the paired interval of
    (HKT − MHA on the deepest group of test examples) − (HKT − MHA on the shallowest) lies
    above 0, *refutes* when below (the gain is larger on shallow trees), *cannot tell* when it
    spans 0 or one depth spans both groups."""
    rows = []
    a, b = (m.upper() for m in paper.COMPARED_MODELS)
    for r in mechanism.iter_rows(named=True):
        third = f"of {r['groups']} groups"
        if r["difference_pp"] is None:
            ours, verdict = f"by {r['measure']}, no reading: {r['reason']}", CANNOT_TELL
        else:
            ours = (f"by {r['measure']}: {a} − {b} on the deepest {third} ({r['deep']}, "
                    f"{r['deep_examples']} examples) {r['deep_pp']:+.2f} pp, on the shallowest "
                    f"({r['shallow']}, {r['shallow_examples']}) {r['shallow_pp']:+.2f} pp; "
                    f"deep − shallow {r['difference_pp']:+.2f} pp")
            low, high = r["paired_ci_low_pp"], r["paired_ci_high_pp"]
            if low is None or high is None:
                ours, verdict = f"{ours}, no interval: {r['reason']}", CANNOT_TELL
            else:
                p = "" if r["paired_p_value"] is None else f", p = {r['paired_p_value']:.3g}"
                ours += (f", {100 * r['confidence']:g}% CI [{low:+.2f}, {high:+.2f}]{p} (the "
                         "contrast declared in config, over seeds plus the paired test-set error)")
                verdict = SUPPORTS if low > 0 else REFUTES if high < 0 else CANNOT_TELL
        main = r.get("variant") in (None, budget.main_variant or "main")
        steps = (budget.main_steps(r["task"], r["length"], list(paper.COMPARED_MODELS)) if main
                 else budget.steps(r["task"], r["length"], paper.COMPARED_MODELS, [r["variant"]]))
        which = "" if main else f"; {r['variant']}"
        rows.append([f"{a}'s gain comes from the hierarchy of operations: {a} − {b} is larger on "
                     f"deeper trees ({r['task']}, T={r['length']}{which}; by {r['measure']})",
                     "said, no figure", ours,
                     budget.read(verdict, steps=steps, seeds=(r["seeds_a"], r["seeds_b"]))])
    return rows


def claims_section(*, main: pl.DataFrame, gap: pl.DataFrame, abl: pl.DataFrame,
                   tables: dict[str, pl.DataFrame], budget: Budget = NO_BUDGET,
                   reference: pl.DataFrame | None = None) -> list[str]:
    """The summary's section: one row per claim the tables can speak to. ``tables`` holds the
    analysis tables (kurtosis, kernel, approximation, cost), the controls table (controls) and
    the learning-rate tables (sweep, sweep_gap) by name, any of them absent. ``budget`` reads
    every verdict drawn from runs against the minimum budget (the cost row is an operation
    count, which no run's budget changes). ``reference``: the ``--reference`` records' runs,
    whose rule references a suite without its own reads its variants against."""
    empty = pl.DataFrame()
    paper_rows = [*accuracy_claims(gap, main, budget), *hierarchy_claim(abl, budget),
                  *cost_claim(tables.get("cost", empty)),
                  *kurtosis_claim(tables.get("kurtosis", empty), budget),
                  *decay_claim(tables.get("approximation", empty), budget),
                  *kernel_claim(tables.get("kernel", empty), budget)]
    paper_rows += mechanism_claim(tables.get("mechanism", empty), budget)
    limit_rows = [*reference_claims(main, budget, tables.get("rule_readings")),
                  *variant_reference_claims(budget, reference, tables.get("rule_readings")),
                  *control_claims(tables.get("controls", empty), main, budget),
                  *learning_rate_claims(tables.get("sweep", empty), budget),
                  *tuned_gap_claims(tables.get("sweep_gap", empty), tables.get("sweep", empty),
                                    budget),
                  *longer_budget_claims(tables.get("sweep_gap", empty), budget)]
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
            "refute it or cannot tell (the rules: `hkt/report/claims.py`). A claim read at a CPU "
            "budget speaks of that budget only." + minimum + limits, "",
            markdown(["claim", "paper", "ours", "reading"], paper_rows + limit_rows), ""]
