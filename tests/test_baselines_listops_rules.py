"""The ListOps rule references (hkt/baselines/_listops_rules.py and its five baselines): each
rule on hand-made trees, whose values are worked out by hand; the exact evaluator equals every
label of a generated split and stops on a wrong one; a rule refuses data that is not ListOps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hkt.baselines._listops_rules import root_prior, truncated_value
from hkt.baselines.run import read_split, run_baseline
from hkt.data.families.listops import VOCAB
from hkt.data.prepare import prepare_task
from hkt.errors import ConfigError, DataError

RULES = ("root_op_prior", "depth1_rule", "depth2_rule", "depth3_rule", "exact_rule")
SMALL = ["prepare.splits.train=300", "prepare.splits.val=100", "prepare.splits.test=100",
         "prepare.chunk_size=3000"]


def ids(expr: str) -> list[int]:
    """Token ids of an expression written as text, e.g. ``[MAX 2 [MIN 4 7 ] 0 ]``."""
    return [VOCAB.index(t) for t in expr.split()]


# expression -> its value at depth 1, 2, 3 and exactly (None: the root keeps no argument)
TREES = {
    "[MAX 2 [MIN 4 7 ] 0 ]": (2, 4, 4, 4),
    "[SM [MIN 3 [MAX 9 1 ] ] 5 ]": (5, 8, 8, 8),
    "[MED [MIN 1 2 ] [MAX 3 4 ] ]": (None, 2, 2, 2),          # MED(1, 4): (1 + 4) // 2
    "[MAX 1 [MIN [SM 9 9 ] [SM 8 8 ] ] ]": (1, 1, 6, 6),      # depth 2: MIN keeps nothing
    "[MIN 7 [MAX 3 [SM 4 [MED 1 9 ] ] ] ]": (7, 3, 4, 7),     # a rule need not rise with depth
    "[SM 9 9 9 ]": (7, 7, 7, 7),
}


@pytest.mark.parametrize("expr, values", TREES.items())
def test_each_depth_rule_on_hand_made_trees(expr, values):
    assert [truncated_value(ids(expr), k) for k in (1, 2, 3, None)] == list(values)


@pytest.mark.parametrize("expr", ["[MAX 2 3", "[MAX 2 3 ] ]", "[MAX 2 3 ] 4", "4", "[MAX 2 <pad> ]"])
def test_a_malformed_expression_is_a_value_error(expr):
    with pytest.raises(ValueError):
        truncated_value(ids(expr), None)


def expression_data(out: Path, splits: dict[str, list[tuple[str, int]]]) -> Path:
    """Prepared ListOps data (the contract's layout) holding exactly these (expression, label)s."""
    out.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        toks = [ids(e) for e, _ in rows]
        table = pa.table({"id": [f"{split}/{i:06d}" for i in range(len(rows))],
                          "tokens": pa.array(toks, pa.list_(pa.uint16())),
                          "label": pa.array([y for _, y in rows], pa.int64()),
                          "length": pa.array([len(t) for t in toks], pa.int32())})
        meta = {"task": "listops", "split": split, "vocab": VOCAB, "vocab_size": len(VOCAB),
                "num_classes": 10, "max_length": 512, "source": "test", "code_version": "test"}
        pq.write_table(table.replace_schema_metadata({"hkt": json.dumps(meta)}),
                       out / f"{split}.parquet")
    return out


# training labels per root operator: MIN -> 0 (2 of 3), MAX -> 9, MED -> tie of 4 and 5 -> 4;
# SM has none -> the most frequent label overall (0 and 9 tie at 2 each -> 0)
TRAIN = [("[MIN 0 1 ]", 0), ("[MIN 3 4 ]", 3), ("[MIN 0 5 ]", 0), ("[MAX 9 1 ]", 9),
         ("[MAX 2 9 ]", 9), ("[MED 4 5 ]", 4), ("[MED 5 5 ]", 5)]
EVAL = [(e, v[3]) for e, v in TREES.items()]  # the true values


def test_the_root_prior_is_the_most_frequent_training_label_of_each_root(tmp_path):
    data = expression_data(tmp_path / "d", {"train": TRAIN, "val": EVAL, "test": EVAL})
    prior = root_prior(read_split(data, "train"), 10)
    assert prior.tolist() == [0, 9, 4, 0]
    rec = run_baseline("root_op_prior", data, tmp_path / "run")
    assert rec["root_labels"] == {"MIN": 0, "MAX": 9, "MED": 4, "SM": 0}
    # predictions: MAX 9, SM 0, MED 4, MAX 9, MIN 0, SM 0; true 4, 8, 2, 6, 3, 7: none right
    assert rec["test_accuracy"] == rec["val_accuracy"] == 0.0
    assert rec["model"] == "root_op_prior" and rec["n_params"] == 0
    assert rec["config"]["model"] == {"name": "root_op_prior",
                                        "rule": "root-operator prior, from the training labels"}


@pytest.mark.parametrize("name, depth", [("depth1_rule", 1), ("depth2_rule", 2), ("depth3_rule", 3)])
def test_a_depth_rule_scores_what_its_values_say_and_counts_the_prior_fallbacks(tmp_path, name, depth):
    data = expression_data(tmp_path / "d", {"train": TRAIN, "val": EVAL, "test": EVAL[:3]})
    rec = run_baseline(name, data, tmp_path / "run")
    # where the root keeps nothing, the prior answers: MED -> 4 (the true value is 2)
    said = [v[depth - 1] if v[depth - 1] is not None else 4 for v in TREES.values()]
    truth = [v[3] for v in TREES.values()]
    assert rec["val_accuracy"] == pytest.approx(np.mean(np.equal(said, truth)))
    assert rec["test_accuracy"] == pytest.approx(np.mean(np.equal(said[:3], truth[:3])))
    assert rec["prior_fallbacks"] == ({"val": 1, "test": 1} if depth == 1 else {"val": 0, "test": 0})
    assert rec["depth"] == depth and rec["config"]["model"]["depth"] == depth


def test_the_depth_rules_are_one_rule_and_each_name_runs_its_own_depth(tmp_path):
    """One module registers the rule once per depth (hkt/baselines/depth_rule.py); `hkt
    baseline depthK_rule` runs depth K under that name, and says so in `hkt baseline --help`."""
    from hkt.baselines import BASELINES, baseline_module, summary
    from hkt.cli.main import main

    names = [n for n in BASELINES.names() if n.startswith("depth")]
    assert names == ["depth1_rule", "depth2_rule", "depth3_rule"]
    assert {baseline_module(n).__name__ for n in names} == {"hkt.baselines.depth_rule"}
    assert summary("depth2_rule").startswith("ListOps depth-2 rule: ")
    data = expression_data(tmp_path / "d", {"train": TRAIN, "val": EVAL, "test": EVAL})
    for name, depth in (("depth3_rule", 3), ("depth1_rule", 1)):
        assert main(["baseline", name, "--data", str(data), "--out", str(tmp_path / name)]) == 0
        rec = json.loads((tmp_path / name / "record.json").read_text())
        assert (rec["model"], rec["depth"], rec["external"]) == (name, depth,
                                                                 "hkt.baselines.depth_rule")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("listops-rules")
    prepare_task("listops", out, overrides=SMALL)
    return out


def test_the_exact_evaluator_equals_every_label_of_a_generated_split(generated, tmp_path):
    for split in ("train", "val", "test"):
        s = read_split(generated, split)
        values = [truncated_value(s.flat[s.offsets[i]: s.offsets[i + 1]], None) for i in range(len(s))]
        assert values == s.labels.tolist()
    rec = run_baseline("exact_rule", generated, tmp_path / "run")
    assert rec["val_accuracy"] == rec["test_accuracy"] == 1.0
    assert rec["checked_examples"] == 500


def test_the_rules_climb_toward_the_exact_evaluator_on_generated_data(generated, tmp_path):
    """Deeper rules read more of each expression: on generated trees their accuracies rise."""
    acc = [run_baseline(n, generated, tmp_path / n)["test_accuracy"] for n in RULES]
    assert acc == sorted(acc) and acc[-1] == 1.0 and acc[0] < acc[3]


def test_the_exact_evaluator_stops_on_a_wrong_label_naming_it(tmp_path):
    data = expression_data(tmp_path / "d", {"train": TRAIN[:2], "val": EVAL,
                                             "test": [*EVAL[:2], ("[MAX 1 2 ]", 1)]})
    with pytest.raises(DataError, match=r"1 of 3 test labels differ .*'test/000002', label 1, "
                                        r"value 2.*prepare it again"):
        run_baseline("exact_rule", data, tmp_path / "run")
    assert not (tmp_path / "run" / "record.json").exists()


@pytest.mark.parametrize("name", RULES)
def test_a_rule_refuses_data_that_is_not_listops(name, tmp_path):
    from conftest import write_prepared_data

    data = write_prepared_data(tmp_path / "imdb", "imdb")
    with pytest.raises(ConfigError, match=r"ListOps rule .*not ListOps .*`tasks: \[listops\]`"):
        run_baseline(name, data, tmp_path / "run")
