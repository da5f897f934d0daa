"""Compose Hydra configs and validate them, with one clear error per mistake.

Every command that reads ``config/`` (``hkt prepare``, ``hkt train``, the benchmarks) goes
through :func:`compose`, so a bad override fails the same way everywhere: a
:class:`hkt.errors.ConfigError` whose message names the key, before any work starts.

Validation is one mechanism in two forms, both built from the value checks of
:mod:`hkt.value_checks` (``integer``, ``number``, ``choice``, …), which raise
:class:`hkt.errors.ConfigValueError` naming the key:

* modules (the encoder and each token mixer) own a typed config, a dataclass whose
  ``__post_init__`` runs the checks; :func:`hkt.train.run_config.compose_train` registers them
  with Hydra as structured configs before composing ``train.yaml``, so Hydra refuses unknown
  keys and wrong types at compose time;
* plain config nodes (task, optim, train budget) are checked against a schema, a mapping of
  key -> check (:func:`hkt.value_checks.check_schema`).

Hydra catches unknown group options and unknown keys, and wrong types where a structured
config types the node. For configs without a schema of their own (``analysis``, the benchmarks'
use of ``train``), ``check_types=True`` composes twice: once with only the group choices (the
*defaults*) and once with every override, and checks that each value overridden keeps the type
of the default value it replaces (``optim.lr=1`` is accepted as ``1.0``). ``hkt train`` and
``hkt prepare`` check every key against their schemas instead and turn it off.

A group may label the config with its choice (:data:`LABELS`): ``variant=levels1`` sets the key
``variant`` to ``levels1``, the file's name, so no variant file repeats its own name; likewise
``model=NAME`` sets ``tracking.model``, the label of the run's records. Names are
the current ones only: an old one (``experiment=``, ``model.attention``, before 0.2.0) is an
unknown key or group like any other, and results saved under them are brought to the current
names once by ``scripts/migrate_results.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from hkt.errors import ConfigError, did_you_mean, yaml_problem
from hkt.mlflow_store import experiment_name

# ${hkt.experiment:PROFILE,TASK_ID} in config/train.yaml: the experiment name has one definition
OmegaConf.register_new_resolver("hkt.experiment", experiment_name, replace=True)

__all__ = ["config_dir", "compose", "flatten", "describe_type", "store_model_keys"]


# config name -> {group: key (dotted)}: the key holds the name of the option chosen in the
# group (the file's name is the label; the files do not repeat it), or keeps its default when
# the group is left unset. A run's variant label is the name of its config/variant/ file, its
# model label the name of its config/model/ file (a copy of mha.yaml as mine.yaml labels its
# runs "mine", while model.name, the token mixer it builds, stays "mha"; the label is a
# tracking key, so it is in no config comparison and no rerun digest).
LABELS = {"train": {"variant": "variant", "model": "tracking.model"}}

#: Hydra's group of the token mixers' structured configs: ``config/model/NAME.yaml`` selects
#: ``/schema/model/MIXER@_here_``, registered by :func:`hkt.models.encoder.store_structured_configs`.
MODEL_SCHEMA_GROUP = "schema/model"

#: Hydra's group of each model file's own keys (``config/model/NAME.yaml`` less its
#: ``defaults``), registered by :func:`store_model_keys`. ``config/train.yaml`` applies it again
#: after the profile files (``profile/``, ``profile_task/``), so a key a model file sets survives
#: every profile, while a size the file leaves unset is the profile's.
MODEL_KEYS_GROUP = "model_keys"


def config_dir() -> Path:
    """The Hydra config directory: ``$HKT_CONFIG_DIR`` or ``config/`` beside the package."""
    env = os.environ.get("HKT_CONFIG_DIR")
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "config"
    if not path.is_dir():
        where = "HKT_CONFIG_DIR" if env else "the default location"
        raise ConfigError(f"config directory {path} (from {where}) does not exist; "
                          "set HKT_CONFIG_DIR to the repository's config/ directory")
    return path.resolve()


def compose(config_name: str, overrides: Sequence[str] = (), *, resolve: bool = True,
            check_types: bool = True) -> DictConfig:
    """Compose ``config_name`` from :func:`config_dir` with Hydra command-line ``overrides``.

    Returns the config (struct mode, interpolations resolved unless ``resolve=False``).
    Raises :class:`ConfigError` naming the key for unknown group options, unknown keys,
    unparsable overrides, broken interpolations and (``check_types``) values whose type
    differs from the value they override.
    """
    overrides = [str(o) for o in overrides]
    cdir = config_dir()
    if not (cdir / f"{config_name}.yaml").is_file():
        raise ConfigError(f"no config named '{config_name}' in {cdir}")
    hint = _print_config_hint(config_name)
    cfg = _compose(cdir, config_name, overrides, hint)
    if resolve:
        _resolve(cfg)
    if check_types:
        key_overrides = _key_overrides(cdir, overrides, hint)
        if key_overrides:
            group_overrides = [o for o in overrides if o not in key_overrides]
            defaults = _compose(cdir, config_name, group_overrides, hint)
            _resolve(defaults)
            _check_types(cfg, defaults, key_overrides, hint)
    return cfg


def store_model_keys(cdir: Path | None = None) -> None:
    """Register with Hydra, as ``/model_keys/NAME``, the keys every ``config/model/NAME.yaml`` of
    ``cdir`` (default :func:`config_dir`) sets itself, for ``config/train.yaml`` to apply after
    the profiles (:data:`MODEL_KEYS_GROUP`). Registered anew at each composition: the store is
    the process's, and a file may have changed. A file that does not read as a mapping is left
    out: Hydra names its problem where it is chosen."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for path in sorted((cdir or config_dir()).joinpath("model").glob("*.yaml")):
        try:
            node = OmegaConf.load(path)
        except Exception:  # noqa: BLE001 - Hydra reports it when the file is chosen
            continue
        if not isinstance(node, DictConfig):
            continue
        node.pop("defaults", None)
        header = re.search(r"^#\s*@package\s+(\S+)", path.read_text(encoding="utf-8"), re.M)
        store.store(group=MODEL_KEYS_GROUP, name=path.stem, node=node,
                    package=header.group(1) if header else "model")


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten a (resolved) config into ``{"a.b.c": leaf}``; lists are leaves."""
    if isinstance(cfg, (DictConfig, ListConfig)):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    out: dict[str, Any] = {}
    if isinstance(cfg, dict):
        if not cfg and prefix:
            out[prefix] = {}
        for k, v in cfg.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                out.update(flatten(v, key))
            else:
                out[key] = v
    else:
        out[prefix] = cfg
    return out


def describe_type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# --------------------------------------------------------------------------------------------


def _print_config_hint(config_name: str) -> str:
    """The command that prints the keys of ``config_name``, for unknown-key messages."""
    if config_name.startswith("task/"):
        return f"hkt prepare {config_name.split('/', 1)[1]} --print-config"
    return f"hkt {config_name} --print-config" if config_name == "train" else f"config/{config_name}.yaml"


def _compose(cdir: Path, config_name: str, overrides: list[str], hint: str) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base=None, config_dir=str(cdir)):
            cfg = hydra_compose(config_name=config_name, overrides=overrides,
                                return_hydra_config=True)
        choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
        with open_dict(cfg):
            del cfg["hydra"]
        for group, key in LABELS.get(config_name, {}).items():
            if choices.get(group) is not None and OmegaConf.select(cfg, key) is not None:
                OmegaConf.update(cfg, key, choices[group])
        return cfg
    except MissingConfigException as exc:
        raise ConfigError(_missing_message(exc, cdir)) from None
    except yaml.YAMLError as exc:  # a config file that does not load, a Python tag included
        raise ConfigError(yaml_problem(exc)) from None
    except (HydraException, OmegaConfBaseException) as exc:
        message = _composition_message(exc, overrides, hint)
        if message.startswith("unknown config key '"):
            key = message.split("'")[1]
            message += _close_key(cdir, config_name, overrides, key)
        raise ConfigError(message) from None
    finally:
        GlobalHydra.instance().clear()


def _resolve(cfg: DictConfig) -> None:
    from omegaconf.errors import OmegaConfBaseException

    try:
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        first = str(exc).splitlines()[0]
        raise ConfigError(f"config key '{key}': cannot resolve its value: {first}"
                          if key else f"cannot resolve the config: {first}") from None


def _missing_message(exc: Exception, cdir: Path) -> str:
    missing = getattr(exc, "missing_cfg_file", None) or ""
    if "/" in missing:
        group, _, option = missing.rpartition("/")
        if group.lstrip("/") == MODEL_SCHEMA_GROUP:  # a structured config, not a file
            return _missing_schema_message(option)
        options = getattr(exc, "options", None) or sorted(
            p.stem for p in (cdir / group).glob("*.yaml"))
        return (f"{group}={option}: no such option in config group '{group}' "
                f"(available: {', '.join(options) or 'none'})" + did_you_mean(option, options))
    return " ".join(str(exc).split())


def _missing_schema_message(option: str) -> str:
    """A model file's ``/schema/model/NAME`` that Hydra's store lacks: either no structured
    config is registered in this process (train.yaml composed without
    :func:`hkt.train.run_config.compose_train`), or no mixer of that name is."""
    from hydra.core.config_store import ConfigStore

    group = MODEL_SCHEMA_GROUP
    try:
        stored = sorted(name.removesuffix(".yaml") for name in ConfigStore.instance().list(group))
    except OSError:  # Hydra's word for a group with nothing stored
        stored = []
    if not stored:
        return (f"{group}/{option}: the structured config a model file selects is not registered "
                "in this process; compose train.yaml with hkt.train.run_config.compose_train (or "
                "load_config), which registers every mixer's first, not with compose alone")
    return (f"{group}/{option}: no registered token mixer is named '{option}' (registered: "
            f"{', '.join(stored)}); register it in hkt.mixers (docs/extending.md) or fix the "
            "model file's /schema/model entry" + did_you_mean(option, stored))


def _composition_message(exc: Exception, overrides: list[str], hint: str) -> str:
    """One line for a failed composition, naming the key from OmegaConf's ``full_key``."""
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    key = getattr(cause, "full_key", None) or ""
    why = str(cause).splitlines()[0] if cause else ""
    if key:
        if "not in struct" in why or "Could not append" in text or "Key '" in why:
            return (f"unknown config key '{key}' (from override "
                    f"'{_override_for(key, overrides)}'); check the spelling, "
                    f"or see the keys with: {hint}")
        if "Could not append to config" in text:
            return f"config key '{key}' already exists: override it without the leading '+'"
        return f"config key '{key}': {why or ' '.join(text.split())}"
    # errors Hydra raises without an OmegaConf cause: deletions and unparsable overrides
    m = re.search(r"Could not append to config. An item is already at '([^']+)'", text)
    if m:
        return f"config key '{m.group(1)}' already exists: override it without the leading '+'"
    m = re.search(r"Could not delete from config. (?:The value of )?'([^']+)'", text)
    if m:
        return f"cannot delete config key '{m.group(1)}': it does not exist"
    if "Error parsing override" in text:
        bad = re.search(r"Error parsing override '([^']*)'", text)
        return (f"cannot parse override '{bad.group(1) if bad else '?'}': "
                "write overrides as key=value (e.g. model.d_model=128, task=imdb)")
    return " ".join(text.split())


def _close_key(cdir: Path, config_name: str, overrides: list[str], key: str) -> str:
    """``"; did you mean train.max_steps?"`` for the unknown ``key`` (``train.max_stpes``) where
    a key beside it is close: the config composed with the group choices alone says which keys
    are there. ``""`` where none is close, or that config does not compose either."""
    groups = [o for o in overrides if (cdir / o.lstrip("+~").split("=", 1)[0]).is_dir()]
    try:
        defaults = _compose(cdir, config_name, groups, "")
    except ConfigError:
        return ""
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(defaults, parent) if parent else defaults
    if not isinstance(node, DictConfig):
        return ""
    return did_you_mean(name, [str(k) for k in node.keys()], f"{parent}." if parent else "")


def _override_for(key: str, overrides: list[str]) -> str:
    """The override that set ``key`` or a key below it (``model.x.y=1`` for ``model.x``)."""
    for o in overrides:
        name = o.lstrip("+~").split("=", 1)[0]
        if name == key or name.startswith(key + "."):
            return o
    return key


def _key_overrides(cdir: Path, overrides: list[str], hint: str) -> list[str]:
    """The overrides that set values (not group choices, not deletions)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides=overrides)
    except HydraException as exc:
        raise ConfigError(_composition_message(exc, overrides, hint)) from None
    out = []
    for o, raw in zip(parsed, overrides):
        key = o.key_or_group
        if o.is_delete() or (cdir / key).is_dir():
            continue
        out.append(raw)
    return out


def _check_types(cfg: DictConfig, defaults: DictConfig, key_overrides: list[str],
                 hint: str) -> None:
    full, ref = flatten(cfg), flatten(defaults)
    keys = {o.lstrip("+~").split("=", 1)[0].split("@", 1)[0] for o in key_overrides}
    for key in sorted(keys):
        # an override of a whole node (model.mixer={...}) checks each leaf below it
        leaves = [k for k in full if k == key or k.startswith(key + ".")]
        for leaf in leaves:
            if leaf not in ref and full[leaf] is None and any(k.startswith(leaf + ".") for k in ref):
                continue  # a node set to null (model.mixer=null): its owner's check says why
            if leaf not in ref:
                parent, _, name = leaf.rpartition(".")
                siblings = {k[len(parent) + 1:].split(".")[0] if parent else k.split(".")[0]
                            for k in ref if not parent or k.startswith(parent + ".")}
                raise ConfigError(f"unknown config key '{leaf}' (from override "
                                  f"'{_override_for(key, key_overrides)}'); check the spelling, "
                                  f"or see the keys with: {hint}"
                                  + did_you_mean(name, siblings, f"{parent}." if parent else ""))
            _check_value(leaf, full[leaf], ref[leaf])


def _check_value(key: str, value: Any, expected: Any) -> None:
    if expected is None or value is None:
        return  # null means "unset / automatic": any type may replace it, and it may be unset
    if isinstance(expected, bool):
        ok = isinstance(value, bool)
    elif isinstance(expected, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(expected, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(expected, str):
        ok = isinstance(value, str)
    elif isinstance(expected, list):
        if not isinstance(value, list):
            ok = False
        elif len(value) != len(expected):
            raise ConfigError(f"config key '{key}': expected a list of {len(expected)} items, "
                              f"got {len(value)}: {value}")
        else:
            for i, (v, e) in enumerate(zip(value, expected)):
                _check_value(f"{key}[{i}]", v, e)
            return
    elif isinstance(expected, dict):
        ok = isinstance(value, dict)
    else:
        ok = True
    if not ok:
        raise ConfigError(f"config key '{key}': expected {describe_type(expected)} "
                          f"(like {expected!r}), got {describe_type(value)} {value!r}")
