"""Implementations by name: the one way Python code is registered in this repository.

A :class:`Registry` belongs to one package and maps names to what the package's modules
register with ``@REGISTRY.register("name")``. Looking a name up (``REGISTRY[name]``,
``name in REGISTRY``, iterating) first imports every module of that package once
(:mod:`pkgutil`), so adding an implementation is adding one module to the package: there is no
import list or table of names to edit. An unknown name raises :class:`UnknownName`, which lists
the registered ones.

A module that fails to import (a syntax error in a new mixer file, a missing optional package)
is skipped with one warning naming its file and the error: every other implementation of the
package keeps working, and a lookup of an unknown name lists the skipped files too.

The registries:

* :data:`hkt.mixers.MIXERS`: token-mixer classes (attentions and others), package ``hkt.mixers``;
* :data:`hkt.data.families.FAMILIES`: data families (each family's ``prepare``), package
  ``hkt.data.families``;
* :data:`hkt.baselines.BASELINES`: external baselines of ours (each one's ``fit``), package
  ``hkt.baselines``.

Config files are not registered here: their directory is their registration
(``config/GROUP/NAME.yaml``); so is an external baseline's entry in the workflow config.

This module imports nothing heavy: a registry's package is imported on its first lookup only.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, TypeVar

from hkt.errors import did_you_mean

__all__ = ["Registry", "UnknownName", "PluginSkipped"]

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name nothing is registered under. Also a ``ValueError`` (what the mixer registry
    raised before it was a Registry) and a ``KeyError`` (what a mapping raises)."""

    def __init__(self, kind: str, name: object, known: list[str],
                 skipped: dict[str, str] | None = None) -> None:
        self.kind, self.name, self.known = kind, name, known
        broken = "".join(f"; {path} was skipped ({error})" for path, error in (skipped or {}).items())
        super().__init__(f"unknown {kind} {name!r}; registered: {', '.join(known) or 'none'}"
                         + did_you_mean(name, known) + broken)

    def __str__(self) -> str:  # not KeyError's repr of the message
        return str(self.args[0])


class PluginSkipped(RuntimeWarning):
    """A module of a registry's package could not be imported and was left out."""


class Registry(MutableMapping[str, Any]):
    """Names -> implementations registered by the modules of ``package``.

    Args:
        kind: what is registered, for messages (``"mixer"``).
        package: the dotted package whose modules (not subpackages, not ``_private`` ones) are
            imported before the first lookup, so that their ``@register`` decorators run.
        check: called as ``check(name, obj)`` on registration; raises if ``obj`` is unfit.

    It is a mutable mapping in registration order, so tests may ``monkeypatch.setitem`` it;
    :meth:`register` is the way code adds to it (it refuses a second object under one name).
    """

    def __init__(self, kind: str, package: str,
                 check: Callable[[str, Any], None] | None = None) -> None:
        self.kind, self.package, self._check = kind, package, check
        self._entries: dict[str, Any] = {}
        self._discovered = False
        #: file -> "ErrorType: message" of each module that failed to import (and was skipped)
        self.skipped: dict[str, str] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make the decorated class or function available as ``name``."""

        def deco(obj: T) -> T:
            if name in self._entries and self._entries[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered to "
                                 f"{self._entries[name]!r}")
            if self._check is not None:
                self._check(name, obj)
            self._entries[name] = obj
            return obj

        return deco

    def lookup(self, name: Any) -> Any:
        """What is registered as ``name``; :class:`UnknownName` (listing the names) if nothing."""
        self.discover()
        try:
            return self._entries[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name from a config
            raise UnknownName(self.kind, name, sorted(self._entries), self.skipped) from None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self.discover()
        return sorted(self._entries)

    def discover(self) -> None:
        """Import every module of :attr:`package` (once), which registers what they define; a
        module that fails to import is skipped with a :class:`PluginSkipped` warning."""
        if self._discovered:
            return
        self._discovered = True  # first: a module imported below may look names up
        pkg = importlib.import_module(self.package)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.ispkg or info.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{self.package}.{info.name}")
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not hide the others
                path = getattr(info.module_finder, "path", "?") + f"/{info.name}.py"
                self.skipped[path] = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"{path}: skipped, every other {self.kind} still works: "
                              f"{self.skipped[path]}", PluginSkipped, stacklevel=2)

    # --- the mapping ----------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        return self.lookup(name)

    def __setitem__(self, name: str, obj: Any) -> None:
        self.discover()
        self._entries[name] = obj

    def __delitem__(self, name: str) -> None:
        self.discover()
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        self.discover()
        try:
            return name in self._entries
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        self.discover()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self.discover()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.package!r}: {', '.join(self._entries) or 'empty'})"
