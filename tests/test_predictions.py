"""Every run keeps its predictions (issue 58, hkt/predictions.py): a training run of every mixer
writes ``predictions.parquet`` at the checkpoint it reports, whose accuracy is the record's
exactly; ``hkt predict`` remakes it from the best checkpoint byte for byte, for a record of
before too; rows are the split's true rows however evaluation batches them; bad inputs are
refused in one line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from conftest import check_predictions
from hkt.cli.main import main
from hkt.errors import DataError, TrainingError
from hkt.predictions import (PredictionsError, SplitPredictions, check_file, one_hot,
                             predictions_table, write_predictions)
from hkt.run_record import RecordError, load_record, write_record
from hkt.train.run_config import load_config
from hkt.train.loop import train
from hkt.train.predict import remake_predictions

MIXERS = ("mha", "hkt", "conv", "s4d")


def smoke(data: Path, out: Path, task: str, *overrides: str) -> dict:
    cfg = load_config(["profile=smoke", f"task={task}", "tracking.enabled=false", *overrides])
    return train(cfg, data, out, stream=io.StringIO(), progress=False)


@pytest.mark.parametrize("model", MIXERS)
def test_a_training_run_keeps_its_predictions_and_predict_remakes_them_byte_for_byte(
        model, prepared_data, tmp_path):
    data, run = prepared_data("listops"), tmp_path / "run"
    record = smoke(data, run, "listops", f"model={model}", "train.eval_every=2")
    df = check_predictions(run, data)  # the record's accuracies, exactly
    assert df.filter(pl.col("split") == "val").height == 2 * 8  # train.eval_batches x batch
    written = (run / "predictions.parquet").read_bytes()

    (run / "predictions.parquet").unlink()
    assert remake_predictions(run, data) == record
    assert (run / "predictions.parquet").read_bytes() == written

    # a record of before predictions were kept gains the field, and nothing else changes
    before = {k: v for k, v in record.items() if k != "predictions"}
    write_record(before, run)
    (run / "predictions.parquet").unlink()
    assert remake_predictions(run, data) == {**before, "predictions": record["predictions"]}
    assert json.loads((run / "record.json").read_text()) == {**before,
                                                            "predictions": record["predictions"]}
    assert (run / "predictions.parquet").read_bytes() == written


@pytest.mark.parametrize("task", ["imdb", "cifar10"])
def test_rows_are_the_splits_rows_when_evaluation_buckets_by_length(task, prepared_data,
                                                                    tmp_path):
    """The whole split evaluated (no eval_batches limit): the loader sorts by length, and each
    prediction still names its row in the split's file (its label is that row's)."""
    data, run = prepared_data(task), tmp_path / "run"
    smoke(data, run, task, "model=mha", "train.eval_batches=null", "train.test_batches=null")
    df = check_predictions(run, data)
    for split in ("val", "test"):
        n = pq.read_metadata(data / f"{split}.parquet").num_rows
        assert df.filter(pl.col("split") == split)["row"].to_list() == list(range(n))
    written = (run / "predictions.parquet").read_bytes()
    remake_predictions(run, data)
    assert (run / "predictions.parquet").read_bytes() == written


def test_the_file_is_the_same_bytes_for_the_same_predictions(tmp_path):
    """No time, path or machine in the file: the same predictions, in any order, same bytes."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=5).astype(np.float32)
    p = SplitPredictions(np.array([4, 0, 2, 1, 3]), np.array([0, 1, 2, 0, 1]),
                         probs.argmax(1), probs)
    shuffled = SplitPredictions(p.rows[::-1], p.labels[::-1], p.preds[::-1], p.probs[::-1])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_predictions({"val": p, "test": p}, tmp_path / "a", 3)
    b = write_predictions({"test": shuffled, "val": shuffled}, tmp_path / "b", 3)
    assert a == b and a["file"] == "predictions.parquet"
    table = predictions_table({"val": p}, 3)
    assert table.column("row").to_pylist() == [0, 1, 2, 3, 4]
    assert str(table.schema.field("p0").type) == "halffloat"
    assert one_hot(np.array([2, 0]), 3).tolist() == [[0, 0, 1], [1, 0, 0]]


def test_a_predictions_file_its_record_does_not_name_is_refused(prepared_data, tmp_path):
    data, run = prepared_data("listops"), tmp_path / "run"
    record = smoke(data, run, "listops", "model=mha")
    assert check_file(run, record) == run / "predictions.parquet"
    assert check_file(run, {k: v for k, v in record.items() if k != "predictions"}) is None
    (run / "predictions.parquet").write_bytes(b"x" + (run / "predictions.parquet").read_bytes())
    with pytest.raises(PredictionsError, match="SHA-256 differs"):
        check_file(run, record)
    (run / "predictions.parquet").unlink()
    with pytest.raises(PredictionsError, match="is missing: the record names it"):
        check_file(run, record)


def test_predict_refuses_in_one_line(prepared_data, tmp_path, capsys):
    data, run = prepared_data("listops"), tmp_path / "run"
    record = smoke(data, run, "listops", "model=mha")

    def refused(args: list[str]) -> str:
        assert main(["predict", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("hkt: error: "), err
        return err[0]

    assert "not the data run" in refused([str(run), "--data", str(prepared_data("listops", seed=1))])
    assert "no run record" in refused([str(tmp_path / "none"), "--data", str(data)])
    with pytest.raises(DataError, match="does not exist"):
        remake_predictions(run, tmp_path / "no-data")
    # an evaluation that does not give the record's accuracy writes nothing
    write_record({**record, "test_accuracy": 1.0}, run)
    (run / "predictions.parquet").unlink()
    assert "the record says 1.0" in refused([str(run), "--data", str(data)])
    assert not (run / "predictions.parquet").exists()
    write_record(record, run)
    (run / "checkpoints" / "best.pt").unlink()
    assert "has no best checkpoint" in refused([str(run), "--data", str(data)])
    with pytest.raises(TrainingError, match="no best checkpoint"):
        remake_predictions(run, data)
    base = tmp_path / "majority"
    assert main(["baseline", "majority", "--data", str(data), "--out", str(base)]) == 0
    capsys.readouterr()
    assert "run it again (hkt baseline majority" in refused([str(base), "--data", str(data)])
    with pytest.raises(RecordError):
        load_record(tmp_path / "none")


def test_a_best_checkpoint_of_before_gets_its_validation_made_again_at_the_end(prepared_data,
                                                                                tmp_path):
    """A run resumed from checkpoints written before best.pt kept its validation's predictions
    validates the best checkpoint again at its end, to the same file."""
    import torch

    data, run = prepared_data("listops"), tmp_path / "run"
    record = smoke(data, run, "listops", "model=mha", "train.eval_every=2")
    written = (run / "predictions.parquet").read_bytes()
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=True)
    torch.save({k: v for k, v in best.items() if k != "val_predictions"},
               run / "checkpoints" / "best.pt")
    (run / "record.json").unlink()
    (run / "predictions.parquet").unlink()
    out = io.StringIO()
    cfg = load_config(["profile=smoke", "task=listops", "tracking.enabled=false", "model=mha",
                       "train.eval_every=2"])
    again = train(cfg, data, run, stream=out, progress=False)  # last.pt is at the last step
    assert "holds no validation predictions (written before they were kept)" in out.getvalue()
    assert (run / "predictions.parquet").read_bytes() == written
    assert again["predictions"] == record["predictions"] and again["best_step"] < again["steps"]
