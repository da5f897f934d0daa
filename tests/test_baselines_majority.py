"""The majority-class baseline (hkt.baselines.majority): its numbers, known by hand from the
labels, and the same numbers as before it had its own module (it was `hkt baseline ngram
--method majority`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hkt.baselines.run import run_baseline
from hkt.cli.main import main
from hkt.run_record import load_record
from test_baselines_ngram import keyword_data


def labelled_data(out: Path, labels: dict[str, list[int]], num_classes: int = 3) -> Path:
    """Prepared data (contract layout) whose splits hold exactly these labels."""
    out.mkdir(parents=True, exist_ok=True)
    for split, ys in labels.items():
        table = pa.table({"id": [f"{split}-{i}" for i in range(len(ys))],
                          "tokens": pa.array([[1, 2]] * len(ys), pa.list_(pa.uint16())),
                          "label": pa.array(ys, pa.int64()),
                          "length": pa.array([2] * len(ys), pa.int32())})
        meta = {"task": "labels", "split": split, "vocab": ["<pad>", "a", "b"], "vocab_size": 3,
                "num_classes": num_classes, "max_length": 8, "source": "test",
                "code_version": "test"}
        pq.write_table(table.replace_schema_metadata({"hkt": json.dumps(meta)}),
                       out / f"{split}.parquet")
    return out


@pytest.mark.parametrize("train, label", [
    ([0, 2, 2, 1, 2, 0], 2),
    ([1, 1, 0, 0], 0),  # a tie: the smaller label, as np.argmax
    ([1], 1),
])
def test_it_predicts_the_most_frequent_training_label(tmp_path, train, label):
    data = labelled_data(tmp_path / "d", {"train": train, "val": [2, 2, 0, 1],
                                           "test": [1, 1, 2, 0, 2]})
    rec = run_baseline("majority", data, tmp_path / "run")
    assert rec["majority_label"] == label
    assert rec["val_accuracy"] == [2, 2, 0, 1].count(label) / 4
    assert rec["test_accuracy"] == [1, 1, 2, 0, 2].count(label) / 5
    assert (rec["n_params"], rec["steps"], rec["best_step"]) == (0, 0, 0)
    assert rec["config"]["model"] == {"name": "majority"}
    assert rec["external"] == "hkt.baselines.majority"
    assert not (tmp_path / "run" / "history.csv").exists()  # no curve to draw


def test_max_train_takes_the_first_examples(tmp_path):
    data = labelled_data(tmp_path / "d", {"train": [0, 0, 1, 1, 1], "val": [0, 1], "test": [0]})
    rec = run_baseline("majority", data, tmp_path / "run", max_train=2)
    assert rec["majority_label"] == 0 and rec["train_examples"] == 2
    assert rec["config"]["train"] == {"profile": "none", "max_train": 2}


def test_the_numbers_are_those_before_it_had_its_own_module(tmp_path):
    """Pinned: what `hkt baseline ngram --method majority` wrote on this data (record fields
    and config), computed before the split (issue 40)."""
    data = keyword_data(tmp_path / "data")
    assert main(["baseline", "majority", "--data", str(data), "--out", str(tmp_path / "all"),
                 "--profile", "smoke"]) == 0
    rec = load_record(tmp_path / "all")
    assert (rec["val_accuracy"], rec["test_accuracy"], rec["majority_label"]) == (0.5, 0.495, 1)
    assert rec["config"] == {"task": {"family": "keyword", "num_classes": 2, "max_length": 64,
                                      "prepare": {}},
                             "model": {"name": "majority"},
                             "train": {"profile": "smoke", "max_train": None},
                             "seed": 0, "variant": "main"}
    assert (rec["ms_per_step"], rec["samples_per_s"], rec["train_examples"]) == (None, None, 600)
    cut = run_baseline("majority", data, tmp_path / "cut", profile="smoke", max_train=7)
    assert (cut["val_accuracy"], cut["test_accuracy"], cut["majority_label"]) == (0.5, 0.505, 0)
