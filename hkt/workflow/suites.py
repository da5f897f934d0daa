"""Which suite the workflow runs: ``suite: auto`` (the default in ``config/config.yaml``) becomes
the ``paper`` suite on a machine with CUDA and the ``cpu`` suite otherwise.

A suite is a file ``config/suites/NAME.yaml`` merged over ``config/config.yaml`` as Snakemake's
``--configfile`` merges it (dictionaries merge, lists replace); each sets ``suite: NAME``. A user
who passes ``--configfile config/suites/X.yaml`` has chosen already (``suite: X``); only
``auto`` is resolved here, and the command line's ``--config`` keys are applied again after the
chosen file so that they still win. Torch is imported only to ask about CUDA, and only when
asked: the check is injected, so the choice is tested without a GPU.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from hkt.errors import ConfigError

__all__ = ["AUTO", "CUSTOM", "ENV_VAR", "GPU_SUITE", "CPU_SUITE", "cuda_available", "choose_suite",
           "choice_reason", "merge",
           "resolve_suite", "suite_file", "load_suite"]

AUTO = "auto"
GPU_SUITE = "paper"  # sized for a GPU (config/suites/paper.yaml)
CPU_SUITE = "cpu"    # finishes on a 2-core CPU machine (config/suites/cpu.yaml)
CUSTOM = "custom"    # config files given without a suite name
ENV_VAR = "HKT_SUITE"  # the choice of `auto`, once made


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (the real check; tests inject their own)."""
    import torch

    return bool(torch.cuda.is_available())


def choose_suite(cuda: Callable[[], bool] = cuda_available,
                 env: Mapping[str, str] | None = None) -> str:
    """The suite ``auto`` stands for on this machine: paper with CUDA, cpu without; ``$HKT_SUITE``
    (which the workflow sets for its jobs, so a cluster node agrees with the login node) wins."""
    forced = (os.environ if env is None else env).get(ENV_VAR)
    return forced or (GPU_SUITE if cuda() else CPU_SUITE)


def choice_reason(suite: str, env: Mapping[str, str] | None = None) -> str:
    """Why :func:`choose_suite` chose ``suite``: ``$HKT_SUITE`` when set, else the CUDA check."""
    forced = (os.environ if env is None else env).get(ENV_VAR)
    if forced:
        return f"${ENV_VAR}={forced}"
    return "CUDA available" if suite == GPU_SUITE else "no CUDA"


def merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``update`` over ``base`` as Snakemake merges config files: dictionaries merge key by key,
    every other value (lists too) replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def suite_file(name: str, config_dir: str | Path) -> Path:
    """``config/suites/NAME.yaml``, or a :class:`ConfigError` listing the suites there."""
    path = Path(config_dir) / "suites" / f"{name}.yaml"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in path.parent.glob("*.yaml"))) or "none"
        raise ConfigError(f"suite '{name}' has no config/suites/{name}.yaml (suites: {names}, "
                          f"or {AUTO})")
    return path


def resolve_suite(config: Mapping[str, Any], config_dir: str | Path, *,
                  overrides: Mapping[str, Any] | None = None, files: bool = False,
                  cuda: Callable[[], bool] = cuda_available,
                  env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], bool]:
    """The config to run, and whether ``auto`` was resolved here (the suite was chosen).

    ``config`` is ``config.yaml`` with the ``--configfile`` files and ``--config`` keys merged;
    ``overrides`` is what those gave (Snakemake's ``overwrite_config``), ``files`` whether any
    config file was given. With ``suite: auto`` the chosen suite file is merged over ``config``
    and ``overrides`` over that, so that every key the user gave still wins. Config files that
    name no suite make a ``custom`` suite (``config.yaml`` + those files, nothing chosen).
    """
    overrides = overrides or {}
    name = str(config.get("suite") or CUSTOM)
    if name == AUTO and files and "suite" not in overrides:
        return {**config, "suite": CUSTOM}, False
    if name != AUTO:
        return dict(config), False
    chosen = choose_suite(cuda, env)
    suite = yaml.safe_load(suite_file(chosen, config_dir).read_text(encoding="utf-8")) or {}
    merged = merge(merge(config, suite), overrides)
    merged["suite"] = chosen
    return merged, True


def load_suite(suite: str | None, *, cuda: Callable[[], bool] | None = None) -> Any:
    """The workflow config: ``config/config.yaml``, with a suite file merged over it as
    Snakemake's ``--configfile`` does (dictionaries merge, lists replace). ``suite`` is a path
    or a name in ``config/suites/``; None or ``auto`` is the workflow's own choice
    (:func:`resolve_suite`: paper with CUDA, else cpu; ``cuda`` replaces the CUDA check)."""
    from omegaconf import OmegaConf

    from hkt.config import config_dir

    cdir = config_dir()
    base = OmegaConf.load(cdir / "config.yaml")
    if suite is None or suite == "auto":
        resolved, _ = resolve_suite(OmegaConf.to_container(base), cdir,
                                    cuda=cuda or cuda_available)
        return OmegaConf.create(resolved)
    path = Path(suite) if Path(suite).is_file() else suite_file(suite, cdir)
    return OmegaConf.create(merge(OmegaConf.to_container(base),
                                  OmegaConf.to_container(OmegaConf.load(path))))
