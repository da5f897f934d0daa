"""`suite: auto`: the paper suite where CUDA is available, the CPU suite elsewhere, with the
command line's keys still winning; the CUDA check is injected (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hkt.errors import ConfigError
from hkt.workflow.suites import choice_reason, choose_suite, merge, resolve_suite

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def cuda(present: bool):
    return lambda: present


def test_default_is_auto():
    assert CONFIG["suite"] == "auto"


@pytest.mark.parametrize("present, name", [(True, "paper"), (False, "cpu")])
def test_auto_picks_paper_with_cuda_and_cpu_without(present, name):
    assert choose_suite(cuda(present), env={}) == name
    cfg, chosen = resolve_suite(CONFIG, CONFIG_DIR, cuda=cuda(present), env={})
    assert chosen and cfg["suite"] == name
    assert cfg["profile"] == name  # each suite runs its own profile
    if name == "cpu":
        # the paper's table on a CPU: ListOps at the paper's budget, the T = 1024 tasks beside it,
        # levels1 derived from MHA (not trained)
        assert cfg["main"]["tasks"] == ["listops", "cifar10", "imdb"]
        assert cfg["tasks"]["listops"]["profile"] == "paper"
        assert cfg["tasks"]["listops"]["config"] == "listops"  # merged, not replaced
        assert cfg["ablation"]["include"] == [] and cfg["ablation"]["derived"] == {"levels1": "mha"}
        assert cfg["resources"]["train"]["gpu"] == 0
    else:
        assert cfg["main"] == CONFIG["main"] and cfg["resources"]["train"]["gpu"] == 1


def test_hkt_suite_variable_overrides_the_device_check():
    assert choose_suite(cuda(True), env={"HKT_SUITE": "cpu"}) == "cpu"
    cfg, _ = resolve_suite(CONFIG, CONFIG_DIR, cuda=cuda(True), env={"HKT_SUITE": "smoke"})
    assert cfg["suite"] == "smoke" and cfg["profile"] == "smoke"
    # the workflow's first line says why: the variable, not the device
    assert choice_reason("smoke", env={"HKT_SUITE": "smoke"}) == "$HKT_SUITE=smoke"
    assert choice_reason("paper", env={}) == "CUDA available"
    assert choice_reason("cpu", env={}) == "no CUDA"


def test_command_line_keys_win_over_the_chosen_suite():
    given = {"results_dir": "elsewhere", "seeds": [7], "resources": {"train": {"threads": 2}}}
    cfg, _ = resolve_suite(merge(CONFIG, given), CONFIG_DIR, overrides=given, cuda=cuda(False),
                           env={})
    assert cfg["suite"] == "cpu" and cfg["results_dir"] == "elsewhere" and cfg["seeds"] == [7]
    assert cfg["resources"]["train"] == {**cfg["resources"]["train"], "threads": 2, "gpu": 0}


def test_a_named_suite_is_used_as_given():
    smoke = yaml.safe_load((CONFIG_DIR / "suites" / "smoke.yaml").read_text())
    given = merge(CONFIG, smoke)
    cfg, chosen = resolve_suite(given, CONFIG_DIR, overrides=smoke, files=True, cuda=cuda(True))
    assert not chosen and cfg == given and cfg["suite"] == "smoke"


def test_config_files_without_a_suite_name_are_custom():
    extra = {"lra": {"enabled": True}}
    cfg, chosen = resolve_suite(merge(CONFIG, extra), CONFIG_DIR, overrides=extra, files=True,
                                cuda=cuda(False), env={})
    assert not chosen and cfg["suite"] == "custom" and cfg["profile"] == CONFIG["profile"]


def test_unknown_suite_lists_the_suites():
    with pytest.raises(ConfigError, match=r"no config/suites/gpu8.yaml \(suites: cpu, paper, quick, s4_recipe, sensitivity, smoke"):
        resolve_suite(CONFIG, CONFIG_DIR, cuda=cuda(False), env={"HKT_SUITE": "gpu8"})


def test_merge_merges_dictionaries_and_replaces_lists():
    assert merge({"a": {"x": 1, "y": [1, 2]}, "b": [1]}, {"a": {"y": [3]}, "b": [2, 3]}) == \
        {"a": {"x": 1, "y": [3]}, "b": [2, 3]}


def test_every_suite_file_names_itself_and_passes_the_schema():
    from hkt.workflow.grid import Grid, check_config

    for path in sorted((CONFIG_DIR / "suites").glob("*.yaml")):
        cfg = merge(CONFIG, yaml.safe_load(path.read_text()))
        assert cfg["suite"] == path.stem
        check_config(cfg, SCHEMA)
        Grid(cfg, CONFIG_DIR)
