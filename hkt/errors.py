"""Errors a user can fix. The CLI prints them as one clear message, without a traceback."""


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
