"""Prepared data with out-of-range values fail before step 1, through ``hkt train`` (issue 11: 1),
and before a baseline fits."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import seal_prepared_data, write_prepared_data
from hkt.cli.main import main


def _rewrite(path: Path, column: str, row: int, value: int) -> str:
    """Set ``column`` of ``row`` (for tokens: its second token) in a prepared split, keeping the
    metadata; return the row's id."""
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    if column == "tokens":
        values[row][1] = value
    else:
        values[row] = value
    table = table.set_column(table.schema.get_field_index(column), column,
                             pa.array(values, table.schema.field(column).type))
    pq.write_table(table, path)
    seal_prepared_data(path.parent)  # a finished directory: only the values are wrong
    return table.column("id")[row].as_py()


def _train(data: Path, out: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["train", "--data", str(data), "--out", str(out), "task=listops", "model=mha",
                 "profile=smoke", "tracking.enabled=false", "--no-progress", *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("split,column,value,allowed", [
    ("test", "tokens", 16, "0..15"),     # read only at the final test before the fix
    ("val", "label", 10, "0..9"),               # first evaluation
    ("train", "label", -100, "0..9"),           # cross_entropy's ignore_index would skip it
])
def test_out_of_range_values_fail_before_training(tmp_path, capsys, split, column, value, allowed):
    data = write_prepared_data(tmp_path / "data", "listops")
    row_id = _rewrite(data / f"{split}.parquet", column, 5, value)
    code, err = _train(data, tmp_path / "run", capsys, "train.test_batches=1")
    assert code == 2
    msg = err.strip().splitlines()[-1]
    assert msg.startswith("hkt: error: ") and f"{split}.parquet" in msg
    assert f"column '{column}'" in msg and repr(row_id) in msg and allowed in msg
    assert not (tmp_path / "run" / "record.json").exists()
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()  # no step was taken


def test_all_labels_ignored_is_a_data_error_not_a_divergence(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    path = data / "train.parquet"
    table = pq.read_table(path)
    table = table.set_column(table.schema.get_field_index("label"), "label",
                             pa.array([-100] * table.num_rows, pa.int64()))
    pq.write_table(table, path)
    seal_prepared_data(data)
    code, err = _train(data, tmp_path / "run", capsys)
    assert code == 2 and "column 'label'" in err and "optim.lr" not in err
    assert f"{table.num_rows} rows are out of range" in err


def test_good_data_still_trains(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    code, err = _train(data, tmp_path / "run", capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "run" / "record.json").read_text())["steps"] == 12


@pytest.fixture(scope="module")
def listops_512(tmp_path_factory) -> Path:
    """ListOps as `hkt prepare listops` writes it, at T = 512 (a few examples)."""
    from hkt.data.prepare import prepare_task

    out = tmp_path_factory.mktemp("listops512") / "data"
    prepare_task("listops", out, overrides=["prepare.splits.train=64", "prepare.splits.val=16",
                                            "prepare.splits.test=16"])
    return out


def test_data_prepared_for_another_task_is_refused_before_step_1(tmp_path, capsys, listops_512,
                                                                 isolated_results):
    """Issue 61: ListOps prepared at T = 512, trained as task=listops_lra, trained, and its record
    and tables called it T = 2000 beside LRA's figure. Now one line names what differs, before
    anything is written: no run directory, no MLflow run."""
    out = tmp_path / "run"
    capsys.readouterr()
    code = main(["train", "--data", str(listops_512), "--out", str(out), "task=listops_lra",
                 "model=mha", "profile=smoke", "--no-progress"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hkt: error")]
    assert code == 2 and len(err) == 1
    assert f"{listops_512} was prepared for task listops (T = 512), not for this run's task " \
           "listops_lra" in err[0]
    assert "task.id is 'listops_lra' here but 'listops' in the data" in err[0]
    assert "task.max_length is 2000 here but 512 in the data" in err[0]
    assert "`hkt prepare listops_lra --out DIR`" in err[0] and "task=listops)" in err[0]
    assert not out.exists() and not list(isolated_results.rglob("meta.yaml")) \
        and not list(isolated_results.rglob("*.db"))
    # T alone (a listops run at T = 1024 on the T = 512 data)
    code, err = _train(listops_512, tmp_path / "run2", capsys, "task.max_length=1024")
    assert code == 2 and "task.max_length is 1024 here but 512 in the data" in err
    assert "task.id" not in err
    # the task it was prepared for trains
    code, err = _train(listops_512, tmp_path / "run3", capsys)
    assert code == 0, err


def test_analyze_refuses_data_of_another_task(tmp_path, capsys, listops_512):
    """`hkt analyze RUN --data DIR`: DIR must be of the run's task (here: its T)."""
    from hkt.data.prepare import prepare_task

    run = tmp_path / "run"
    code, err = _train(listops_512, run, capsys)
    assert code == 0, err
    other = tmp_path / "listops1024"
    prepare_task("listops", other, overrides=["max_length=1024", "prepare.splits.train=8",
                                              "prepare.splits.val=4", "prepare.splits.test=4"])
    code = main(["analyze", str(run), "--out", str(tmp_path / "an"), "--data", str(other)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hkt: error")]
    assert code == 2 and len(err) == 1
    assert "task.max_length is 512 here but 1024 in the data" in err[0]
    assert not (tmp_path / "an").exists()


def _set_tokens(path: Path, row: int, tokens: list[int], column_type: pa.DataType | None = None) -> str:
    """Give ``row`` of a prepared split these tokens (and their length), in a tokens column of
    ``column_type`` (default: the file's), keeping the metadata; return the row's id."""
    table = pq.read_table(path)
    values = table.column("tokens").to_pylist()
    lengths = table.column("length").to_pylist()
    values[row], lengths[row] = tokens, len(tokens)
    kind = column_type or table.schema.field("tokens").type
    table = table.set_column(table.schema.get_field_index("tokens"), "tokens", pa.array(values, kind))
    table = table.set_column(table.schema.get_field_index("length"), "length",
                             pa.array(lengths, pa.int32()))
    pq.write_table(table, path)
    seal_prepared_data(path.parent)
    return table.column("id")[row].as_py()


def test_a_negative_token_id_fails_before_step_1(tmp_path, capsys):
    """Issue 74, 6: a tokens column wider than uint16 can hold -1, which only `>= vocab_size` did
    not see: an IndexError traceback at the final test, after the whole run."""
    data = write_prepared_data(tmp_path / "data", "listops")
    row_id = _set_tokens(data / "test.parquet", 5, [1, -1, 7, 5], pa.list_(pa.int64()))
    code, err = _train(data, tmp_path / "run", capsys, "train.test_batches=1")
    msg = err.strip().splitlines()[-1]
    assert code == 2 and msg.startswith("hkt: error: ") and "test.parquet" in msg, err
    assert "column 'tokens'" in msg and repr(row_id) in msg and "holds -1" in msg and "0..15" in msg
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()  # no step was taken


def test_a_sequence_longer_than_max_length_fails_before_step_1(tmp_path, capsys):
    """Issue 74, 6: a test row longer than T (512) broke the model's positions after training."""
    data = write_prepared_data(tmp_path / "data", "listops")
    row_id = _set_tokens(data / "test.parquet", 3, [6] * 600)
    code, err = _train(data, tmp_path / "run", capsys, "train.test_batches=1")
    msg = err.strip().splitlines()[-1]
    assert code == 2 and msg.startswith("hkt: error: ") and "test.parquet" in msg, err
    assert "column 'length'" in msg and repr(row_id) in msg and "holds 600" in msg
    assert "0..512 (max_length 512" in msg
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def _set_metadata(data: Path, **values) -> None:
    """Change keys of every split's ``hkt`` metadata (as a hand edit would), resealed."""
    for split in ("train", "val", "test"):
        path = data / f"{split}.parquet"
        table = pq.read_table(path)
        meta = {**json.loads(table.schema.metadata[b"hkt"]), **values}
        pq.write_table(table.replace_schema_metadata({"hkt": json.dumps(meta)}), path)
    seal_prepared_data(data)


@pytest.mark.parametrize("vocab,why", [
    (None, "but its 'vocab' lists 16 tokens"),
    ([f"t{i}" for i in range(100000)], "but data family listops has 16 token ids "
                                       "(hkt.data.families.listops.VOCAB)"),
])
def test_metadata_of_another_vocabulary_size_is_refused(tmp_path, capsys, vocab, why):
    """Issue 74, 6: `vocab_size: 100000` in the metadata built a 1.6M-parameter model (12k for
    ListOps's 16 ids) without a word."""
    data = write_prepared_data(tmp_path / "data", "listops")
    _set_metadata(data, vocab_size=100000, **({"vocab": vocab} if vocab else {}))
    code, err = _train(data, tmp_path / "run", capsys)
    lines = [line for line in err.splitlines() if line.startswith("hkt: error")]
    assert code == 2 and len(lines) == 1, err
    assert f"{data / 'train.parquet'}: metadata key 'vocab_size' is 100000, {why}" in lines[0]
    assert f"prepare the data again (`hkt prepare listops --out {data}`)" in lines[0]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_split_whose_max_length_differs_is_refused(tmp_path, capsys):
    """The model's T was the largest split's max_length: one split claiming 4096 passed as
    long as the task said so too; the splits of one preparation share it."""
    data = write_prepared_data(tmp_path / "data", "listops")
    path = data / "test.parquet"
    table = pq.read_table(path)
    meta = {**json.loads(table.schema.metadata[b"hkt"]), "max_length": 4096}
    pq.write_table(table.replace_schema_metadata({"hkt": json.dumps(meta)}), path)
    seal_prepared_data(data)
    code, err = _train(data, tmp_path / "run", capsys)
    assert code == 2 and "metadata key 'max_length' is 4096 but train.parquet's is 512" in err, err


def test_analyze_checks_the_split_it_reads(tmp_path, capsys):
    """Issue 74, 6: `hkt analyze` read its split (test) unchecked: an id = vocab_size there was
    an IndexError traceback from the embedding."""
    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    code, err = _train(data, run, capsys)
    assert code == 0, err
    row_id = _rewrite(data / "test.parquet", "tokens", 2, 16)
    code = main(["analyze", str(run), "--out", str(tmp_path / "an"), "examples=8", "gram_examples=1"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hkt: error")]
    assert code == 2 and len(lines) == 1 and "test.parquet" in lines[0] and repr(row_id) in lines[0]
    assert not (tmp_path / "an").exists()


@pytest.mark.parametrize("split,column,value,allowed", [
    ("test", "label", 10, "0..9"),              # a class the task has not: counted as wrong before
    ("train", "label", -1, "0..9"),
    ("val", "tokens", 16, "0..15"),
])
def test_a_baseline_refuses_out_of_range_values_before_it_fits(tmp_path, capsys, split, column,
                                                               value, allowed):
    """The baselines read the same splits (hkt.baselines.run.read_split) and check them as
    training does (hkt.data.ranges), before fitting: no record."""
    data = write_prepared_data(tmp_path / "data", "listops")
    row_id = _rewrite(data / f"{split}.parquet", column, 5, value)
    capsys.readouterr()
    code = main(["baseline", "majority", "--data", str(data), "--out", str(tmp_path / "run"),
])
    err = capsys.readouterr().err
    assert code == 2, err
    msg = err.strip().splitlines()[-1]
    assert msg.startswith("hkt: error: ") and f"{split}.parquet" in msg
    assert f"column '{column}'" in msg and repr(row_id) in msg and allowed in msg
    assert not (tmp_path / "run" / "record.json").exists()
