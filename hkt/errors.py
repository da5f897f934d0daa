"""Errors a user can fix. The CLI prints them as one clear message, without a traceback."""

from __future__ import annotations

from collections.abc import Iterable


class HKTError(Exception):
    """Base class: the message says what is wrong and what to do."""


class ConfigError(HKTError):
    """A bad config key, value or override."""


class ConfigValueError(ConfigError, ValueError):
    """One config value that is well-typed but impossible, with the key it sits under.

    Also a ``ValueError``: the typed module configs raise it when a module is built from Python
    with a bad argument. :meth:`under` re-keys it with the path of the node it came from.
    """

    def __init__(self, key: str, value: object, why: str) -> None:
        self.key, self.value, self.why = key, value, why
        super().__init__(f"config key '{key}' = {value!r}: {why}")

    def under(self, prefix: str) -> "ConfigValueError":
        return ConfigValueError(f"{prefix}.{self.key}" if prefix else self.key, self.value, self.why)


class GridError(ConfigError):
    """A workflow config that names something that does not exist; the message names the key.
    Raised by every part of the workflow's job grid (:mod:`hkt.workflow.grid`, its resources,
    its external commands, the config's schema check)."""


class DataError(HKTError):
    """Missing, corrupt or wrongly laid out data (checksums, archives, layouts)."""


class TrainingError(HKTError):
    """A run that cannot continue (divergence, incompatible checkpoint)."""


class RunMismatch(TrainingError):
    """The run directory holds a run with another config or other data."""


def did_you_mean(name: object, known: Iterable[object], prefix: str = "") -> str:
    """``"; did you mean NAME?"`` where one of ``known`` is closest to ``name`` (a typo, by
    :func:`difflib.get_close_matches`' measure and cutoff), ``"; did you mean A or B?"`` where
    several are equally close, else ``""``: appended to every message that refuses an unknown
    name and lists the known ones (suites, config groups' options, config keys, mixers,
    registries). ``prefix`` goes before each suggestion (``train.`` for the key
    ``train.max_steps``, matched on its last part alone, so that a shared prefix makes no
    match)."""
    import difflib

    options = sorted({str(k) for k in known})
    close = difflib.get_close_matches(str(name), options, n=len(options) or 1)
    if not close:
        return ""

    def score(option: str) -> float:
        return difflib.SequenceMatcher(None, str(name), option).ratio()

    best = sorted(c for c in close if score(c) == score(close[0]))
    names = [f"{prefix}{c}" for c in best]
    return "; did you mean " + (names[0] if len(names) == 1 else
                                f"{', '.join(names[:-1])} or {names[-1]}") + "?"
