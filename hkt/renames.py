"""Names that changed, kept working: a renamed config group (``experiment`` -> ``variant``) or
key (``model.attention`` -> ``model.mixer``, ``model.attn_dropout`` -> ``model.mixer_dropout``,
``task.name`` -> ``task.family``) is rewritten in overrides with one warning per override and
process, saved configs holding an old key are upgraded when read, and digests that must outlive
a rename (the workflow's rerun trigger, the timing cache) are taken under the old names.
Keys added later (:data:`ADDED_KEYS`) are treated alike: a saved config that lacks one is read
with the value that means what its run did, and digests leave such a key out at that value, so
adding a setting changes no existing run's digest.
:func:`hkt.config.compose` applies the first; readers of saved runs call the second. The
model's state_dict keys of before the mixer rename (``blocks.N.attn.…``) are mapped where they
load, by :class:`hkt.models.encoder.EncoderBlock`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["RENAMED_GROUPS", "RENAMED_KEYS", "RENAMED_VALUES", "ADDED_KEYS", "renamed_groups",
           "renamed_keys",
           "new_name", "old_name", "new_value", "old_spelling", "upgrade_saved_config",
           "upgrade_saved_record", "digest_form"]

# config name -> {old group name: new one}: overrides of a renamed group still work, with one
# warning line on stderr (once per override and process)
RENAMED_GROUPS = {"train": {"experiment": "variant"}}

# config name -> {old key: (new key, why)}: overrides of a renamed key (or of a key below it)
# still work, with one warning line on stderr (once per override and process). Saved configs
# holding the old key are upgraded by upgrade_saved_config().
RENAMED_KEYS = {"train": {
    "model.attention": ("model.mixer", "the model's token-mixer settings are now 'model.mixer' "
                                       "(a convolution is not attention)"),
    "model.attn_dropout": ("model.mixer_dropout", "the token mixer's dropout is now "
                                                  "'model.mixer_dropout' (not every mixer is "
                                                  "attention)"),
    "task.name": ("task.family", "a task's data family is now 'task.family' (a task is its "
                                 "config file, config/task/ID.yaml; its data family is the "
                                 "kind of data, hkt/data/families/)"),
}}
RENAMED_KEYS["doctor"] = {  # named as `hkt plan` names them (issue 40)
    "suite.file": ("suite", "the suite is 'suite' (or --suite), as for `hkt plan`"),
    "suite.profile": ("suite_profile", "the profile that replaces the suite's is 'suite_profile'")}

# config name -> {top-level key: {old value: new one}}: labels that were renamed. The unablated
# run was `default` when `hkt train` was given no variant and `main` when the workflow gave
# `variant=main` (config/variant/main.yaml changes nothing): one run, one label now, `main`.
# Saved configs and records are upgraded when read (upgrade_saved_config, upgrade_saved_record).
RENAMED_VALUES = {"train": {"variant": {"default": "main"}}}

# config name -> {key added after runs were saved: (the value that means what those runs did,
# the model name it belongs to or None for every model)}. upgrade_saved_config() fills a missing
# one in; digest_form() leaves it out at that value (issue 53: the encoder's block options and
# S4D's S4 settings)
ADDED_KEYS = {"train": {
    "model.norm": ("layer", None),
    "model.norm_place": ("pre", None),
    "model.mixer.n_ssm": (None, "s4d"),
    "model.mixer.train_B": (False, "s4d"),
    "model.mixer.dt_lr": (None, "s4d"),
    "model.mixer.D_weight_decay": (None, "s4d"),
}}
_warned: set[str] = set()


def _renamed(key: str, config_name: str, *, back: bool = False) -> tuple[str, str] | None:
    """``key`` (dotted, or a key below it) under its new name (its old one if ``back``), and why
    it was renamed; None if it was not."""
    for old, (new, why) in RENAMED_KEYS.get(config_name, {}).items():
        src, dst = (new, old) if back else (old, new)
        if key == src or key.startswith(src + "."):
            return dst + key[len(src):], why
    return None


def new_name(key: str, config_name: str = "train") -> str | None:
    """The name that the dotted ``key`` (or the key above it) has now, if it was renamed
    (``model.attention.levels`` -> ``model.mixer.levels``); None if it was not."""
    found = _renamed(key, config_name)
    return found[0] if found else None


def old_name(key: str, config_name: str = "train") -> str | None:
    """The name that the dotted ``key`` (or the key above it) had before a rename, for what was
    saved under it (``model.mixer.levels`` -> ``model.attention.levels``); None if none."""
    found = _renamed(key, config_name, back=True)
    return found[0] if found else None


def new_value(key: str, value: Any, config_name: str = "train") -> Any:
    """``value`` of the top-level ``key`` under its current name (``variant`` ``default`` ->
    ``main``); any other value as it is."""
    renamed = RENAMED_VALUES.get(config_name, {}).get(key, {})
    return renamed.get(value, value) if isinstance(value, str) else value


def renamed_groups(config_name: str, overrides: Sequence[str]) -> list[str]:
    """``overrides`` with the groups of :data:`RENAMED_GROUPS` under their new names
    (``experiment=levels1`` -> ``variant=levels1``), warning once on stderr for each."""
    renamed = RENAMED_GROUPS.get(config_name, {})
    out = []
    for o in overrides:
        body = o.lstrip("+~")
        key, eq, value = body.partition("=")
        group, at, package = key.partition("@")
        if group in renamed:
            new = f"{o[:len(o) - len(body)]}{renamed[group]}{at}{package}{eq}{value}"
            if o not in _warned:
                _warned.add(o)
                print(f"hkt: warning: '{o}' is deprecated: the config group '{group}' is now "
                      f"'{renamed[group]}' (config/{renamed[group]}/); use '{new}'",
                      file=sys.stderr, flush=True)
            o = new
        out.append(o)
    return out


def renamed_keys(config_name: str, overrides: Sequence[str]) -> list[str]:
    """``overrides`` with the keys of :data:`RENAMED_KEYS` under their new names
    (``model.attention.levels=2`` -> ``model.mixer.levels=2``, ``+model.attention.x=1``,
    ``~model.attention``, ``model.attention={…}`` alike), warning once on stderr for each."""
    out = []
    for o in overrides:
        body = o.lstrip("+~")
        key, eq, value = body.partition("=")
        found = _renamed(key, config_name)
        if found:
            fixed = f"{o[:len(o) - len(body)]}{found[0]}{eq}{value}"
            if o not in _warned:
                _warned.add(o)
                print(f"hkt: warning: '{o}' is deprecated: {found[1]}; use '{fixed}'",
                      file=sys.stderr, flush=True)
            o = fixed
        out.append(o)
    return out


def old_spelling(overrides: Sequence[str], config_name: str = "train") -> list[str]:
    """``overrides`` with renamed groups and keys under the names they had before
    (``variant=main`` -> ``experiment=main``, ``model.mixer.levels=2`` ->
    ``model.attention.levels=2``): the inverse of :func:`renamed_groups` and :func:`renamed_keys`,
    for what a rerun trigger recorded before a rename (:class:`hkt.workflow.configs.TrackedOverrides`)."""
    groups = {new: old for old, new in RENAMED_GROUPS.get(config_name, {}).items()}
    out = []
    for o in overrides:
        prefix = o[:len(o) - len(o.lstrip("+~"))]
        key, eq, value = o[len(prefix):].partition("=")
        group, at, package = key.partition("@")
        if group in groups:
            key = f"{groups[group]}{at}{package}"
        else:
            key = old_name(key, config_name) or key
        out.append(f"{prefix}{key}{eq}{value}")
    return out


def upgrade_saved_config(cfg: Any, config_name: str = "train") -> Any:
    """A config saved before a key of :data:`RENAMED_KEYS` or a value of :data:`RENAMED_VALUES`
    was renamed, with the new ones (``model.attention`` -> ``model.mixer``, ``variant: default``
    -> ``variant: main``); a copy, the input untouched. Anything that is not
    a mapping, or holds no old key, comes back as it is (a current config unchanged).

    The one place an old saved config is read into the current layout: run records, a run
    directory's ``config.yaml``, checkpoints (and what reads them: comparisons, analyses).
    """
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg)
    if not isinstance(cfg, dict):
        return cfg
    for key in RENAMED_VALUES.get(config_name, {}):
        if key in cfg and new_value(key, cfg[key], config_name) != cfg[key]:
            cfg = {**cfg, key: new_value(key, cfg[key], config_name)}
    cfg = _add_missing_keys(cfg, config_name)
    for old, (new, _why) in RENAMED_KEYS.get(config_name, {}).items():
        *parents, old_leaf = old.split(".")
        new_parents, new_leaf = new.split(".")[:-1], new.split(".")[-1]
        if new_parents != parents:  # only renames within one node are needed so far
            raise NotImplementedError(f"{old} -> {new}: a move between nodes")
        node: Any = cfg
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if not isinstance(node, dict) or old_leaf not in node:
            continue
        cfg = _copy_path(cfg, parents)
        node = cfg
        for p in parents[:-1]:
            node = node[p]
        holder = node[parents[-1]] if parents else cfg
        if new_leaf in holder:  # both keys: the new one wins (the old one is dropped)
            holder.pop(old_leaf)
            continue
        # the new name in the old one's place (a saved file keeps its order)
        renamed = {new_leaf if k == old_leaf else k: v for k, v in holder.items()}
        if parents:
            node[parents[-1]] = renamed
        else:
            cfg = renamed
    return cfg


def upgrade_saved_record(record: Any) -> Any:
    """A run record (``record.json``'s mapping) written before a rename, in the current names:
    its ``config`` through :func:`upgrade_saved_config`, its ``variant`` through
    :func:`new_value`; a copy, the input untouched; anything else as it is."""
    if not isinstance(record, dict):
        return record
    record = dict(record)
    if "config" in record:
        record["config"] = upgrade_saved_config(record["config"])
    if "variant" in record:
        record["variant"] = new_value("variant", record["variant"])
    return record


def _added_key_nodes(cfg: dict[str, Any], config_name: str):
    """(key, value before it existed, parent path, leaf) of each :data:`ADDED_KEYS` entry whose
    parent node ``cfg`` holds, for an encoder's config (it has ``model.d_model``; an external
    baseline's record names a model with none of the encoder's keys) and the model the key
    belongs to."""
    for key, (before, model) in ADDED_KEYS.get(config_name, {}).items():
        *parents, leaf = key.split(".")
        node: Any = cfg
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        spec = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
        encoder = "d_model" in spec  # a trained encoder's config; a baseline's record has none
        if isinstance(node, dict) and encoder and (model is None or spec.get("name") == model):
            yield key, before, parents, leaf, node


def _add_missing_keys(cfg: dict[str, Any], config_name: str) -> dict[str, Any]:
    """``cfg`` with each added key it lacks at the value that means what its run did."""
    for _key, before, parents, leaf, node in list(_added_key_nodes(cfg, config_name)):
        if leaf not in node:
            cfg = _copy_path(cfg, parents)
            holder = cfg
            for p in parents:
                holder = holder[p]
            holder[leaf] = before
    return cfg


def _drop_added_defaults(cfg: dict[str, Any], config_name: str) -> dict[str, Any]:
    """``cfg`` without the added keys that hold the value of before they existed."""
    for _key, before, parents, leaf, node in list(_added_key_nodes(cfg, config_name)):
        if leaf in node and node[leaf] == before and type(node[leaf]) is type(before):
            cfg = _copy_path(cfg, parents)
            holder = cfg
            for p in parents:
                holder = holder[p]
            holder.pop(leaf)
    return cfg


def digest_form(cfg: dict[str, Any], config_name: str = "train") -> dict[str, Any]:
    """``cfg`` (a plain mapping) with the keys of :data:`RENAMED_KEYS` under their old names,
    and without the :data:`ADDED_KEYS` that hold the value of before they were added,
    for digests that must not change with a rename: the workflow's rerun trigger
    (:func:`hkt.workflow.configs.train_config_digest`) and the timing cache's shape key. Without
    it every finished training job of an existing results directory would rerun. Renamed values
    stay new: the workflow's runs were labelled ``main`` already (only a bare ``hkt train`` said
    ``default``), and a ``default`` run is the ``main`` run."""
    cfg = _drop_added_defaults(cfg, config_name)
    for old, (new, _why) in RENAMED_KEYS.get(config_name, {}).items():
        *parents, new_leaf = new.split(".")
        old_leaf = old.split(".")[-1]
        node: Any = cfg
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and new_leaf in node:
            cfg = _copy_path(cfg, parents)
            holder = cfg
            for p in parents:
                holder = holder[p]
            renamed = {old_leaf if k == new_leaf else k: v for k, v in holder.items()}
            holder.clear()
            holder.update(renamed)
    return cfg


def _copy_path(cfg: dict[str, Any], parents: list[str]) -> dict[str, Any]:
    """A shallow copy of ``cfg`` and of each node along ``parents``."""
    top = dict(cfg)
    node = top
    for p in parents:
        node[p] = dict(node[p])
        node = node[p]
    return top
