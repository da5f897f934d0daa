"""Which file set each key of a composed config: what ``hkt train --print-config`` writes beside
every value.

A key may be set in many files (the learning rate in the optimiser's, a profile's, its per-task
file, a model's, a variant's and on the command line); the one that counts is the last Hydra
merges. :func:`key_sources` replays Hydra's own defaults list for the same overrides, in its
order, and gives each leaf the last config that sets it: a file of ``config/``, a mixer's
dataclass defaults (``/schema/model/NAME``), the command line, or the group choice that labels
the run (``variant``, ``tracking.model``: :data:`hkt.config_compose.LABELS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from hkt.config_compose import (LABELS, MODEL_KEYS_GROUP, MODEL_SCHEMA_GROUP, config_dir,
                                flatten)

__all__ = ["key_sources", "annotate_yaml", "COMMAND_LINE"]

#: the source of a key an override on the command line sets
COMMAND_LINE = "the command line"


def key_sources(config_name: str, overrides: Sequence[str] = (),
                cdir: Path | None = None) -> dict[str, str]:
    """``{"a.b.c": where its value comes from}`` for every leaf of ``config_name`` composed with
    ``overrides``, as :func:`hkt.config_compose.compose` composes it (Hydra's structured configs
    and the model files' keys registered first, as for the composition itself)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    cdir = cdir or config_dir()
    overrides = [str(o) for o in overrides]
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(cdir)))
    defaults = loader.compute_defaults_list(config_name, overrides, RunMode.RUN)
    sources: dict[str, str] = {}
    for entry in defaults.defaults:
        if entry.config_path is None or (entry.package or "").split(".")[0] == "hydra":
            continue
        node = loader.repository.load_config(entry.config_path)
        if node is None:
            continue
        content = OmegaConf.to_container(node.config, resolve=False)
        content.pop("defaults", None)
        if not content:
            continue
        for key in flatten(content, entry.package or ""):
            sources[key] = _label(entry.config_path)
    for override in defaults.overrides.config_overrides:
        _set_below(sources, override.key_or_group, COMMAND_LINE)
    choices = defaults.overrides.known_choices
    for group, key in LABELS.get(config_name, {}).items():
        if choices.get(group) is not None and key in sources and sources[key] != COMMAND_LINE:
            sources[key] = f"the name of config/{group}/{choices[group]}.yaml"
    return sources


_KEY = re.compile(r"^( *)([^\s#'\"-][^:]*|'[^']*'|\"[^\"]*\"):( |$)")


def annotate_yaml(text: str, sources: Mapping[str, str], width: int = 44) -> str:
    """``text`` (a config as :func:`OmegaConf.to_yaml` writes it) with ``# SOURCE`` after every
    key ``sources`` names, the comments aligned at ``width`` columns where the line allows; a
    value that YAML continues on the next lines (a long text folded) is left without one, where
    a comment would end it."""
    lines = text.splitlines()
    out, stack = [], []  # stack: (indent, key) of the keys enclosing the line
    for i, line in enumerate(lines):
        m = _KEY.match(line)
        if not m:
            out.append(line)
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2).strip("'\"")))
        source = sources.get(".".join(k for _, k in stack))
        after = lines[i + 1] if i + 1 < len(lines) else ""
        folded = (len(after) - len(after.lstrip(" ")) > indent and not _KEY.match(after)
                  and not after.lstrip(" ").startswith("- "))
        out.append(f"{line:<{width}} # {source}" if source and not folded else line)
    return "\n".join(out) + "\n"


def _label(config_path: str) -> str:
    """How a config of the defaults list is named to a reader."""
    group, _, name = config_path.rpartition("/")
    if group == MODEL_SCHEMA_GROUP:
        return f"the defaults of mixer {name} (/{config_path})"
    if group == MODEL_KEYS_GROUP:
        return f"config/model/{name}.yaml"
    return f"config/{config_path}.yaml"


def _set_below(sources: dict[str, Any], key: str, source: str) -> None:
    """Give ``source`` to ``key`` and to every key below it (an override of a whole node)."""
    below = [k for k in sources if k == key or k.startswith(key + ".")]
    for k in below or [key]:
        sources[k] = source
