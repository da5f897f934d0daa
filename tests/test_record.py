"""hkt.run_record (the one public writer of run records and history.csv) and hkt.runs_frame (records ->
the runs frame), as an external baseline uses them."""

from __future__ import annotations

import hashlib
import json

import pytest

from hkt.run_record import (HISTORY_COLUMNS, RECORD_NAME, RecordError, load_record, make_record,
                        write_history, write_record)
from hkt.runs_frame import curves_from_records, load_records, record_row, runs_from_records


def _data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for split in ("train", "val", "test"):
        (d / f"{split}.parquet").write_bytes(split.encode() * 10)
    return d


def _fields(data_dir, **over):
    fields = dict(task="listops", model="mine", variant="main", seed=3, profile="cpu",
                  config={"task": {"family": "listops", "max_length": 512},
                          "model": {"name": "mine", "mixer": {"levels": 2, "gate": "x"}}},
                  n_params=7, steps=4, best_step=2, val_accuracy=0.5, test_accuracy=0.25,
                  data_dir=data_dir)
    fields.update(over)
    return fields


def test_an_external_baseline_needs_only_make_and_write(tmp_path):
    data = _data_dir(tmp_path)
    rec = make_record(**_fields(data), ms_per_step=12.34567, external="my-script")
    path = write_record(rec, tmp_path / "run")  # a run directory gets record.json
    assert path == tmp_path / "run" / RECORD_NAME
    assert load_record(tmp_path / "run") == rec == json.loads(path.read_text())
    # what every record states the same way is filled in
    assert rec["schema_version"] == 1 and rec["hkt_version"] and rec["created_at"]
    assert rec["data_checksums"] == {
        s: hashlib.sha256((data / f"{s}.parquet").read_bytes()).hexdigest()
        for s in ("train", "val", "test")}
    assert rec["mlflow_run_id"] is None and rec["ms_per_step"] == 12.346
    assert rec["external"] == "my-script"
    # and it joins the tables like a training run
    runs = runs_from_records(load_records([tmp_path / "run"]))
    assert runs.select("model", "seed", "length", "test_accuracy").rows() == [("mine", 3, 512, 0.25)]


def test_a_bad_field_is_refused_by_name(tmp_path):
    data = _data_dir(tmp_path)
    with pytest.raises(RecordError, match="test_accuracy"):
        make_record(**_fields(data, test_accuracy=1.5))
    with pytest.raises(RecordError, match="seed"):
        make_record(**_fields(data, seed=-1))


def test_history_has_one_layout_and_feeds_the_curves(tmp_path):
    data = _data_dir(tmp_path)
    run = tmp_path / "run"
    write_history([{"step": 5, "val_acc": 0.4}, {"step": 10, "train_loss": 1.5, "val_acc": 0.6}], run)
    lines = (run / "history.csv").read_text().splitlines()
    assert lines[0] == ",".join(HISTORY_COLUMNS)
    assert lines[1:] == ["5,,,,,,0.4", "10,1.5,,,,,0.6"]
    # the run's record: the history ends at its last step, and holds its best validation
    write_record(make_record(**_fields(data, steps=10, best_step=10, val_accuracy=0.6)), run)
    curves = curves_from_records(load_records([run]))
    assert curves.select("step", "val_accuracy").rows() == [(5, 0.4), (10, 0.6)]


def test_variant_columns_come_from_the_attention_config_whatever_the_model(tmp_path):
    rec = make_record(**_fields(_data_dir(tmp_path)))
    row = record_row(rec)
    assert row["levels"] == 2  # a field of this model's attention config
    assert row["stride"] is None and row["fusion"] is None  # fields it does not have
