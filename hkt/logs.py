"""Log records to whatever ``sys.stderr`` is when a record is written, not when the handler was
made: a command run twice in one process (the tests, a notebook) with stderr redirected in
between would otherwise write into the first, by then closed, stream."""

from __future__ import annotations

import logging
import sys

__all__ = ["stderr_handler"]


class _CurrentStderr(logging.StreamHandler):
    @property  # type: ignore[override]
    def stream(self):  # noqa: D401 - logging reads the attribute
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # set by StreamHandler.__init__; always sys.stderr instead
        pass


def stderr_handler(fmt: str) -> logging.Handler:
    """A handler writing ``fmt``-formatted records to the current ``sys.stderr``."""
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter(fmt))
    return handler
