"""The workflow's config error, in its own module so that every part of the grid
(:mod:`hkt.workflow.grid`, :mod:`hkt.workflow.resources`, …) can raise it without importing
another part."""

from __future__ import annotations

from hkt.errors import ConfigError

__all__ = ["GridError"]


class GridError(ConfigError):
    """A workflow config that names something that does not exist; the message names the key."""
