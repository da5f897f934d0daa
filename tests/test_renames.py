"""One word per idea (issue 40): the data family is ``task.family`` (``task.name`` before), and the
unablated run is labelled ``main`` (a bare ``hkt train`` said ``default``). Old configs, records
and overrides keep working and digest as the new ones, so nothing published reruns."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from hkt.errors import ConfigError
from hkt.renames import digest_form, upgrade_saved_config, upgrade_saved_record
from hkt.train.config import load_config
from hkt.workflow.configs import config_digest, train_config_digest

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
PUBLISHED = ROOT / "docs" / "results" / "cpu" / "runs" / "listops" / "hkt" / "main" / "seed0"
OVERRIDES = ["task=listops", "model=hkt", "profile=cpu", "variant=main", "seed=0"]


def _as_saved_before(cfg: dict) -> dict:
    """``cfg`` as a run saved it before the renames: ``task.name`` in ``task.family``'s place,
    ``variant: default``."""
    old = copy.deepcopy(cfg)
    old["task"] = {("name" if k == "family" else k): v for k, v in old["task"].items()}
    old["variant"] = "default"
    return old


def test_a_config_saved_with_task_name_reads_and_digests_as_the_new_one():
    from omegaconf import OmegaConf

    new = OmegaConf.to_container(load_config(OVERRIDES), resolve=True)
    assert new["task"]["family"] == "listops" and "name" not in new["task"]
    old = _as_saved_before(new)
    assert upgrade_saved_config(old) == new
    assert list(upgrade_saved_config(old)["task"]) == list(new["task"])  # a saved file's order
    assert config_digest(old) == config_digest(new) == train_config_digest(OVERRIDES)
    # the digest is taken under the old key name: what the published digests were taken of
    assert digest_form({"task": {"family": "x"}}) == {"task": {"name": "x"}}


def test_a_published_record_reads_with_task_family_and_keeps_its_digest():
    from hkt.record import load_record

    raw = json.loads((PUBLISHED / "record.json").read_text())
    assert raw["config"]["task"]["name"] == "listops"  # published before the rename
    rec = load_record(PUBLISHED / "record.json")
    assert rec["config"]["task"]["family"] == "listops" and "name" not in rec["config"]["task"]
    saved = yaml.safe_load((PUBLISHED / "config.yaml").read_text())
    assert config_digest(raw["config"]) == config_digest(rec["config"]) == config_digest(saved)


def test_the_old_task_name_override_composes_the_same_config_and_warns(capsys):
    old = load_config(["task=imdb", "task.name=imdb"])
    assert "'task.name=imdb' is deprecated" in capsys.readouterr().err
    assert old == load_config(["task=imdb", "task.family=imdb"]) == load_config(["task=imdb"])


def test_a_task_file_still_saying_name_is_refused_with_the_fix():
    from hkt.data.config import validate_task

    task = {"id": "mine", "name": "listops", "num_classes": 10, "max_length": 512, "prepare": {}}
    with pytest.raises(ConfigError, match=r"'task.name' is now 'task.family'.*`family: listops`"):
        validate_task(task)
    with pytest.raises(ConfigError, match=r"task.family must be one of cifar10, imdb, listops"):
        validate_task({**task, "family": "mnist"})


# ------------------------------------------------------------------ one label for the unablated run


def test_a_run_given_no_variant_is_the_main_run():
    from hkt.workflow.grid import MAIN

    bare = load_config(["task=listops", "model=hkt"])
    assert bare.variant == MAIN == "main"
    assert bare == load_config(["task=listops", "model=hkt", f"variant={MAIN}"])
    assert (CONFIG_DIR / "variant" / f"{MAIN}.yaml").is_file()
    assert not (CONFIG_DIR / "variant" / "default.yaml").exists()


def test_every_job_of_the_workflow_is_labelled_by_a_variant_file():
    from hkt.workflow.grid import Grid

    config = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
    config["lra"]["enabled"] = True
    grid = Grid(config, CONFIG_DIR)
    files = {p.stem for p in (CONFIG_DIR / "variant").glob("*.yaml")}
    jobs = [*grid.train_jobs(), *grid.external_jobs(), *grid.analysis_jobs()]
    assert jobs and {j.variant for j in jobs} <= files, {j.variant for j in jobs} - files


def test_an_old_default_run_reads_as_main_everywhere(tmp_path):
    from hkt.record import load_record, make_record, write_record
    from hkt.runs import record_row

    rec = make_record(task="listops", model="mha", variant="default", seed=0, profile="smoke",
                      config={"task": {"name": "listops", "max_length": 8}, "variant": "default"},
                      n_params=1, steps=1, best_step=1, val_accuracy=0.5, test_accuracy=0.5,
                      data_dir=tmp_path, data_checksums={})
    write_record(rec, tmp_path / "record.json")
    read = load_record(tmp_path / "record.json")
    assert read["variant"] == "main" and read["config"]["variant"] == "main"
    assert read["config"]["task"] == {"family": "listops", "max_length": 8}
    assert record_row(rec)["variant"] == "main"
    assert upgrade_saved_record(rec)["variant"] == "main" and rec["variant"] == "default"
    other = {**rec, "variant": "levels1", "config": {"variant": "levels1"}}
    assert upgrade_saved_record(other) == other  # other labels as they are
