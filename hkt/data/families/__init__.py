"""Data families: the modules that validate and prepare each kind of data (``task.family``).

:data:`FAMILIES` is a :class:`hkt.plugin_registry.Registry` of this package: every module here is
imported before the first lookup, so a new family is one module here, ``hkt/data/families/NAME.py``,
whose ``prepare`` is decorated with ``@register("NAME")``. The module also defines
``PREPARE_SCHEMA`` (the checks of the ``prepare`` node), ``LOCATION_KEYS`` (the ``prepare`` keys
that say where data come from, kept out of the Parquet metadata) and ``check_config(cfg)``, and,
where its token language is fixed, ``VOCAB`` (the token strings, index = id), against which a
prepared split's ``vocab_size`` is checked (:func:`hkt.data.parquet.check_vocabulary`);
``hkt/data/families/imdb.py`` is the example. ``hkt.data.task_config.family_module`` gives the module.

Nothing here imports torch.
"""

from hkt.plugin_registry import Registry

__all__ = ["FAMILIES", "REQUIRED", "register"]

# family name (``task.family``) -> its ``prepare(cfg, source) -> hkt.data.parquet.Prepared``
FAMILIES = Registry("data family", "hkt.data.families")

# Function decorator: make a module's ``prepare`` the preparer of data family ``name``.
register = FAMILIES.register

# what a family's module defines besides ``prepare``
REQUIRED = ("PREPARE_SCHEMA", "LOCATION_KEYS", "check_config")
