"""Training configs: every combination composes and validates; bad overrides fail clearly, early."""

from __future__ import annotations

import pytest

from hkt.cli import main
from hkt.config import compose, config_dir
from hkt.errors import ConfigError
from hkt.train.config import load_config

TASKS = ["listops", "imdb", "cifar10"]


def groups(name: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / name).glob("*.yaml"))


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("model", ["mha", "hkt"])
def test_every_profile_task_model_composes(profile, task, model):
    cfg = load_config([f"profile={profile}", f"task={task}", f"model={model}"])
    assert cfg.train.profile == profile
    assert cfg.task.name == task and cfg.model.name == model
    assert cfg.tracking.run_name == f"{task}-{model}-default-s0"


@pytest.mark.parametrize("model", groups("model"))
def test_every_model_option_validates(model):
    assert load_config([f"model={model}", "profile=smoke"]).model.name == model


@pytest.mark.parametrize("experiment", groups("experiment"))
def test_every_experiment_composes(experiment):
    cfg = load_config([f"experiment={experiment}", "profile=smoke"])
    assert cfg.variant != "default"


def test_paper_profile_sizes_are_per_task():
    listops = load_config(["profile=paper", "task=listops"])
    imdb = load_config(["profile=paper", "task=imdb"])
    cifar = load_config(["profile=paper", "task=cifar10"])
    assert (listops.model.n_layers, listops.model.d_model, listops.model.n_heads) == (2, 64, 2)
    assert (imdb.model.n_layers, imdb.model.d_model, imdb.model.n_heads) == (4, 256, 4)
    assert (cifar.model.n_layers, cifar.model.d_model) == (2, 64)
    assert cifar.train.batch_size == 256
    # a command-line override still wins over the per-task table
    assert load_config(["profile=paper", "task=imdb", "model.d_model=128"]).model.d_model == 128


def test_ablation_sets_levels_and_variant():
    cfg = load_config(["experiment=levels1"])
    assert cfg.model.name == "hkt"
    assert cfg.model.attention.levels == 1 and cfg.variant == "levels1"


def test_tracking_defaults_follow_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("HKT_RESULTS_DIR", str(tmp_path))
    cfg = load_config([])
    assert cfg.tracking.uri is None and cfg.tracking.results_dir == str(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert load_config([]).tracking.uri == "http://127.0.0.1:5000"


@pytest.mark.parametrize("override, key", [
    ("model=transformerxl", "model"),                    # unknown group option
    ("profile=huge", "profile"),
    ("model.widht=64", "model.widht"),                   # unknown key
    ("optim.lrr=1e-3", "optim.lrr"),
    ("model.d_model=abc", "model.d_model"),              # wrong type
    ("train.max_steps=1.5", "train.max_steps"),
    ("train.compile=maybe", "train.compile"),
    ("optim.betas=[0.9]", "optim.betas"),
    ("model.attention.levels=0", "model.attention.levels"),  # impossible values
    ("model.attention.stride=1", "model.attention.stride"),
    ("model.attention.kernel_size=1", "model.attention.kernel_size"),
    ("model.n_heads=3", "model.d_model"),
    ("model.dropout=1.5", "model.dropout"),
    ("optim.lr=0", "optim.lr"),
    ("optim.schedule=step", "optim.schedule"),
    ("train.batch_size=0", "train.batch_size"),
    ("train.device=tpu", "train.device"),
    ("seed=-1", "seed"),
    ("variant=a b", "variant"),
])
def test_bad_override_names_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        load_config([override])
    assert key in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_linear_upsampling_with_causal_is_refused():
    with pytest.raises(ConfigError, match="model.attention.upsample"):
        load_config(["model=hkt", "model.causal=true", "model.attention.upsample=linear"])


def test_attention_argument_of_another_model_is_refused():
    with pytest.raises(ConfigError, match="model.attention.levels"):
        load_config(["model=mha", "+model.attention.levels=2"])


def test_unknown_group_option_lists_the_options():
    with pytest.raises(ConfigError) as err:
        compose("train", ["model=nope"])
    assert "hkt" in str(err.value) and "mha" in str(err.value)


def test_cli_bad_override_stops_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--data", str(tmp_path / "missing"), "--out", str(out),
                 "model.attention.levels=0"])
    err = capsys.readouterr().err
    assert code == 2
    assert "model.attention.levels" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_print_config(capsys):
    assert main(["train", "--print-config", "profile=smoke", "model=mha"]) == 0
    text = capsys.readouterr().out
    assert "profile: smoke" in text and "name: mha" in text
