"""A task file's ``id`` is its file name, checked wherever a task file is used: ``hkt prepare``,
``hkt train`` and the workflow. A copied ``listops.yaml`` that keeps ``id: listops`` would
otherwise log into ``hkt-<profile>-listops``, the original's experiment."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from hkt.data.task_config import load_task_config
from hkt.data.taskfile import task_id_problem
from hkt.errors import ConfigError
from hkt.train.run_config import compose_train
from hkt.workflow.grid import Grid, GridError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "config" / "task").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_task_file_has_its_name_as_id(path: Path) -> None:
    assert task_id_problem(path) is None


@pytest.fixture
def stale_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config directory with ``task/listops_long.yaml``, a copy of listops.yaml (``id: listops``)."""
    cdir = tmp_path / "config"
    shutil.copytree(ROOT / "config", cdir)
    shutil.copy(cdir / "task" / "listops.yaml", cdir / "task" / "listops_long.yaml")
    monkeypatch.setenv("HKT_CONFIG_DIR", str(cdir))
    return cdir


def test_the_message_names_the_file_and_the_key(stale_copy: Path) -> None:
    problem = task_id_problem(stale_copy / "task" / "listops_long.yaml")
    assert "listops_long.yaml" in problem and "`id: listops`" in problem
    assert "`id: listops_long`" in problem  # what to write instead


def test_an_inherited_id_is_stale_too(stale_copy: Path) -> None:
    """A file that builds on another and states no ``id`` of its own would take the other's."""
    (stale_copy / "task" / "listops_long.yaml").write_text("defaults:\n  - listops\n  - _self_\n"
                                                           "max_length: 1024\n")
    assert "has no key `id`" in task_id_problem(stale_copy / "task" / "listops_long.yaml")


def test_prepare_refuses_a_stale_id(stale_copy: Path) -> None:
    with pytest.raises(ConfigError, match=r"listops_long\.yaml has `id: listops`"):
        load_task_config("listops_long")
    (stale_copy / "task" / "listops_long.yaml").write_text(
        (stale_copy / "task" / "listops.yaml").read_text().replace("id: listops ", "id: listops_long "))
    assert load_task_config("listops_long")["id"] == "listops_long"


def test_train_refuses_a_stale_id(stale_copy: Path) -> None:
    with pytest.raises(ConfigError, match=r"listops_long\.yaml has `id: listops`"):
        compose_train(["task=listops_long"], check_types=False)
    assert compose_train(["task=imdb"], check_types=False).task.id == "imdb"  # others unaffected


def test_train_checks_the_default_task(stale_copy: Path) -> None:
    """No ``task=`` override: the task ``train.yaml`` selects is checked."""
    text = (stale_copy / "task" / "listops.yaml").read_text()
    (stale_copy / "task" / "listops.yaml").write_text(text.replace("id: listops ", "id: listops_old "))
    with pytest.raises(ConfigError, match=r"listops\.yaml has `id: listops_old`"):
        compose_train([], check_types=False)


def test_the_workflow_refuses_a_stale_id(stale_copy: Path) -> None:
    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    config["tasks"]["listops_long"] = {"config": "listops_long", "prepare": [], "source": None}
    config["main"] = {**config["main"], "tasks": ["listops_long"]}
    with pytest.raises(GridError, match=r"task 'listops_long': .*listops_long\.yaml has `id: listops`"):
        Grid(config, stale_copy, cpus=4)
