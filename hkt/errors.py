"""Errors a user can fix. The CLI prints them as one clear message, without a traceback."""


class HKTError(Exception):
    """Base class: the message says what is wrong and what to do."""


class ConfigError(HKTError):
    """A bad config key, value or override."""


class DataError(HKTError):
    """Missing, corrupt or wrongly laid out data (checksums, archives, layouts)."""


class TrainingError(HKTError):
    """A run that cannot continue (divergence, incompatible checkpoint)."""


class RunMismatch(TrainingError):
    """The run directory holds a run with another config or other data."""
