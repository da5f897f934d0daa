"""Published figures read against the rule references (hkt/report/leaderboard.py, issues 60, 71):
the project's file of LRA ListOps figures holds every model of the LRA paper's Table 1 and the
tables it quotes whole, each with its source, and the spreads and seed counts its sources give; a
figure reads at, above or below the rules by the rule the claims use, its spread (sd over n seeds,
or se) widening its error; a bad file stops with one line naming the entry and key."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
import yaml

from hkt.rule_references import figure_error, lines
from hkt.report.leaderboard import (caption, leaderboard_display, leaderboard_table,
                                    load_leaderboard)
from hkt.runs_frame import AggregateError, load_records, runs_from_records

ROOT = Path(__file__).resolve().parents[1]
BOARD = ROOT / "config" / "report" / "lra_listops.yaml"
PUBLISHED = ROOT / "docs" / "results" / "lra_listops"
LRA_TABLE_1 = {"Transformer", "Local Attention", "Sparse Transformer", "Longformer", "Linformer",
               "Reformer", "Sinkhorn Transformer", "Synthesizer", "BigBird", "Linear Transformer",
               "Performer"}


@pytest.fixture(scope="module")
def runs() -> pl.DataFrame:
    """The published rule references on LRA's window (docs/results/lra_listops/runs)."""
    if not (PUBLISHED / "runs").is_dir():
        pytest.skip("docs/results/lra_listops/ holds no published records")
    return runs_from_records(load_records([PUBLISHED / "runs"]))


def test_the_file_holds_the_lra_table_and_later_models_each_with_its_source():
    board = load_leaderboard(BOARD)
    assert (board.task, board.length, board.test_examples) == ("listops", 2000, 2000)
    table_1 = {e.model for e in board.entries if "2011.04006), Table 1" in e.source}
    assert table_1 == LRA_TABLE_1
    assert {"S4", "S5", "Mega"} <= {e.model for e in board.entries}
    assert any("re-trained" in e.recipe and e.model.startswith("Transformer")
               for e in board.entries)
    for e in board.entries:
        assert e.source.strip() and e.checked_in.strip(), e.model
    assert len(board.entries) >= 35
    assert len({e.model for e in board.entries}) == len(board.entries)


def test_the_file_takes_whole_the_tables_it_quotes():
    """FlashAttention's Table 3 has 9 rows and S4's Table 10 four models after LRA's: all are in."""
    board = load_leaderboard(BOARD)
    assert sum("2205.14135), Table 3" in e.source for e in board.entries) == 9
    table_10 = {e.model for e in board.entries if "2111.00396), Table 10" in e.source}
    assert table_10 == {"FNet", "Nyströmformer", "Luna-256", "S4 (original)"}


def test_the_file_carries_the_spreads_and_seeds_its_sources_give():
    """S4 59.60 ± 0.07 and S5 62.15 ± 0.23 (sd), Mega over 5 seeds (no spread), LRU ± 0.8 (se
    over 3 runs): carried as the sources give them."""
    by = {e.model: e for e in load_leaderboard(BOARD).entries}
    assert (by["S4"].accuracy, by["S4"].spread, by["S4"].spread_kind) == (59.60, 0.07, "sd")
    assert (by["S5"].accuracy, by["S5"].spread, by["S5"].spread_kind) == (62.15, 0.23, "sd")
    assert (by["Mega"].spread, by["Mega"].seeds) == (None, 5)
    assert (by["Mega-chunk"].spread, by["Mega-chunk"].seeds) == (None, 5)
    assert (by["LRU"].spread, by["LRU"].spread_kind, by["LRU"].seeds) == (0.8, "se", 3)
    secondary = [e for e in by.values() if "as " in e.source and "quotes it" in e.source]
    assert secondary and all("secondary" in e.checked_in for e in secondary)


def _board(tmp_path: Path, entries: list[dict], **top) -> Path:
    path = tmp_path / "board.yaml"
    path.write_text(yaml.safe_dump({"task": "listops", "length": 2000, "test_examples": 2000,
                                    **top, "entries": entries}))
    return path


def _entry(**kw) -> dict:
    return {"model": "M", "accuracy": 50.0, "spread": None, "seeds": None, "source": "a paper",
            "checked_in": "its table", "recipe": "its own", **kw}


def test_each_figure_reads_against_the_rules_as_the_claims_read_a_model(tmp_path, runs):
    refs = {ln.model: ln.test for ln in lines(runs, "listops", 2000)}
    prior, depth1, depth2 = refs["root_op_prior"], refs["depth1_rule"], refs["depth2_rule"]
    path = _board(tmp_path, [_entry(model="at", accuracy=prior),
                             _entry(model="low", accuracy=prior - 15),
                             _entry(model="mid", accuracy=(depth1 + depth2) / 2),
                             _entry(model="spread", accuracy=prior + 4, spread={"sd": 4.0},
                                    seeds=2)])
    table = leaderboard_table(load_leaderboard(path), runs)
    pos = dict(zip(table["model"], table["position"]))
    assert pos["at"] == "at the root-operator prior"
    assert pos["low"] == "below the root-operator prior"
    assert pos["mid"] == "above the depth-1 rule, below the depth-2 rule"
    # a published spread widens the error: +4 pp is at the prior with std 4 over 2 seeds
    assert pos["spread"] == "at the root-operator prior"
    row = table.filter(pl.col("model") == "spread").row(0, named=True)
    assert row["error_pp"] == pytest.approx(math.sqrt(16 / 2 + (prior + 4) * (100 - prior - 4)
                                                      / 2000))
    no_spread = table.filter(pl.col("model") == "at").row(0, named=True)
    assert no_spread["error_pp"] == pytest.approx(figure_error(prior, None, None, 2000))
    header, rows = leaderboard_display(table)
    assert rows[3][1] == f"{prior + 4:.2f} ± 4.00 (sd, 2 seeds)"
    text = caption(load_leaderboard(path), table)
    assert "1 of 4 figures give an sd (0 of them without a seed count" in text
    assert "0 an se; 3 come with no spread" in text


@pytest.mark.parametrize("spread, seeds, seed_var, shown", [
    ({"sd": 0.6}, 4, 0.36 / 4, "60.20 ± 0.60 (sd, 4 seeds)"),
    ({"sd": 0.6}, None, 0.36, "60.20 ± 0.60 (sd, seeds not given)"),   # read as one seed
    ({"se": 0.8}, 3, 0.64, "60.20 ± 0.80 (se, 3 seeds)"),              # se: already over seeds
    (None, 5, 0.0, "60.20 (5 seeds, no spread)"),
])
def test_a_spread_is_read_as_its_source_gives_it(tmp_path, runs, spread, seeds, seed_var, shown):
    """An sd over n seeds adds sd²/n to the figure's error (n not given: sd², the widest), a
    standard error se adds se², seeds alone add nothing; the figure shows what was given."""
    path = _board(tmp_path, [_entry(accuracy=60.2, spread=spread, seeds=seeds)])
    board = load_leaderboard(path)
    table = leaderboard_table(board, runs)
    binomial = 60.2 * (100 - 60.2) / 2000
    assert table["error_pp"][0] == pytest.approx(math.sqrt(seed_var + binomial))
    assert leaderboard_display(table)[1][0][1] == shown
    assert table["spread_kind"][0] == (next(iter(spread)) if spread else None)


@pytest.mark.parametrize("entry, top, message", [
    (_entry(accuracy=101.0), {}, r"entry 1 \(M\): accuracy is 101.0, not a number 0..100"),
    (_entry(spread=1.0), {}, r"entry 1 \(M\): spread is 1.0; give null .*\{sd: X\}.*\{se: X\}"),
    (_entry(spread={"std": 1.0}), {}, r"entry 1 \(M\): spread is \{'std': 1.0\}"),
    (_entry(spread={"sd": -1.0}), {}, r"entry 1 \(M\): spread sd is -1.0, not a number"),
    (_entry(seeds=0, spread={"sd": 1.0}), {}, r"entry 1 \(M\): seeds is 0"),
    (_entry(source=""), {}, r"entry 1 \(M\): source must be a non-empty text"),
    (_entry(table=2), {}, r"entry 1 \(M\): unknown keys table"),
    ({k: v for k, v in _entry().items() if k != "checked_in"}, {}, r"missing checked_in"),
    ({k: v for k, v in _entry().items() if k != "source"}, {},
     r"entry 1 \(M\): missing source \(every figure names where it is published\)"),
    (_entry(source="  "), {}, r"entry 1 \(M\): source must be a non-empty text"),
    (_entry(), {"test_examples": 0}, r"test_examples is 0"),
])
def test_a_bad_file_names_the_entry_and_key(tmp_path, entry, top, message):
    with pytest.raises(AggregateError, match=message):
        load_leaderboard(_board(tmp_path, [entry], **top))


def test_runs_without_rules_at_the_files_length_are_refused(tmp_path, runs):
    path = _board(tmp_path, [_entry()], length=512)
    with pytest.raises(AggregateError, match="no.*rule references on listops T=512|runs hold none"):
        leaderboard_table(load_leaderboard(path), runs)
