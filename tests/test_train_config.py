"""Training configs: every combination composes and validates; bad overrides fail clearly, early."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from hkt.cli.main import main
from hkt.config_compose import config_dir
from hkt.errors import ConfigError
from hkt.train.run_config import compose_train, load_config


def groups(name: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / name).glob("*.yaml"))


# the main table's tasks (config/config.yaml), derived: a task added there is composed here too
TASKS = [str(task) for task in yaml.safe_load((config_dir() / "config.yaml").read_text())["main"]["tasks"]]


@pytest.mark.parametrize("profile", groups("profile"))
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("model", groups("model"))
def test_every_profile_task_model_composes(profile, task, model):
    cfg = load_config([f"profile={profile}", f"task={task}", f"model={model}"])
    assert cfg.train.profile == profile
    # the model file's name labels the runs (model.name is the mixer it builds: a copy of
    # mha.yaml builds "mha"); no variant: the unablated run
    assert cfg.task.family == task and cfg.tracking.model == model
    assert cfg.tracking.run_name == f"{task}-{model}-main-s0"


@pytest.mark.parametrize("model", groups("model"))
def test_every_model_option_validates(model):
    assert load_config([f"model={model}", "profile=smoke"]).tracking.model == model


@pytest.mark.parametrize("variant", groups("variant"))
def test_every_variant_composes_labelled_with_its_file_name(variant):
    cfg = load_config([f"variant={variant}", "profile=smoke"])
    assert cfg.variant == variant
    assert cfg.tracking.run_name == f"listops-{cfg.tracking.model}-{variant}-s0"


def test_a_variant_file_labels_its_runs_by_its_name(tmp_path, monkeypatch):
    """A new variant file needs no label of its own: its name is the runs' variant."""
    import shutil

    cdir = tmp_path / "config"
    shutil.copytree(config_dir(), cdir)
    (cdir / "variant" / "my_levels.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: hkt\n"
        "model:\n  mixer:\n    levels: 2\n")
    monkeypatch.setenv("HKT_CONFIG_DIR", str(cdir))
    cfg = load_config(["variant=my_levels", "profile=smoke"])
    assert cfg.variant == "my_levels" and cfg.model.mixer.levels == 2


@pytest.mark.parametrize("override, key", [
    ("model.attention.levels=2", "model.attention"),      # model.mixer before 0.2.0
    ("model.attn_dropout=0.2", "model.attn_dropout"),     # model.mixer_dropout
    ("task.name=imdb", "task.name"),                      # task.family
])
def test_a_name_of_before_0_2_0_is_an_unknown_key_in_one_line(override, key):
    """There is no old-name layer: an old override fails as any misspelt key does (results saved
    under the old names are migrated once, scripts/migrate_results.py)."""
    with pytest.raises(ConfigError) as err:
        load_config(["task=listops", "model=hkt", "profile=smoke", override])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"unknown config key '{key}' (from override '{override}'); check "
                              "the spelling, or see the keys with: hkt train --print-config")


def test_the_old_experiment_group_is_an_unknown_group_in_one_line(capsys):
    """``experiment=`` was the variant group before 0.2.0: now one line, no warning, no config."""
    with pytest.raises(ConfigError) as err:
        load_config(["experiment=levels1"])
    message = str(err.value)
    assert "\n" not in message and "experiment" in message
    assert "warning" not in capsys.readouterr().err


def test_an_encoder_config_with_an_old_key_lists_the_settings():
    from hkt.models.encoder import EncoderConfig
    from hkt.report.mlflow_runs import mixer_param

    with pytest.raises(ConfigError, match=r"attention.*not a setting of the encoder \(it has: "
                                          r".*mixer, mixer_dropout"):
        EncoderConfig.from_mapping({"name": "hkt", "attention": {"levels": 2}})
    assert mixer_param({"model.mixer.levels": "2"}, "levels") == "2"
    assert mixer_param({}, "levels") is None


def test_how_a_session_stops_reports_or_threads_defines_no_new_run():
    """Changing a display or signal setting, or the CPU threads (where a run runs, like the CPU),
    must not re-run a suite's jobs (the workflow's config digest) nor make
    `--restart-if-changed` empty a finished run (the run's compared config)."""
    from hkt.train.run_config import strip_for_compare
    from hkt.workflow.job_configs import train_config_digest

    base = ["task=listops", "model=mha", "profile=smoke"]
    for key in ("train.progress_every_s=5", "train.stop_grace_s=1", "train.num_threads=2"):
        assert train_config_digest([*base, key]) == train_config_digest(base), key
        assert strip_for_compare(load_config([*base, key])) == strip_for_compare(load_config(base))
    assert train_config_digest([*base, "train.log_every=5"]) != train_config_digest(base)


def test_the_config_digest_is_taken_under_the_current_names():
    """Every key counts under its name: the digest of a saved config is its composed config's,
    and it changes with the mixer's dropout and with the norm (a key added in 0.1)."""
    from omegaconf import OmegaConf

    from hkt.workflow.job_configs import config_digest, train_config_digest

    base = ["task=listops", "model=conv", "profile=smoke"]
    cfg = load_config([*base, "model.mixer_dropout=0.2"])
    assert train_config_digest([*base, "model.mixer_dropout=0.2"]) == config_digest(
        OmegaConf.to_container(cfg)) != train_config_digest(base)
    assert train_config_digest([*base, "model.norm=batch"]) != train_config_digest(base)


def test_an_unknown_variant_is_one_line_listing_the_variants():
    with pytest.raises(ConfigError) as err:
        load_config(["variant=levels9"])
    message = str(err.value)
    assert "\n" not in message
    assert message == ("variant=levels9: no such option in config group 'variant' (available: "
                       f"{', '.join(groups('variant'))}); did you mean levels1, levels2 or levels4?")


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
    cfg = load_config(["variant=levels1"])
    assert cfg.model.name == "hkt"
    assert cfg.model.mixer.levels == 1 and cfg.variant == "levels1"


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
    ("model.mixer.levels=0", "model.mixer.levels"),  # impossible values
    ("model.mixer.stride=1", "model.mixer.stride"),
    ("model.mixer.kernel_size=1", "model.mixer.kernel_size"),
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
    with pytest.raises(ConfigError, match="model.mixer.upsample"):
        load_config(["model=hkt", "model.causal=true", "model.mixer.upsample=linear"])


def test_attention_argument_of_another_model_is_refused():
    with pytest.raises(ConfigError, match="model.mixer.levels"):
        load_config(["model=mha", "+model.mixer.levels=2"])


def test_unknown_group_option_lists_the_options():
    with pytest.raises(ConfigError) as err:
        compose_train(["model=nope"])
    assert "hkt" in str(err.value) and "mha" in str(err.value)


def test_a_model_file_naming_no_registered_mixer_says_which_are(tmp_path, monkeypatch):
    """A model file whose ``/schema/model/NAME`` names no mixer: the error lists the registered
    mixers (Hydra's own says the group has no options: it holds no files)."""
    import shutil

    cdir = tmp_path / "config"
    shutil.copytree(config_dir(), cdir)
    mha = (cdir / "model" / "mha.yaml").read_text()
    assert "/schema/model/mha@_here_" in mha
    (cdir / "model" / "mine.yaml").write_text(mha.replace("/schema/model/mha@", "/schema/model/mhaa@"))
    monkeypatch.setenv("HKT_CONFIG_DIR", str(cdir))
    with pytest.raises(ConfigError) as err:
        compose_train(["model=mine"])
    # the registered list is what this process registered: other tests add mixers of their own
    m = re.fullmatch(r"schema/model/mhaa: no registered token mixer is named 'mhaa' \(registered: "
                     r"([\w, ]+)\); register it in hkt\.mixers \(docs/extending\.md\) or fix the "
                     r"model file's /schema/model entry; did you mean mha\?", str(err.value))
    assert m, str(err.value)
    assert {"conv", "hkt", "mha", "s4d"} <= set(m.group(1).split(", "))


def test_train_yaml_composed_without_its_schemas_says_how_to_compose_it():
    """In a fresh process nothing has registered the mixers' structured configs: composing
    train.yaml with the bare ``compose`` names ``compose_train``, the function that does."""
    code = ("from hkt.config_compose import compose\n"
            "from hkt.errors import ConfigError\n"
            "try:\n    compose('train', ['model=conv'])\n"
            "except ConfigError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("schema/model/conv: the structured config a model file selects is not "
                        "registered in this process; compose train.yaml with "
                        "hkt.train.run_config.compose_train (or load_config), which registers "
                        "every mixer's first, not with compose alone\n")


def test_cli_bad_override_stops_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--data", str(tmp_path / "missing"), "--out", str(out),
                 "model.mixer.levels=0"])
    err = capsys.readouterr().err
    assert code == 2
    assert "model.mixer.levels" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_print_config(capsys):
    assert main(["train", "--print-config", "profile=smoke", "model=mha"]) == 0
    text = capsys.readouterr().out
    assert "profile: smoke" in text and "name: mha" in text


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_matched_mha_has_hkt_parameter_count(profile):
    """variant=mha_matched widens MHA's d_ffn until it has HKT's parameter count."""
    from hkt.models import build_model

    def count(cfg):
        model = build_model(cfg.model, vocab_size=2, num_classes=10, max_length=512)
        return sum(p.numel() for p in model.parameters())

    base = [f"profile={profile}", "task=listops"]
    matched = load_config([*base, "model=mha", "variant=mha_matched"])
    plain, hkt = load_config([*base, "model=mha"]), load_config([*base, "model=hkt"])
    assert matched.variant == "mha_matched" and matched.model.match_params_of == "hkt"
    assert matched.model.d_ffn > plain.model.d_ffn
    unit = plain.model.n_layers * (2 * plain.model.d_model + 1)
    assert abs(count(matched) - count(hkt)) <= unit / 2 < count(hkt) - count(plain)


@pytest.mark.parametrize("override", ["optim.lr=nan", "optim.lr=inf", "optim.lr=1e39",
                                      "optim.eps=nan", "optim.weight_decay=-inf",
                                      "model.dropout=nan", "model.mixer.chunk_mib=inf"])
def test_non_finite_floats_are_refused_naming_the_key(override):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=f"config key '{key}' = .*must be a finite number"):
        load_config([override])


def test_attention_set_to_null_is_a_bad_value_not_an_unknown_key():
    with pytest.raises(ConfigError) as err:
        load_config(["model.mixer=null"])
    assert "'model.mixer'" in str(err.value) and "unknown" not in str(err.value)


def test_wrong_type_names_key_and_value():
    with pytest.raises(ConfigError, match=r"config key 'model.d_model': Value 'abc'"):
        load_config(["model.d_model=abc"])


def test_module_configs_state_the_defaults_once():
    """The model YAML files select the dataclasses; they repeat no default."""
    from dataclasses import asdict

    from hkt.mixers.hkt import HKTConfig
    from hkt.models import EncoderConfig

    cfg = load_config(["model=hkt"])
    assert dict(cfg.model.mixer) == asdict(HKTConfig())
    assert cfg.model.norm_eps == EncoderConfig().norm_eps
    from hkt.mixers import MIXERS

    for name in groups("model"):
        text = (config_dir() / "model" / f"{name}.yaml").read_text()
        # its mixer's schema: its own name's, or another's for a copy (mine.yaml of mha.yaml)
        schema = re.search(r"^  - /schema/model/(\w+)@_here_$", text, re.M)
        assert schema and schema.group(1) in MIXERS, name
        assert not [line for line in text.splitlines()
                    if line and not line.startswith(("#", "defaults:", "  - "))]


def test_training_logs_go_to_the_stderr_of_the_moment(capsys):
    """The `hkt.train` logger's handler writes to sys.stderr as it is when a record is logged: a
    second command in the same process, with stderr redirected in between, is not written into
    the first one's (closed) stream."""
    import io
    import logging
    import sys

    from hkt.logs import stderr_handler

    logger = logging.getLogger("hkt.test_logs")
    logger.addHandler(stderr_handler("hkt: %(message)s"))
    logger.setLevel(logging.INFO)
    logger.propagate = False  # only this handler: `hkt` may have one from an earlier command
    try:
        first = io.StringIO()
        saved, sys.stderr = sys.stderr, first
        logger.info("one")
        first.close()
        sys.stderr = io.StringIO()
        logger.info("two")
        assert sys.stderr.getvalue() == "hkt: two\n"
    finally:
        sys.stderr = saved
        logger.handlers.clear()
        logger.propagate = True


def test_hkt_train_types_the_config_at_most_once_per_layer(tmp_path, monkeypatch, capsys):
    """`hkt train model=hkt` on the 2-layer paper model constructs HKT's config once, not once
    per check: loading types it and building the model uses that (issue 62)."""
    from conftest import write_prepared_data
    from hkt.mixers.hkt import HKTConfig

    made = []
    checks = HKTConfig.__post_init__

    def counted(self):
        made.append(self)
        checks(self)

    monkeypatch.setattr(HKTConfig, "__post_init__", counted)
    data = write_prepared_data(tmp_path / "data", "listops")
    args = ["train", "--data", str(data), "--out", str(tmp_path / "run"), "--no-progress",
            "model=hkt", "task=listops", "profile=paper", "train.max_steps=1",
            "optim.warmup_steps=0", "train.batch_size=8", "train.eval_batches=1",
            "train.test_batches=1", "train.precision=fp32", "train.num_threads=1",
            "tracking.enabled=false"]
    assert main(args) == 0, capsys.readouterr().err
    constructed = len(made)
    layers = load_config(["model=hkt", "task=listops", "profile=paper"]).model.n_layers
    assert layers == 2
    assert 1 <= constructed <= layers
