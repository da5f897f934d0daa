"""The rule references on LRA's released ListOps files (issue 60): `hkt prepare listops_lra
--source lra_release/listops-1000` reads basic_{train,val,test}.tsv as LRA's generator writes them
(google-research/long-range-arena, lra_benchmarks/data/listops.py: Python's csv writer with a tab
delimiter, so CRLF line ends, a `Source`/`Target` header, each tree as its parenthesised pairs),
and every rule gives on them what it gives on the same trees as our tokens. The lra_listops suite
passes such a folder as `--source`. The fixture is written here; no LRA file is read."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hkt.baselines.run import run_baseline
from hkt.data.families.listops import VOCAB
from hkt.data.prepare import prepare_task
from hkt.workflow.suites import load_suite

RULES = ("root_op_prior", "depth1_rule", "depth2_rule", "depth3_rule", "exact_rule",
         "bracketless_rule")
SMALL = ["prepare.splits.train=200", "prepare.splits.val=60", "prepare.splits.test=60",
         "prepare.min_length=40", "prepare.max_length=120", "prepare.chunk_size=2000"]


def lra_source(tokens: list[int]) -> str:
    """A tree as LRA's ``to_string`` writes it: an operator and its first argument are a pair,
    each further argument pairs with what came before, and the closing bracket last, each pair
    in parentheses: [MAX 2 9 ] is '( ( ( [MAX 2 ) 9 ) ] )'."""
    pos = 0

    def tree() -> str:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok >= VOCAB.index("0"):
            return VOCAB[tok]
        text = f"( {VOCAB[tok]} {tree()} )"
        while tokens[pos] != VOCAB.index("]"):
            text = f"( {text} {tree()} )"
        pos += 1
        return f"( {text} ] )"

    return tree()


def test_lra_source_is_the_generators_format():
    ids = [VOCAB.index(t) for t in "[MAX 2 [MIN 4 7 ] 0 ]".split()]
    assert lra_source(ids) == "( ( ( ( [MAX 2 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 0 ) ] )"


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> Path:
    """Small trees of LRA's distribution as our tokens (T = 2000's task at a short window)."""
    out = tmp_path_factory.mktemp("ours")
    prepare_task("listops_lra", out, overrides=SMALL)
    return out


@pytest.fixture(scope="module")
def release(ours, tmp_path_factory) -> Path:
    """The same trees written as LRA's release: lra_release/listops-1000/basic_*.tsv."""
    from test_data_listops import read_rows

    folder = tmp_path_factory.mktemp("lra_release") / "listops-1000"
    folder.mkdir()
    for split in ("train", "val", "test"):
        with (folder / f"basic_{split}.tsv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, delimiter="\t")  # as LRA's write_to_file: CRLF line ends
            writer.writerow(["Source", "Target"])
            writer.writerows([lra_source(list(t)), y]
                             for t, y, _ in read_rows(ours / f"{split}.parquet").values())
    return folder


def test_the_fixture_has_lras_layout(release):
    raw = (release / "basic_test.tsv").read_bytes()
    assert raw.startswith(b"Source\tTarget\r\n( ") and raw.count(b"\r\n") == 61


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_gives_on_lras_files_what_it_gives_on_our_tokens(rule, ours, release,
                                                                     tmp_path):
    read = tmp_path / "read"
    prepare_task("listops_lra", read, source=release)
    on_files = run_baseline(rule, read, tmp_path / "files")
    on_tokens = run_baseline(rule, ours, tmp_path / "tokens")
    assert (on_files["val_accuracy"], on_files["test_accuracy"]) == \
        (on_tokens["val_accuracy"], on_tokens["test_accuracy"])
    if rule == "exact_rule":
        assert on_files["test_accuracy"] == 1.0


def test_the_suite_passes_the_release_folder_to_prepare(release):
    grid = load_suite("lra_listops", overrides={
        "tasks": {"listops_lra": {"config": "listops_lra", "prepare": [],
                                  "source": str(release)}}}).grid
    assert grid.prepare_args("listops_lra") == ["listops_lra", "--source", str(release.resolve())]
    assert {j.model for j in grid.external_jobs()} >= set(RULES)
    assert grid.leaderboard_args() == ["--leaderboard", "config/report/lra_listops.yaml"]
    assert grid.train_jobs() == []
