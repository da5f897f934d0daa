"""The summary's reading of the paper's claims (hkt/report/claims/): each verdict follows its
stated rule from the tables, and a CPU budget is said to read the direction only."""

from __future__ import annotations

import polars as pl
import pytest

from hkt import paper
from hkt.report import claims
from hkt.report.claims.accuracy import accuracy_claims
from hkt.report.claims.budget import Minimum
from hkt.report.claims.cost import cost_claim
from hkt.report.claims.decay import decay_claim
from hkt.report.claims.differences import difference_verdict
from hkt.report.claims.hierarchy import hierarchy_claim
from hkt.report.claims.kernel import kernel_claim
from hkt.report.claims.kurtosis import kurtosis_claim
from hkt.report.claims.step_time import step_time_claims
from hkt.report.reading import Verdict


def gap_row(task="listops", length=512, ours=5.0, low=2.0, high=8.0, p=0.01, paper_pp=4.77):
    return {"task": task, "length": length, "ours_pp": ours, "ci_low_pp": low, "ci_high_pp": high,
            "p_value": p, "significant": "yes", "paper_pp": paper_pp}


def main_rows(profile="paper", epochs=3.33, task="listops", length=512):
    return pl.DataFrame([{"task": task, "length": length, "model": m, "profile": profile,
                          "epochs": epochs} for m in ("hkt", "mha")])


@pytest.mark.parametrize("low, high, claimed, verdict", [
    (0.5, 2.0, +1.0, Verdict.SUPPORTS), (0.5, 2.0, +4.77, Verdict.DIRECTION_ONLY),
    (-2.0, -0.5, +1.0, Verdict.REFUTES), (-0.5, 2.0, +1.0, Verdict.CANNOT_TELL),
    (-0.5, 6.0, +4.77, Verdict.CANNOT_TELL),  # the paper's size fits, its direction is not shown
    (-3.0, -1.0, -2.0, Verdict.SUPPORTS), (-3.70, -0.66, -18.4, Verdict.DIRECTION_ONLY),
    (1.0, 3.0, -18.4, Verdict.REFUTES), (None, None, +1.0, Verdict.CANNOT_TELL),
])
def test_a_difference_is_read_for_direction_and_size_from_its_interval(low, high, claimed, verdict):
    assert difference_verdict(low, high, claimed) == verdict


def test_accuracy_claim_states_the_interval_the_papers_size_and_the_budget():
    gap = pl.DataFrame([gap_row()])
    (row,) = accuracy_claims(gap, main_rows())
    assert row.title == "HKT beats MHA on listops (T=512)" and row.paper == "+4.77 pp"
    assert "95% CI [+2.00, +8.00]" in row.ours and "the paper's +4.77 pp lies inside" in row.ours
    assert row.reading == "supports (at our `paper` profile (the paper's budget is not public))"
    (cpu,) = accuracy_claims(pl.DataFrame([gap_row(low=-1.0, high=3.0, paper_pp=7.47)]),
                             main_rows("cpu", 1.42))
    assert cpu.reading.startswith("cannot tell (at a cpu budget, 1.42 epochs, not the paper's")
    (out,) = accuracy_claims(pl.DataFrame([gap_row(ours=1.0, low=0.2, high=1.8)]),
                             main_rows())
    assert "lies outside our interval" in out.ours and out.reading.startswith("direction only")


def test_the_hierarchy_claim_reads_the_levels1_row_and_says_it_was_derived():
    abl = pl.DataFrame([{"model": "hkt", "levels": 1, "delta_pp": -1.17, "ci_low_pp": -2.34,
                         "ci_high_pp": 0.01, "p_value": 0.051, "significant": "no",
                         "setting": "HKT L=1 (derived: the MHA runs, not trained again)"}])
    (row,) = hierarchy_claim(abl)
    assert row.paper == f"{paper.ABLATION_NO_HIERARCHY['delta_pp']:+.1f} pp"
    assert row.reading == Verdict.CANNOT_TELL and "derived: the MHA runs" in row.ours
    assert "lies outside our interval" in row.ours


def test_kurtosis_cost_decay_and_kernel_readings():
    kurt = pl.DataFrame({"model": ["hkt", "hkt"], "quantity": ["scores", "scores"],
                         "task": ["listops", "imdb"], "kappa_min": [1.5, 2.0],
                         "kappa_max": [4.0, 9.0]})
    (k,) = kurtosis_claim(kurt)
    assert k.reading == "refutes the value; the scores are non-Gaussian (κ > 1)"
    assert kurtosis_claim(kurt.with_columns(pl.lit(40.0).alias("kappa_max")))[0].reading \
        .startswith("supports")
    cost = pl.DataFrame({"key": ["analytic", "time"],
                         "what": ["analytic score FLOPs (L=3, s=2)", "attention fwd+bwd time, measured"],
                         "setting": ["Σ_l s^(-2l)", "T=512 (cpu)"], "ratio": [1.3125, 2.5],
                         "paper": [1.3125, None]})
    (c,) = cost_claim(cost)
    assert c.reading == "supports (as an operation count)" and "2.50× at T=512 (cpu)" in c.ours
    assert c.verdict is Verdict.SUPPORTS  # the cost row is found by its key, not its text
    approx = pl.DataFrame({"state": ["trained", "trained", "init"], "levels": [3, 3, 3],
                           "rho_mean": [0.87, 1.13, 0.3], "rho_max": [1.03, 1.42, 0.36]})
    (d,) = decay_claim(approx)
    assert d.reading == Verdict.REFUTES and "not tested" in d.ours
    below = approx.with_columns(pl.lit(0.8).alias("rho_mean"), pl.lit(0.9).alias("rho_max"))
    assert decay_claim(below)[0].reading == Verdict.SUPPORTS
    mixed = approx.with_columns(pl.lit(0.8).alias("rho_mean"), pl.lit(1.1).alias("rho_max"))
    assert decay_claim(mixed)[0].reading == Verdict.CANNOT_TELL
    kernel = pl.DataFrame({"model": ["hkt"], "psd_condition_share": [0.0], "gram_rank": [181.4],
                           "gram_rank_bound": [192.0]})
    (g,) = kernel_claim(kernel)
    assert g.reading.startswith("cannot tell (a theorem") and "0%" in g.ours and "181.4" in g.ours


def test_the_section_is_empty_without_anything_to_read():
    empty = pl.DataFrame()
    assert claims.claims_section(main=empty, gap=empty, abl=empty, tables={}) == []
    section = claims.claims_section(main=main_rows(), gap=pl.DataFrame([gap_row()]), abl=empty,
                                    tables={})
    assert section[0] == "## The paper's claims, read against our runs"
    assert "| HKT beats MHA on listops (T=512) |" in "\n".join(section)


@pytest.mark.parametrize("hkt_ms, verdict", [
    (12.0, Verdict.SUPPORTS),     # 1.20× of MHA's 10 ms: below 4/3 × 0.95 = 1.267
    (13.3, Verdict.CANNOT_TELL),  # 1.33×: within ±5% of 4/3
    (25.0, Verdict.REFUTES),      # 2.50×: above 4/3 × 1.05 = 1.40
])
def test_the_step_time_is_read_against_the_score_bound_with_its_noise_margin(hkt_ms, verdict):
    """The demonstration claim (hkt/report/claims/step_time.py): each branch of its rule."""
    main = main_rows().with_columns(pl.Series("ms_per_step", [hkt_ms, 10.0]),
                                    pl.Series("seeds", [3, 3]))
    (row,) = step_time_claims(main)
    assert row.verdict is verdict and row.reading.startswith(f"{verdict} (the time of this")
    assert row.title == ("HKT's training step costs at most 4/3 of MHA's in time, as its score "
                         "operations do (listops, T=512)")
    assert f"{hkt_ms / 10:.2f}×" in row.ours
    assert row.paper == "≤ 1.333× in operations (time not said)"
    short = claims.Budget(pl.DataFrame({"external": [None], "model": ["hkt"], "task": ["listops"],
                                        "length": [512], "variant": ["main"], "steps": [12]}),
                          Minimum(1000, 2), "main")
    assert step_time_claims(main, short)[0].verdict is Verdict.AT_THIS_BUDGET


def test_no_step_time_row_without_both_models_times():
    main = main_rows().with_columns(pl.Series("ms_per_step", [12.0, None]),
                                    pl.Series("seeds", [3, 3]))
    assert step_time_claims(main) == []
    assert step_time_claims(pl.DataFrame()) == []


def test_every_claim_file_has_its_entry_and_a_bad_entry_is_named():
    """config/report/claims.yaml: one entry per file of hkt/report/claims/ that is a claim, in the
    rows' order; a key missing or extra, an entry without a file or a file without an entry is
    refused naming the file, the claim and the key."""
    from hkt.report.claims.config import load_claims_config
    from hkt.runs_frame import AggregateError

    cfg = load_claims_config()
    names = [name for name, _, _ in claims.claim_modules(cfg)]
    assert names[:7] == ["accuracy", "hierarchy", "cost", "kurtosis", "decay", "kernel",
                         "mechanism"]
    assert names[7:13] == ["rule_reach", "rule_reach_variants", "controls", "learning_rate",
                           "tuned_gap", "longer_budget"]
    decay = {k: v for k, v in cfg["decay"].items() if k != "rho_limit"}
    with pytest.raises(AggregateError, match=r"claims.yaml: claim 'decay' has no key 'rho_limit'"):
        claims.claim_modules({**cfg, "decay": decay})
    with pytest.raises(AggregateError, match=r"claim 'cost' has a key 'limit' its file does not"):
        claims.claim_modules({**cfg, "cost": {**cfg["cost"], "limit": 1}})
    with pytest.raises(AggregateError, match=r"claim 'nothing' has no file "
                                             r"hkt/report/claims/nothing.py"):
        claims.claim_modules({**cfg, "nothing": {"section": "paper", "title": "t"}})
    with pytest.raises(AggregateError, match=r"no entry for claim 'kernel'"):
        claims.claim_modules({k: v for k, v in cfg.items() if k != "kernel"})


def test_a_claims_file_with_a_bad_section_or_no_title_is_named(tmp_path):
    from hkt.report.claims.config import load_claims_config
    from hkt.runs_frame import AggregateError

    bad = tmp_path / "claims.yaml"
    bad.write_text("cost:\n  section: elsewhere\n  title: t\n")
    with pytest.raises(AggregateError, match=rf"{bad}: claim 'cost' key 'section' is 'elsewhere'"):
        load_claims_config(bad)
    bad.write_text("cost:\n  section: paper\n")
    with pytest.raises(AggregateError, match=rf"{bad}: claim 'cost' has no key 'title'"):
        load_claims_config(bad)
