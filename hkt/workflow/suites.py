"""Which suite a command runs, made once: :func:`load_suite` turns ``auto``, a suite's name or a
suite file into a :class:`Suite` (its name, its merged workflow config, its :class:`Grid`, and
why it was chosen); the workflow (``workflow/rules/common.smk``, :func:`workflow_suite`),
``hkt plan``, ``hkt doctor`` and ``scripts/publish_results.py`` all make theirs here, once per
process, and hand its grid on.

A suite is a file ``config/suites/NAME.yaml`` merged over ``config/config.yaml`` as Snakemake's
``--configfile`` merges it (dictionaries merge, lists replace); each sets ``suite: NAME``.
``auto`` (the default in ``config/config.yaml``) is the ``paper`` suite on a machine with CUDA
and the ``cpu`` suite otherwise, unless ``$HKT_SUITE`` names one. Config files that name no
suite make a suite named :data:`~hkt.provenance.NO_SUITE`, the one stand-in for "no suite".
Torch is imported only to ask about CUDA, and only when asked: the check is injected, so the
choice is tested without a GPU.

A suite's jobs learn which suite they run for by one channel, the environment variable
``$HKT_SUITE`` (:attr:`Suite.env`; :data:`hkt.provenance.SUITE_ENV`): the workflow sets it for
every job, it reaches a cluster node (the workflow's ``envvars:``) and any external baseline's
command, and it makes a cluster node that reads the workflow again choose what the login node
chose.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hkt.errors import ConfigError, GridError, did_you_mean
from hkt.provenance import NO_SUITE, SUITE_ENV
from hkt.workflow.grid import Grid, read_yaml

__all__ = ["AUTO", "NO_SUITE", "SUITE_ENV", "GPU_SUITE", "CPU_SUITE", "Suite", "load_suite",
           "workflow_suite", "choose", "cuda_available", "merge", "is_named_suite", "suite_file", "SCHEMA_FILE",
           "check_config", "interpreter_first"]

AUTO = "auto"
GPU_SUITE = "paper"  # sized for a GPU (config/suites/paper.yaml)
CPU_SUITE = "cpu"    # finishes on a 2-core CPU machine (config/suites/cpu.yaml)
#: The workflow config's JSON schema, relative to the config directory's parent (the repository).
SCHEMA_FILE = Path("workflow") / "schemas" / "config.schema.yaml"


@dataclass(frozen=True, eq=False)  # one object per suite made: compared and hashed by identity
class Suite:
    """One suite, resolved: made by :func:`load_suite` or :func:`workflow_suite`, never twice."""

    name: str                # config/suites/NAME.yaml's NAME, or NO_SUITE
    config: dict[str, Any]   # the merged workflow config (its `suite` key is `name`)
    grid: Grid               # its jobs, paths and arguments, built once from `config`
    reason: str              # how it was named, or why `auto` chose it

    @property
    def env(self) -> dict[str, str]:
        """The run context its jobs receive (the one channel): ``$HKT_SUITE``."""
        return {SUITE_ENV: self.name}


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (the real check; tests inject their own)."""
    import torch

    return bool(torch.cuda.is_available())


def choose(cuda: Callable[[], bool] = cuda_available,
           env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The suite ``auto`` stands for here, and why: ``$HKT_SUITE`` when set (the workflow sets
    it for its jobs, so a cluster node agrees with the login node), else paper with CUDA and
    cpu without."""
    import os

    forced = (os.environ if env is None else env).get(SUITE_ENV)
    if forced:
        return forced, f"${SUITE_ENV}={forced}"
    return (GPU_SUITE, "CUDA available") if cuda() else (CPU_SUITE, "no CUDA")


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


def is_named_suite(name: str, config_dir: str | Path) -> bool:
    """Whether ``name`` is a suite of ``config/suites/`` (not ``auto``, ``none`` or a suite of
    one's own, which its config files name)."""
    return name not in (AUTO, NO_SUITE) and (Path(config_dir) / "suites" / f"{name}.yaml").is_file()


def suite_file(name: str, config_dir: str | Path) -> Path:
    """``config/suites/NAME.yaml``, or a :class:`ConfigError` listing the suites there."""
    path = Path(config_dir) / "suites" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(_no_suite_message(name, Path(config_dir)))
    return path


def _no_suite_message(name: str, config_dir: Path, more: str = "") -> str:
    """Suite ``name`` has no file: the suites there, ``more``, and the one ``name`` is close to."""
    known = sorted(p.stem for p in (config_dir / "suites").glob("*.yaml"))
    return (f"suite '{name}' has no config/suites/{name}.yaml (suites: {', '.join(known) or 'none'}, "
            f"or {AUTO}: paper with CUDA, else cpu){more}" + did_you_mean(name, [*known, AUTO]))


def _read(path: Path) -> dict[str, Any]:
    return read_yaml(path) or {}


def _is_file_name(choice: str) -> bool:
    """Whether ``choice`` names a file rather than a suite of config/suites/."""
    return choice.endswith((".yaml", ".yml")) or "/" in choice


def _locate(choice: str, config_dir: Path, cuda: Callable[[], bool],
            env: Mapping[str, str] | None) -> tuple[dict[str, Any], str | None, str]:
    """The suite file's contents, the name it gives the suite (None: the file's own), and why."""
    if choice == AUTO:
        name, why = choose(cuda, env)
        return (_read(suite_file(name, config_dir)), name,
                f"suite: {AUTO}, {why}; ${SUITE_ENV} or --config suite=NAME "
                "chooses another")
    if choice == NO_SUITE:
        return {}, NO_SUITE, f"{NO_SUITE}: config/config.yaml alone"
    if _is_file_name(choice):
        path = Path(choice).expanduser()
        if not path.is_file():
            raise ConfigError(f"suite file {choice} does not exist (a suite is {AUTO}, a name in "
                              "config/suites/ or a YAML file)")
        return _read(path), None, f"the file {choice}"
    return _read(suite_file(choice, config_dir)), choice, f"config/suites/{choice}.yaml"


def load_suite(choice: str | Path | Sequence[str | Path] = AUTO, *,
               base: Mapping[str, Any] | None = None,
               overrides: Mapping[str, Any] | None = None, config_dir: str | Path | None = None,
               cuda: Callable[[], bool] = cuda_available,
               env: Mapping[str, str] | None = None) -> Suite:
    """The :class:`Suite` of ``choice``: ``auto`` (chosen here, :func:`choose`), a name in
    ``config/suites/``, a suite file, or ``none`` (``config/config.yaml`` alone); or a list of
    them: the first as said, then files merged over it in order, as Snakemake merges its
    ``--configfile`` files (a cut after its suite: ``config/suites/cpu.yaml``,
    ``config/cuts/cpu.yaml``).

    Its files are merged over ``base`` (default ``config/config.yaml``) and ``overrides`` (the
    command line's keys) over that, so that every key the user gave still wins. A file's suite
    is the one its ``suite`` key names, else none; a later file that names one renames the
    suite (a cut is a suite of its own). Raises :class:`ConfigError` for a suite that does not
    exist (listing those that do), a later item that is not a file, or a config the schema or
    the grid refuses."""
    from hkt.config_compose import config_dir as default_config_dir

    cdir = Path(config_dir) if config_dir is not None else default_config_dir()
    base = _read(cdir / "config.yaml") if base is None else base
    first, *later = [choice] if isinstance(choice, (str, Path)) else list(choice) or [AUTO]
    found, name, reason = _locate(str(first), cdir, cuda, env)
    for item in map(str, later):
        if not _is_file_name(item):
            raise ConfigError(f"suite {item!r} after {first}: what follows the first suite is a "
                              "file merged over it (a path, e.g. config/cuts/cpu.yaml), not a "
                              "suite's name")
        more, _, _ = _locate(item, cdir, cuda, env)
        found = merge(found, more)
        name = None if more.get("suite") else name  # the files name a suite of their own
        reason += f", then the file {item}"
    config = merge(merge(base, found), overrides or {})
    if name is None:  # a file of its own: the suite it names, if any
        name = str(found.get("suite") or NO_SUITE)
        name = NO_SUITE if name == AUTO else name
    return _made(name, config, reason, cdir)


def workflow_suite(config: Mapping[str, Any], config_dir: str | Path, *,
                   overrides: Mapping[str, Any] | None = None, files: bool = False,
                   command_line: Mapping[str, Any] | None = None,
                   cuda: Callable[[], bool] = cuda_available,
                   env: Mapping[str, str] | None = None) -> Suite:
    """The :class:`Suite` of a Snakemake invocation. ``config`` is ``config.yaml`` with the
    ``--configfile`` files and ``--config`` keys merged; ``overrides`` what ``--config`` gave
    (Snakemake's ``overwrite_config``), ``files`` whether any config file was given.

    The ``suite`` key (``auto`` or a name) is loaded over ``config`` as :func:`load_suite` does,
    ``overrides`` last (Snakemake 9 counts the config files' keys among them, so a suite file
    given is merged again under them: no change). Config files given that set no ``suite`` make
    no suite (:data:`NO_SUITE`), ``config`` whole; so do files that set it where ``overrides``
    lacks it (Snakemake 8, which keeps file keys out of them), and files that name a suite of
    their own (no ``config/suites/NAME.yaml``: the files are that suite).

    ``command_line`` is what ``--config`` alone gave (Snakemake's ``config_settings.config``): a
    suite named there is chosen, not a label, so one without a ``config/suites/`` file is refused
    (listing the suites) even beside config files; a suite of one's own is named in its file."""
    overrides = overrides or {}
    named = str(config.get("suite", AUTO))
    own = named != AUTO and not is_named_suite(named, config_dir)
    chosen = (command_line or {}).get("suite")
    if files and own and chosen is not None and str(chosen) == named and named != NO_SUITE \
            and not _is_file_name(named):  # without files, load_suite refuses it
        raise ConfigError(f"--config suite={named}: " + _no_suite_message(
            named, Path(config_dir), "; a suite of your own is named in its config file "
                                     "(suite: NAME), not chosen with --config"))
    if files and ("suite" not in overrides or own):  # own: files naming a suite of their own
        name = NO_SUITE if named == AUTO else named
        return _made(name, dict(config), "from the config files given", Path(config_dir))
    return load_suite(named, base=config, overrides=overrides, config_dir=config_dir, cuda=cuda,
                      env=env)


def _made(name: str, config: dict[str, Any], reason: str, config_dir: Path) -> Suite:
    """The suite ``name`` of ``config``: checked against the workflow's schema (where the
    repository has it) and given its one :class:`Grid`."""
    config = {**config, "suite": name}
    schema = config_dir.parent / SCHEMA_FILE
    if schema.is_file():
        check_config(config, _read(schema))
    return Suite(name, config, Grid(config, config_dir), reason)


def check_config(config: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
    """Validate the workflow config against its JSON schema (:data:`SCHEMA_FILE`); raise
    :class:`GridError` naming the first bad key, and for an unknown key the keys allowed there
    (not the whole schema)."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(dict(config)),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    err = errors[0]
    where = ".".join(map(str, err.absolute_path))
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(err.schema.get("properties") or {})
        unknown = sorted(k for k in err.instance if k not in allowed)
        keys = ", ".join(f"{where}.{k}" if where else k for k in unknown)
        raise GridError(f"unknown key {keys} (allowed{' under ' + where if where else ''}: "
                        f"{', '.join(allowed)})"
                        + did_you_mean(unknown[0], allowed, f"{where}." if where else ""))
    raise GridError(f"key {where or '(top level)'}: {err.message}{_list_hint(err)}")


def _list_hint(err: Any) -> str:
    """How to pass a list of numbers, where the error is one given the Snakemake way:
    ``--config seeds=[0,1]`` reaches the workflow as ``['0', '1']`` (Snakemake's ``--config``
    reads a list's items as text) and ``seeds=0`` as a number where a list belongs."""
    path = list(err.absolute_path)
    wanted = err.schema.get("type") if isinstance(err.schema, Mapping) else None
    numeric = wanted in ("integer", "number") and isinstance(err.instance, str)
    if numeric and path and isinstance(path[-1], int):
        try:
            float(err.instance)
        except ValueError:
            return ""
        key = ".".join(str(p) for p in path[:-1])
        return (f"; Snakemake's --config reads the items of a list as text ({key}=[0,1] gives "
                f"['0', '1']): give a list of numbers in a config file, --configfile FILE "
                f"holding `{key}: [0, 1]`")
    if wanted == "array" and not isinstance(err.instance, list):
        key = ".".join(str(p) for p in path)
        return (f"; {key} is a list: give it in a config file, --configfile FILE holding "
                f"`{key}: [{err.instance}]` (Snakemake's --config reads a list's items as text)")
    return ""


def interpreter_first(path: str) -> str:
    """``path`` (a PATH value) with the ``bin/`` of the Python that runs Snakemake first, once:
    the PATH the suite's jobs inherit (as they do ``$HKT_SUITE``). Rules call ``hkt``, and
    `.venv/bin/snakemake` must find the venv's without an activated venv (the README's main
    command)."""
    here = str(Path(sys.executable).parent)
    rest = [p for p in path.split(os.pathsep) if p and p != here]
    return os.pathsep.join([here, *rest])
