"""Prepared data with out-of-range values fail before step 1, through ``hkt train`` (issue 11: 1)."""

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
    ("test", "tokens", 18, "0..17"),     # read only at the final test before the fix
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
