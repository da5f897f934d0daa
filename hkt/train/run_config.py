"""Compose and validate the training config (``config/train.yaml``) before any work starts.

Hydra (through :func:`hkt.config_compose.compose`) catches unknown group options, unknown keys and wrong
types; :func:`validate` catches the values that are well-typed but impossible, with the checks
of :mod:`hkt.value_checks`: the model through its typed config (:class:`hkt.models.EncoderConfig`,
which holds the token mixer's), the task through its family's schema
(:func:`hkt.data.task_config.validate_task`), the rest through :data:`SCHEMA`, plus the few checks
that span keys. Each failure is one :class:`hkt.errors.ConfigError` naming the key.

:func:`load_config` also resolves ``model.match_params_of`` (the size-matched baseline): the
model's ``d_ffn`` is widened to the parameter count of the named mixer's model.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from omegaconf import DictConfig, OmegaConf

from hkt.value_checks import (
    boolean,
    check_schema,
    choice,
    label,
    nonneg_int,
    number,
    number_list,
    optional,
    pos_int,
    spec,
    text,
)
from hkt.config_compose import compose, config_dir, store_model_keys
from hkt.data.taskfile import task_id_problem
from hkt.errors import ConfigError, ConfigValueError, did_you_mean
from hkt.provenance import SUITE_ENV

if TYPE_CHECKING:  # the model side pulls in torch, which a command's start-up avoids
    from hkt.models import EncoderConfig

__all__ = ["CONFIG_NAME", "SCHEMA", "RunConfig", "compose_train", "load_run_config", "load_config",
           "validate", "match_params", "strip_for_compare"]

CONFIG_NAME = "train"
log = logging.getLogger("hkt.train")


def _tracking_uri(value: Any, key: str) -> Any:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigValueError(key, value, "must be a tracking URI (sqlite:///…, http://…, "
                                           "file:…) or null")
    return value


# Keys that are gone, and what replaced them.
GONE_KEYS = {"tracking.suite": f"a run learns its suite from ${SUITE_ENV}, which the workflow sets "
                               f"for its jobs; run `{SUITE_ENV}=NAME hkt train …`"}

# Everything but `task` and `model`, which their owners' checks validate.
SCHEMA: dict[str, Any] = {
    "seed": nonneg_int,
    "variant": label,
    "train": {
        "profile": label,
        "batch_size": pos_int, "max_steps": pos_int, "eval_every": pos_int,
        "eval_batches": optional(pos_int), "test_batches": optional(pos_int),
        "checkpoint_every": pos_int, "log_every": pos_int,
        "progress_every_s": spec(number, lo=0, lo_open=True),
        "bucket": boolean, "num_workers": nonneg_int,
        "device": spec(choice, options=("auto", "cpu", "cuda")),
        "precision": spec(choice, options=("auto", "fp32", "bf16")),
        "compile": boolean,
        "num_threads": optional(pos_int),
        "deterministic": boolean,
        "stop_grace_s": spec(number, lo=0),
    },
    "optim": {
        "name": spec(choice, options=("adamw",)),
        "lr": spec(number, lo=0, lo_open=True),
        "betas": spec(number_list, n=2, lo=0, hi=1, hi_open=True),
        "eps": spec(number, lo=0, lo_open=True),
        "weight_decay": spec(number, lo=0),
        "warmup_steps": nonneg_int,
        "schedule": spec(choice, options=("cosine", "linear", "constant")),
        "min_lr_ratio": spec(number, lo=0, hi=1),
        "grad_clip": optional(spec(number, lo=0, lo_open=True)),
    },
    "tracking": {
        "enabled": boolean, "uri": _tracking_uri,
        "results_dir": text, "experiment": text, "model": label, "run_name": text,
        "log_model": boolean, "model_examples": pos_int,
        "server_timeout_s": spec(number, lo=0, lo_open=True),
        "server_wait_s": spec(number, lo=0),
        "server_start_wait_s": spec(number, lo=0, lo_open=True),
    },
}


def compose_train(overrides: Sequence[str] = (), *, resolve: bool = True,
                  check_types: bool = True) -> DictConfig:
    """:func:`hkt.config_compose.compose` of ``train.yaml``, with every registered mixer's structured
    config (``/schema/model/NAME``) registered with Hydra first: ``config/model/NAME.yaml``
    selects it, so Hydra types the model node; and every model file's own keys
    (``/model_keys/NAME``, applied after the profiles). Not validated (:func:`load_config` is)."""
    # here, not at the top: the model side pulls in torch, which a command's start-up avoids
    from hkt.models.encoder import store_structured_configs

    store_structured_configs()
    store_model_keys()
    _refuse_gone_keys(overrides)
    task_file = config_dir() / "task" / f"{_task_choice(overrides)}.yaml"
    if task_file.is_file() and (problem := task_id_problem(task_file)):
        raise ConfigError(problem)
    return compose(CONFIG_NAME, overrides, resolve=resolve, check_types=check_types)


def _refuse_gone_keys(overrides: Sequence[str]) -> None:
    """A :class:`ConfigError` for an override of a key that is gone, saying what replaced it
    (a saved config holding it is still read: ``tracking`` is not compared)."""
    for override in overrides:
        key = str(override).lstrip("+~").partition("=")[0]
        if key in GONE_KEYS:
            raise ConfigError(f"'{override}': {GONE_KEYS[key]}")


def _task_choice(overrides: Sequence[str]) -> str:
    """The task file ``train.yaml`` composes: the last ``task=NAME`` override, else its default."""
    for override in reversed([str(o) for o in overrides]):
        if match := re.fullmatch(r"\+{0,2}task=(\S+)", override):
            return match.group(1)
    defaults = (yaml.safe_load((config_dir() / f"{CONFIG_NAME}.yaml").read_text(encoding="utf-8"))
                or {}).get("defaults") or []
    return next((str(d["task"]) for d in defaults if isinstance(d, dict) and "task" in d), "")


@dataclass(frozen=True)
class RunConfig:
    """A training run's config, validated: the composed ``node`` (what the run directory, the
    record and MLflow keep) and its ``model`` typed once (the :class:`hkt.models.EncoderConfig`
    that holds the mixer's config), which building the model uses as it is."""

    node: DictConfig
    model: EncoderConfig

    @classmethod
    def of(cls, node: DictConfig) -> RunConfig:
        """Validate a composed config (:func:`validate`) and keep its typed model."""
        return cls(node, validate(node))


def load_run_config(overrides: Sequence[str] = ()) -> RunConfig:
    """Compose ``train.yaml`` with ``overrides``, validated, with ``model.match_params_of``
    resolved (``model.d_ffn`` widened), and its model typed: what ``hkt train`` runs."""
    overrides = [str(o) for o in overrides]
    # types are checked by Hydra (the structured model configs) and by validate()'s schemas
    cfg = compose_train(overrides, check_types=False)
    model = validate(cfg)
    if cfg.model.match_params_of is not None:
        match_params(cfg, overrides)
        model = dataclasses.replace(model, d_ffn=int(cfg.model.d_ffn))
    return RunConfig(cfg, model)


def load_config(overrides: Sequence[str] = ()) -> DictConfig:
    """The composed node of :func:`load_run_config`, for readers of its values (the workflow's
    digests, the plan)."""
    return load_run_config(overrides).node


def validate(cfg: DictConfig) -> EncoderConfig:
    """Raise :class:`ConfigError` naming the first impossible value; return the model typed
    (the check of ``model`` is its construction)."""
    from hkt.data.task_config import validate_task
    from hkt.models import EncoderConfig

    rest = {k: cfg[k] for k in SCHEMA if k in cfg}
    for key in cfg:
        if key not in SCHEMA and key not in ("task", "model"):
            raise ConfigError(f"unknown config key '{key}' (known: "
                              f"{', '.join(sorted([*SCHEMA, 'task', 'model']))})"
                              + did_you_mean(key, [*SCHEMA, "task", "model"]))
    checked = check_schema(rest, SCHEMA, "")
    if checked["optim"]["warmup_steps"] > checked["train"]["max_steps"]:
        raise ConfigValueError("optim.warmup_steps", checked["optim"]["warmup_steps"],
                               f"is longer than the run (train.max_steps = "
                               f"{checked['train']['max_steps']})")
    if "task" not in cfg or "model" not in cfg:
        raise ConfigError("config keys 'task' and 'model' are missing (the config files are incomplete)")
    validate_task(OmegaConf.to_container(cfg.task, resolve=True), for_prepare=False)
    try:
        model = EncoderConfig.from_mapping(cfg.model)
        model.check_length(int(cfg.task.max_length))
    except ConfigValueError as exc:
        raise exc.under("model") from None
    return model


def match_params(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Widen ``model.d_ffn`` in place until the model has as many parameters as the model of
    mixer ``model.match_params_of`` composed from the same overrides.

    HKT adds per-level query/key projections, pyramid convolutions and a fusion gate to every
    block, so it has more parameters than MHA of the same width; the size-matched MHA tells
    gains from size. Only the mixer differs between the two models, so the counts use a
    two-token vocabulary: the difference does not depend on the vocabulary or the length.
    The FFN width closes the gap to within one unit (2·D + 1 parameters per block).
    """
    other = str(cfg.model.match_params_of)
    # the other model: the same task, profile and shared settings (model.mixer_dropout too); its
    # own model group and mixer settings (the variant that asked for the match is left out)
    keep = [o for o in overrides
            if not o.lstrip("+~").startswith(("model=", "variant=", "model.match_params_of",
                                              "model.mixer.", "model.mixer=", "model.name"))
            and o.lstrip("+~") != "model.mixer"]
    ref = compose_train([*keep, f"model={other}"], check_types=False)
    validate(ref)
    mine, theirs = cfg.model, ref.model
    for key in ("d_model", "n_layers"):
        if mine[key] != theirs[key]:
            raise ConfigError(f"model.match_params_of={other}: model.{key} differs between this "
                              f"model ({mine[key]}) and {other}'s ({theirs[key]}); matching by "
                              "FFN width needs the same width and depth")
    nc, ml = int(cfg.task.num_classes), int(cfg.task.max_length)
    target = _count_params(theirs, nc, ml)
    before, d_ffn_before = _count_params(mine, nc, ml), int(mine.d_ffn)
    per_unit = int(mine.n_layers) * (2 * int(mine.d_model) + 1)
    d_ffn = max(1, d_ffn_before + round((target - before) / per_unit))
    cfg.model.d_ffn = d_ffn
    log.info("model.match_params_of=%s: %s has %s parameters; model.d_ffn %d -> %d: %s -> %s "
             "parameters (two-token vocabulary; the embedding is the same for both)",
             other, other, f"{target:,}", d_ffn_before, d_ffn, f"{before:,}",
             f"{_count_params(cfg.model, nc, ml):,}")


def _count_params(model_cfg: DictConfig, num_classes: int, max_length: int) -> int:
    from hkt.models import build_model

    model = build_model(OmegaConf.to_container(model_cfg, resolve=True), vocab_size=2,
                        num_classes=num_classes, max_length=max_length)
    return sum(p.numel() for p in model.parameters())


# train.* keys that change how a session behaves or reports, or where it runs, not what the run
# computes: a resumed run may change them, and the workflow does not re-run a job for them (nor
# empty a finished run). CPU threads are like the CPU itself: they move a run's losses in the 8th
# significant digit (the order of summation), as a different CPU model does, and the record's
# `threads` says what a run used; a run checkpointed at 1 thread may finish at 2 on another machine
RUN_NEUTRAL_TRAIN_KEYS = ("stop_grace_s", "progress_every_s", "num_threads")


def strip_for_compare(cfg: Any) -> dict[str, Any]:
    """The parts of a resolved config that define a run (tracking settings excluded)."""
    d = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    d.pop("tracking", None)
    if isinstance(d.get("train"), dict):  # how a run stops does not change what it computes
        d["train"] = {k: v for k, v in d["train"].items() if k not in RUN_NEUTRAL_TRAIN_KEYS}
    # how the data were prepared is checked through the data checksums instead (mirror and
    # cache paths come from the environment and may differ between sessions)
    if isinstance(d.get("task"), dict):  # task.id is a label (experiment and run names)
        d["task"] = {k: v for k, v in d["task"].items() if k not in ("prepare", "id")}
    return d
