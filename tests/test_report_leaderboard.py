"""Published figures read against the rule references (hkt/report/leaderboard.py, issue 60): the
project's file of LRA ListOps figures holds every model of the LRA paper's Table 1, each with its
source; a figure reads at, above or below the rules by the rule the claims use; a bad file stops
with one line naming the entry and key."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
import yaml

from hkt.rule_references import figure_error, lines
from hkt.report.leaderboard import (caption, leaderboard_display, leaderboard_table,
                                    load_leaderboard, short_reading)
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


def _board(tmp_path: Path, entries: list[dict], **top) -> Path:
    path = tmp_path / "board.yaml"
    path.write_text(yaml.safe_dump({"task": "listops", "length": 2000, "test_examples": 2000,
                                    **top, "entries": entries}))
    return path


def _entry(**kw) -> dict:
    return {"model": "M", "accuracy": 50.0, "std": None, "seeds": None, "source": "a paper",
            "checked_in": "its table", "recipe": "its own", **kw}


def test_each_figure_reads_against_the_rules_as_the_claims_read_a_model(tmp_path, runs):
    refs = {ln.model: ln.test for ln in lines(runs, "listops", 2000)}
    prior, depth1, depth2 = refs["root_op_prior"], refs["depth1_rule"], refs["depth2_rule"]
    path = _board(tmp_path, [_entry(model="at", accuracy=prior),
                             _entry(model="low", accuracy=prior - 15),
                             _entry(model="mid", accuracy=(depth1 + depth2) / 2),
                             _entry(model="spread", accuracy=prior + 4, std=4.0, seeds=2)])
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
    assert rows[3][1] == f"{prior + 4:.2f} ± 4.00 (2 seeds)"
    assert "3 of 4 figures come with no spread" in caption(load_leaderboard(path), table)


def test_short_reading_drops_the_differences():
    assert short_reading("above the depth-1 rule (+10.95 ± 3.07 pp), below the depth-2 rule "
                         "(-7.20 ± 2.98 pp)") == "above the depth-1 rule, below the depth-2 rule"


@pytest.mark.parametrize("entry, top, message", [
    (_entry(accuracy=101.0), {}, r"entry 1 \(M\): accuracy is 101.0, not a number 0..100"),
    (_entry(std=1.0), {}, r"entry 1 \(M\): std and seeds go together"),
    (_entry(seeds=0, std=1.0), {}, r"entry 1 \(M\): seeds is 0"),
    (_entry(source=""), {}, r"entry 1 \(M\): source must be a non-empty text"),
    (_entry(table=2), {}, r"entry 1 \(M\): unknown keys table"),
    ({k: v for k, v in _entry().items() if k != "checked_in"}, {}, r"missing checked_in"),
    (_entry(), {"test_examples": 0}, r"test_examples is 0"),
])
def test_a_bad_file_names_the_entry_and_key(tmp_path, entry, top, message):
    with pytest.raises(AggregateError, match=message):
        load_leaderboard(_board(tmp_path, [entry], **top))


def test_runs_without_rules_at_the_files_length_are_refused(tmp_path, runs):
    path = _board(tmp_path, [_entry()], length=512)
    with pytest.raises(AggregateError, match="no.*rule references on listops T=512|runs hold none"):
        leaderboard_table(load_leaderboard(path), runs)
