"""Per-example facts (hkt/facts/examples.py): on hand-made ListOps trees each fact is what the
tree says (depth, root operator, its arguments, length, each rule's answer); `hkt prepare`
writes them beside the splits, they are made on first need for data prepared before, and a
folder with neither (an old publication) has none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_baselines_listops_rules import EVAL, SMALL, TRAIN, TREES, expression_data, ids

from hkt.baselines.run import read_split, run_baseline
from hkt.facts.examples import example_facts, load_examples, tree_facts
from hkt.data_layout import EXAMPLES
from hkt.cli.main import main as hkt_main

# expression -> (depth, root's arguments), counted by hand
SHAPES = {"[MAX 2 [MIN 4 7 ] 0 ]": (2, 3), "[SM [MIN 3 [MAX 9 1 ] ] 5 ]": (3, 2),
          "[MED [MIN 1 2 ] [MAX 3 4 ] ]": (2, 2), "[MAX 1 [MIN [SM 9 9 ] [SM 8 8 ] ] ]": (3, 2),
          "[MIN 7 [MAX 3 [SM 4 [MED 1 9 ] ] ] ]": (4, 2), "[SM 9 9 9 ]": (1, 3)}


def test_each_hand_made_tree_has_the_facts_counted_by_hand(tmp_path):
    data = expression_data(tmp_path / "d", {"train": TRAIN, "val": EVAL, "test": EVAL})
    facts = example_facts(data)
    assert facts.columns == ["split", "row", "label", "root_op", "depth", "length", "root_args",
                             "root_op_prior", "depth1_rule", "depth2_rule", "depth3_rule",
                             "exact_rule"]
    test = facts.filter(pl.col("split") == "test").sort("row")
    assert test["row"].to_list() == list(range(len(EVAL)))
    assert list(zip(test["depth"], test["root_args"])) == list(SHAPES.values())
    assert test["root_op"].to_list() == [e.split()[0][1:] for e in TREES]
    assert test["length"].to_list() == [len(e.split()) for e in TREES]
    assert test["label"].to_list() == [v[3] for v in TREES.values()]
    assert test["exact_rule"].to_list() == test["label"].to_list()
    # where the root keeps nothing, the depth-1 rule answers the prior (MED -> 4)
    assert test["depth1_rule"].to_list() == [v[0] if v[0] is not None else 4
                                             for v in TREES.values()]
    assert test["root_op_prior"].to_list() == [9, 0, 4, 9, 0, 0]  # the prior of the rules' test


def test_every_rule_answer_scores_what_the_rule_baseline_records(tmp_path):
    """One code path: the facts' answers give each rule's recorded test and val accuracy."""
    data = expression_data(tmp_path / "d", {"train": TRAIN, "val": EVAL, "test": EVAL[:4]})
    facts = example_facts(data)
    for name in ("root_op_prior", "depth1_rule", "depth2_rule", "depth3_rule", "exact_rule"):
        rec = run_baseline(name, data, tmp_path / name)
        for split in ("val", "test"):
            part = facts.filter(pl.col("split") == split)
            acc = float((part[name] == part["label"]).mean())
            assert acc == pytest.approx(rec[f"{split}_accuracy"]), (name, split)


def test_tree_facts_of_several_expressions_do_not_mix():
    """The vectorised count restarts at each expression (offsets), whatever came before."""
    split_exprs = list(TREES)
    toks = [np.asarray(ids(e), np.uint16) for e in split_exprs]
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in toks])])
    depth, args = tree_facts(np.concatenate(toks), offsets)
    assert list(zip(depth.tolist(), args.tolist())) == list(SHAPES.values())
    one_depth, one_args = tree_facts(toks[4], np.asarray([0, len(toks[4])]))
    assert (one_depth[0], one_args[0]) == SHAPES[split_exprs[4]]


def test_prepare_writes_the_facts_and_they_match_the_splits(tmp_path):
    out = tmp_path / "listops"
    assert hkt_main(["prepare", "listops", "--out", str(out), "--quiet", *SMALL]) == 0
    facts = pl.read_parquet(out / EXAMPLES)
    for split in ("val", "test"):
        data = read_split(out, split)
        part = facts.filter(pl.col("split") == split).sort("row")
        assert part["label"].to_list() == data.labels.tolist()
        assert part["length"].to_list() == data.lengths.tolist()
        assert (part["exact_rule"] == part["label"]).all()
    assert facts["depth"].min() >= 1 and facts["root_args"].min() >= 1


def test_facts_are_made_on_first_need_and_absent_where_no_data_is(tmp_path):
    data = expression_data(tmp_path / "d", {"train": TRAIN, "val": EVAL, "test": EVAL})
    assert not (data / EXAMPLES).exists()
    facts = load_examples(data)
    assert (data / EXAMPLES).is_file() and facts.equals(pl.read_parquet(data / EXAMPLES))
    published = tmp_path / "published"
    published.mkdir()
    (published / "metadata.json").write_text("{}")
    assert load_examples(published) is None


def _task(out: Path, family: str, rows: dict[str, list[tuple[list[int], int]]],
          classes: list[str], num_classes: int | None = None) -> Path:
    """Prepared data of ``family`` holding exactly these (tokens, label)s per split."""
    from hkt.data.parquet import SplitData, write_split

    out.mkdir(parents=True, exist_ok=True)
    for split, examples in rows.items():
        data = SplitData.from_lengths([f"{split}/{i}" for i in range(len(examples))],
                                      np.concatenate([np.asarray(t, np.uint16) for t, _ in examples]),
                                      np.asarray([len(t) for t, _ in examples]),
                                      np.asarray([y for _, y in examples]))
        write_split(out / f"{split}.parquet", data, {"task": family, "num_classes": num_classes or len(classes),
                                                     "class_names": classes, "max_length": 64})
    return out


def test_imdb_facts_are_each_reviews_length_in_bytes(tmp_path):
    rows = {"train": [([1, 2], 0)], "val": [([5] * 7, 1), ([9] * 3, 0)], "test": [([4] * 11, 1)]}
    facts = example_facts(_task(tmp_path / "imdb", "imdb", rows, ["neg", "pos"]))
    assert facts.columns == ["split", "row", "label", "length"]
    assert facts.rows() == [("val", 0, 1, 7), ("val", 1, 0, 3), ("test", 0, 1, 11)]


def test_cifar_facts_are_each_images_class_and_a_metadata_without_names_is_refused(tmp_path):
    rows = {"train": [([0] * 4, 0)], "val": [([1] * 4, 2)], "test": [([2] * 4, 1), ([3] * 4, 0)]}
    facts = example_facts(_task(tmp_path / "c", "cifar10", rows, ["cat", "dog", "ship"]))
    assert facts.select("split", "row", "class").rows() == [("val", 0, "ship"), ("test", 0, "dog"),
                                                            ("test", 1, "cat")]
    from hkt.errors import DataError

    with pytest.raises(DataError, match="names 2 classes for 3 labels"):
        example_facts(_task(tmp_path / "bad", "cifar10", rows, ["cat", "dog"], num_classes=3))


def test_preparing_again_drops_the_old_datas_facts(tmp_path):
    """Facts describe one preparation: a re-prepare removes them first, so no later reader
    takes the old data's facts for the new splits' (the command writes the new ones)."""
    out = tmp_path / "listops"
    prepare_task_cli = ["prepare", "listops", "--out", str(out), "--quiet", *SMALL]
    assert hkt_main(prepare_task_cli) == 0
    from hkt.data.prepare import prepare_task

    prepare_task("listops", out, overrides=[*SMALL, "prepare.splits.train=200"])
    assert not (out / EXAMPLES).exists()
    assert load_examples(out) is not None and (out / EXAMPLES).is_file()  # made on first need
