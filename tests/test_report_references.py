"""The rule references in the report (hkt/rule_references.py) and the test set's own sampling error
(hkt/report/stats.py): the error's formula on worked numbers, where a value reads among the
rules, the claims rows that read each ListOps model and the paper's figure against them, and
the tables' captions and rows that carry them."""

from __future__ import annotations

import math

import polars as pl
import pytest
from scipy import stats

from hkt.rule_references import Line, lines, lines_note, reading
from hkt.report import claims
from hkt.report.build import write_all
from hkt.report.claims.budget import Minimum
from hkt.report.claims.rule_reach import rule_reach_claims
from hkt.report.claims.rule_reach_variants import variant_rule_reach_claims
from hkt.report.reading import Verdict
from hkt.report.stats import difference_with_test_set, mean_error, binomial_variance
from hkt.report.tables import main_table
from hkt.runs_frame import curves_from_records, runs_from_records
from test_report_aggregate import make_record

RULES = {"root_op_prior": 0.33, "depth1_rule": 0.5, "depth2_rule": 0.7, "depth3_rule": 0.85,
         "exact_rule": 1.0}


def test_the_test_sets_variance_is_binomial_in_percentage_points():
    assert binomial_variance(50.0, 2000) == pytest.approx(1e4 * 0.25 / 2000)  # 1.118 pp SE
    assert math.sqrt(binomial_variance(50.0, 2000)) == pytest.approx(1.118, abs=1e-3)
    assert binomial_variance(100.0, 2000) == 0.0 and binomial_variance(40.0, None) == 0.0


def test_the_error_of_a_mean_adds_the_seeds_and_the_test_set():
    values = [33.0, 33.8, 33.25]
    seeds = (0.4093 ** 2) / 3
    assert mean_error(values, 2000) == pytest.approx(
        math.sqrt(seeds + binomial_variance(sum(values) / 3, 2000)), rel=1e-3)
    assert mean_error([40.0], None) == 0.0  # one seed, no count: nothing to add


def test_the_difference_with_the_test_set_is_wider_than_over_seeds_alone():
    a, b = [35.8, 34.7, 36.1], [33.0, 33.8, 33.25]
    d = difference_with_test_set(a, b, 2000, 2000, 0.95)
    seeds = (sum((x - sum(a) / 3) ** 2 for x in a) / 2 / 3,
             sum((x - sum(b) / 3) ** 2 for x in b) / 2 / 3)
    var = sum(seeds) + binomial_variance(sum(a) / 3, 2000) + binomial_variance(sum(b) / 3, 2000)
    df = sum(seeds) ** 2 / sum(v ** 2 / 2 for v in seeds)  # the seed terms' alone
    assert d.diff == pytest.approx(2.1833, abs=1e-4)
    assert d.df == pytest.approx(df)
    assert d.ci_high - d.diff == pytest.approx(stats.t(df).ppf(0.975) * math.sqrt(var))
    assert not d.significant
    # with huge test sets it tends to Welch over seeds (wider by the tiny binomial terms only)
    big = difference_with_test_set(a, b, 10 ** 9, 10 ** 9, 0.95)
    assert big.p_value == pytest.approx(0.0189, abs=5e-4)
    assert "one seed on a side" in difference_with_test_set([1.0], b, 2000, 2000, 0.95).reason


REFS = [Line("root_op_prior", "root-operator prior", 34.0, 33.0, 2000),
        Line("depth1_rule", "depth-1 rule", 51.0, 50.0, 2000),
        Line("depth2_rule", "depth-2 rule", 74.0, 71.0, 2000)]


@pytest.mark.parametrize("value, error, text", [
    (33.5, 0.5, "at the root-operator prior (+0.50 ± "),
    (40.0, 0.5, "above the root-operator prior (+7.00 ± "),
    (40.0, 0.5, "below the depth-1 rule (-10.00 ± "),
    (20.0, 0.5, "below the root-operator prior (-13.00 ± "),
    (90.0, 0.5, "above the depth-2 rule (+19.00 ± "),
])
def test_a_value_reads_at_or_between_the_rules(value, error, text):
    assert text in reading(value, error, REFS, 0.95).text


def test_the_interval_of_a_reading_counts_both_errors():
    # 1.96·sqrt(1.0² + SE_rule²), SE_rule of 33 % on 2000 examples = 1.0514 pp
    half = 1.96 * math.sqrt(1.0 + 0.33 * 0.67 / 2000 * 1e4)
    assert reading(35.0, 1.0, REFS[:1], 0.95).text == f"at the root-operator prior (+2.00 ± {half:.2f} pp)"
    assert reading(35.0, 1.0, [], 0.95).text == ""


def records(rules: dict[str, float] = RULES, hkt: tuple[float, ...] = (0.36, 0.35, 0.37)):
    recs = [make_record(model="hkt", seed=s, test=v, val=v, test_examples=2000)
            for s, v in enumerate(hkt)]
    recs += [make_record(model=m, seed=0, test=v, val=v, n_params=0, test_examples=2000,
                         external=f"hkt.baselines.{m}", profile="paper",
                         config={"task": {"family": "listops", "max_length": 512},
                                 "model": {"name": m, "rule": f"rule {m}"}})
             for m, v in rules.items()]
    return runs_from_records(recs)


def test_the_runs_give_one_line_per_rule_lowest_first_and_the_captions_name_them():
    runs = records()
    got = lines(runs, "listops", 512)
    assert [ln.label for ln in got] == ["root-operator prior", "depth-1 rule", "depth-2 rule",
                                        "depth-3 rule", "exact evaluator"]
    assert [ln.test for ln in got] == pytest.approx([33.0, 50.0, 70.0, 85.0, 100.0])
    assert lines(runs, "imdb", 1024) == []
    assert lines_note(runs) == (
        "Rule references (test accuracy %, docs/listops.md: what a rule reading the expression "
        "to a known depth gets): listops T=512: root-operator prior 33.00, depth-1 rule 50.00, "
        "depth-2 rule 70.00, depth-3 rule 85.00, exact evaluator 100.00.")
    assert lines_note(runs.filter(pl.col("model") == "hkt")) == ""


def test_the_main_table_names_each_rule_for_what_it_means(tmp_path):
    runs = records()
    main = main_table(runs)
    assert main["model"].to_list() == ["hkt", *RULES]
    budgets = dict(main.select("model", "budget").iter_rows())
    assert budgets["depth2_rule"] == "rule reference: rule depth2_rule"
    write_all(runs, curves_from_records([], runs), tmp_path)
    text = (tmp_path / "tables" / "main.md").read_text()
    assert "| listops | 512 | depth-2 rule | 1 |" in text
    assert "Rule references (test accuracy %" in (tmp_path / "tables" / "convergence.md").read_text()


def test_the_claims_read_each_model_and_the_papers_figure_against_the_rules():
    main = main_table(records())
    (row,) = rule_reach_claims(main)
    assert row.title == "Which rule reference HKT reaches on listops (T=512)"
    # HKT 36.00 ± 1.00 over 3 seeds: +3.00 over the prior, within 1.96·sqrt(1/3 + 2.30 + 1.11)
    assert row.ours.startswith("36.00 ± 1.00 (3 seeds): at the root-operator prior (+3.00 ± ")
    assert row.reading == "at the root-operator prior"
    # the paper's 55.10 ± 0.29: above the depth-1 rule, below the depth-2 rule
    assert row.paper.startswith("HKT 55.10: above the depth-1 rule (+5.10 ± ")
    assert "below the depth-2 rule (-14.90 ± " in row.paper
    assert rule_reach_claims(main.filter(pl.col("model") == "hkt")) == []


def test_every_trained_variant_is_read_against_the_rules_too():
    """Issue 58: an ablation or learning-rate variant's runs get their reading as a main-table
    row does (three ablations read above the prior without one); with no rules of its own, a
    suite reads them from its reference records and names them; the main variant's runs are
    the main rows', not read twice."""
    variant = [make_record(model="hkt", variant="stride4", seed=0, test=0.40, val=0.40,
                           test_examples=2000)]
    runs = pl.concat([records(), runs_from_records(variant)], how="diagonal_relaxed")
    budget = claims.Budget(runs, Minimum(1, 1), "main")
    (row,) = variant_rule_reach_claims(budget)
    assert row.title == "Which rule reference HKT (stride4) reaches on listops (T=512)"
    # 40.00 on one seed: 7 pp over the prior, past 1.96·sqrt(1.2 + 1.1) ≈ 2.97
    assert row.ours.startswith("40.00 (1 seed): above the root-operator prior (+7.00 ± ")
    assert row.reading == "above the root-operator prior"
    # one seed below the minimum of two: the budget rule holds the verdict back, as elsewhere
    short = claims.Budget(runs, Minimum(1, 2), "main")
    assert variant_rule_reach_claims(short)[0].reading == (
        f"{Verdict.AT_THIS_BUDGET} (1 seed)")
    # the long suite: no rules of its own; those of its --borrow records, named
    alone = claims.Budget(runs_from_records(variant), Minimum(1, 1), "main")
    assert variant_rule_reach_claims(alone) == []
    reference = records().with_columns(pl.lit("docs/results/cpu/runs").alias("source"))
    (row,) = variant_rule_reach_claims(alone, reference)
    assert row.ours.endswith("; the rules' records: docs/results/cpu/runs")
    assert row.reading == "above the root-operator prior"



def test_a_variants_rule_row_gives_its_mean_as_the_tables_do():
    """Two seeds at 785 and 802 of 2,000 (39.675 % exactly): the rule row, the ablation table and
    the plateau row round it alike (issue 59's summary once said 39.67 in one row, 39.68 in the
    others: percent before or after the mean)."""
    from hkt.report.writers import pm

    two = [make_record(model="hkt", variant="lr1e3_steps20k", seed=s, test=t, val=0.42,
                       test_examples=2000) for s, t in ((0, 0.3925), (1, 0.401))]
    runs = pl.concat([records(), runs_from_records(two)], how="diagonal_relaxed")
    (row,) = variant_rule_reach_claims(claims.Budget(runs, Minimum(1, 1), "main"))
    table = main_table(runs_from_records(two), variants=("lr1e3_steps20k",)).row(0, named=True)
    assert pm(table["test_mean"], table["test_std"]) == "39.68 ± 0.60"
    assert row.ours.startswith("39.68 ± 0.60 (2 seeds): ")


def test_the_curves_name_each_rule_in_the_legend_not_on_the_panel(tmp_path, monkeypatch):
    """In the validation curves each rule line is named in the legend beside the panel: a name
    written on the line could lie under a model's curve."""
    from hkt.figures import suite as figures
    from hkt.runs_frame import load_records
    from test_report_aggregate import write_records

    hkt = [make_record(model="hkt", seed=s, val=v, test=v, test_examples=2000)
           for s, v in enumerate((0.36, 0.35))]
    recs = load_records([write_records(tmp_path / "runs", hkt)])
    curves = curves_from_records(recs)
    runs = pl.concat([runs_from_records(recs), records().filter(pl.col("model") != "hkt")],
                     how="diagonal_relaxed")
    caught = []
    monkeypatch.setattr(figures, "save", lambda fig, path: caught.append(fig) or path)
    figures.val_curves(curves, "unused.png", runs=runs)
    ax = caught[0].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0].startswith("hkt (2 seeds)")
    assert legend[1:] == ["root-operator prior 33.0", "depth-1 rule 50.0", "depth-2 rule 70.0",
                          "depth-3 rule 85.0", "exact evaluator 100.0"]
    assert not ax.texts  # nothing written inside the panel
