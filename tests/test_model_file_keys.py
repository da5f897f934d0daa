"""A model file is what it says: every key ``config/model/NAME.yaml`` sets survives every profile
(issue 73), and ``hkt train --print-config`` names the file that set each key."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from hkt.cli.main import main
from hkt.config_compose import config_dir, flatten
from hkt.config_sources import COMMAND_LINE, key_sources
from hkt.train.run_config import compose_train, load_config

CONFIG = config_dir()
PROFILES = sorted(p.stem for p in (CONFIG / "profile").glob("*.yaml"))
# sizes no profile uses (n_heads divides d_model), set in a copy of every model file
SIZES = {"d_model": 24, "n_layers": 3, "n_heads": 3, "d_ffn": 40}


def own_keys(path: Path) -> dict:
    """The keys a model file sets itself (under ``model.``), its defaults list aside."""
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    node.pop("defaults", None)
    return flatten(node, "model") if node else {}


def tasks_of(profile: str) -> list[str]:
    """listops, and every task the profile has a file of its own for (profile_task/)."""
    own = [p.stem.removeprefix(f"{profile}_") for p in (CONFIG / "profile_task").glob(f"{profile}_*.yaml")]
    return sorted({"listops", *own})


def exempt(cdir: Path, profile: str, model: str) -> set[str]:
    """Keys a file for this profile and model alone sets (config/profile_model/): it wins, by design."""
    path = cdir / "profile_model" / f"{profile}_{model}.yaml"
    return set(flatten(OmegaConf.to_container(OmegaConf.load(path), resolve=False))) if path.is_file() else set()


@pytest.fixture(scope="module")
def sized_config(tmp_path_factory) -> Path:
    """config/ with NAME_sized.yaml beside every model file: the file plus explicit sizes."""
    cdir = tmp_path_factory.mktemp("cfg") / "config"
    shutil.copytree(CONFIG, cdir)
    for path in sorted((CONFIG / "model").glob("*.yaml")):
        sizes = "".join(f"{k}: {v}\n" for k, v in SIZES.items())
        (cdir / "model" / f"{path.stem}_sized.yaml").write_text(path.read_text() + sizes)
    return cdir


@pytest.mark.parametrize("profile", PROFILES)
def test_every_key_a_model_file_sets_survives_every_profile(profile, sized_config, monkeypatch):
    monkeypatch.setenv("HKT_CONFIG_DIR", str(sized_config))
    models = sorted((sized_config / "model").glob("*.yaml"))
    assert len(models) == 2 * len(list((CONFIG / "model").glob("*.yaml")))
    for path in models:
        keys = own_keys(path)
        if path.stem.endswith("_sized"):
            assert {f"model.{k}": v for k, v in SIZES.items()}.items() <= keys.items()
        for task in tasks_of(profile):
            cfg = flatten(compose_train([f"model={path.stem}", f"profile={profile}", f"task={task}"]))
            lost = {k: (v, cfg[k]) for k, v in keys.items()
                    if k not in exempt(sized_config, profile, path.stem) and cfg[k] != v}
            assert not lost, f"{path.name} at profile={profile} task={task}: {lost}"


def test_a_profile_still_sizes_a_model_whose_file_leaves_sizes_unset():
    cfg = compose_train(["model=mha", "profile=paper", "task=imdb"])
    assert (cfg.model.d_model, cfg.model.n_layers, cfg.model.n_heads) == (256, 4, 4)


def test_print_config_names_the_file_that_set_each_key(sized_config, monkeypatch, capsys):
    monkeypatch.setenv("HKT_CONFIG_DIR", str(sized_config))
    assert main(["train", "--print-config", "model=mha_sized", "profile=paper", "task=imdb",
                 "optim.warmup_steps=10"]) == 0
    lines = {m.group(1): (m.group(2), m.group(3)) for m in
             re.finditer(r"^ *(\w+): (\S*) +# (.+)$", capsys.readouterr().out, re.M)}
    assert lines["n_heads"] == ("3", "config/model/mha_sized.yaml")
    assert lines["d_ffn"] == ("40", "config/model/mha_sized.yaml")
    assert lines["max_steps"] == ("20000", "config/profile_task/paper_imdb.yaml")
    assert lines["weight_decay"] == ("0.01", "config/profile/paper.yaml")
    assert lines["warmup_steps"] == ("10", COMMAND_LINE)
    assert lines["variant"] == ("main", "the name of config/variant/main.yaml")
    assert lines["dropout"][1] == "the defaults of mixer mha (/schema/model/mha)"


def test_the_annotated_config_reads_as_the_config(capsys):
    """The comments change nothing a YAML reader sees, a long text folded over lines included."""
    from hkt.config_sources import annotate_yaml

    assert main(["train", "--print-config", "model=s4d", "profile=s4_recipe"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == OmegaConf.to_container(load_config(["model=s4d", "profile=s4_recipe"]))
    node = {"a": {"note": " ".join(["word"] * 40), "b": [1, 2]}, "c": 3}
    text = annotate_yaml(OmegaConf.to_yaml(node), {"a.note": "x.yaml", "a.b": "y.yaml", "c": "z.yaml"})
    assert yaml.safe_load(text) == node and "x.yaml" not in text  # the folded text: none
    assert "\n" + "  b:".ljust(44) + " # y.yaml\n" in text and text.endswith("c: 3".ljust(44) + " # z.yaml\n")


@pytest.mark.parametrize("overrides", [
    ["model=s4d", "profile=s4_recipe", "task=listops"],      # model_optim, then profile_model
    ["model=hkt", "profile=paper", "task=cifar10", "variant=levels1"],
])
def test_each_key_holds_the_value_of_the_file_named_for_it(overrides):
    """The source named is the last file setting the key: its value is the composed one."""
    cfg = flatten(OmegaConf.to_container(compose_train(overrides, resolve=False), resolve=False))
    files = {}
    for key, source in key_sources("train", overrides).items():
        if not source.startswith("config/"):
            continue
        if source not in files:
            files[source] = _as_composed(CONFIG.parent / source)
        assert files[source][key] == cfg[key], (key, source)


def _as_composed(path: Path) -> dict:
    """A config file's keys where Hydra puts them: under its group, unless its header says
    ``@package _global_`` (config/train.yaml is the root)."""
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    node.pop("defaults", None)
    group = path.parent.name
    root = path.parent == CONFIG or "@package _global_" in path.read_text()
    return flatten(node, "" if root else group)
