"""External baselines of ours: programs beside ``hkt train`` that read a task's prepared data and
write a run record (docs/contracts.md), nothing more, so that they join the tables like any run.

:data:`BASELINES` is a :class:`hkt.plugin_registry.Registry` of this package: every module here is
imported before the first lookup, so a new baseline is one module, ``hkt/baselines/NAME.py``,
whose ``fit`` is decorated with ``@register("NAME")``. ``hkt baseline NAME`` runs it. The module
(``hkt/baselines/majority.py`` is the example) defines:

* a docstring whose first paragraph says what it is (``hkt baseline --help`` lists it);
* ``fit(data: Splits, *, seed, **options) -> Fit`` (:mod:`hkt.baselines.run`): the numbers;
* ``add_arguments(parser)``: ``add_run_arguments(parser)`` and its own options;
* ``run(args) -> int``: ``run_command("NAME", args)``.

One rule at several settings that each have a name of their own is one module that registers
its ``fit`` once per name, and whose ``run`` reads the name it was called by, ``args.name``
(``hkt/baselines/depth_rule.py``: ``depth1_rule``, ``depth2_rule``, ``depth3_rule``).

What every baseline shares (its arguments, the data read, the record and MLflow run written) is
:mod:`hkt.baselines.run`. A program that is not ours needs no module: its ``command`` under
``external:`` in ``config/config.yaml`` is its whole registration (docs/extending.md,
recipe (b)).

Modules here import torch only inside their functions: ``hkt baseline --help`` imports them all.
"""

from __future__ import annotations

import sys
from types import ModuleType

from hkt.plugin_registry import Registry

__all__ = ["BASELINES", "REQUIRED", "register", "baseline_module", "summary"]

# baseline name -> its ``fit(data, *, seed, **options) -> hkt.baselines.run.Fit``
BASELINES = Registry("baseline", "hkt.baselines")

# Function decorator: make a module's ``fit`` the baseline ``name``.
register = BASELINES.register

# what a baseline's module defines besides ``fit``: the command-module contract of hkt/cli/main.py
REQUIRED = ("add_arguments", "run")


def baseline_module(name: str) -> ModuleType:
    """The module of baseline ``name`` (its ``fit``, ``add_arguments`` and ``run``);
    :class:`hkt.plugin_registry.UnknownName` listing the registered ones if there is none."""
    module = sys.modules[BASELINES.lookup(name).__module__]
    missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"baseline {name!r}: {module.__name__} lacks {', '.join(missing)}")
    return module


def summary(name: str) -> str:
    """What baseline ``name`` is (``hkt baseline --help``): the first paragraph of its module's
    docstring or, where the module registers several baselines, of its ``fit``'s."""
    module = baseline_module(name).__name__
    several = sum(fit.__module__ == module for fit in BASELINES.values()) > 1
    doc = (BASELINES.lookup(name).__doc__ if several else sys.modules[module].__doc__) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ") or name
