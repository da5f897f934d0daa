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


def yaml_problem(exc: Exception) -> str:
    """One line for a YAML file that does not load (a PyYAML ``MarkedYAMLError``): the file,
    line and column, what is wrong, and what to do. A tag that constructs Python objects
    (``!!python/object/apply:…``) is refused by the safe loaders that read every config, so
    nothing in it ran; say so rather than show PyYAML's traceback."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark else "a YAML file"
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    if "could not determine a constructor for the tag" in problem:
        tag = problem.rsplit("tag ", 1)[-1]
        return (f"{where}: the YAML tag {tag} is not allowed in a config (it would construct a "
                "Python object; configs are read with a safe loader, so nothing in it ran): "
                "remove the tag and write a plain value")
    context = " ".join(str(getattr(exc, "context", None) or "").split())
    return f"{where}: not valid YAML ({context + ': ' if context else ''}{problem}): fix the file"


#: How much of another program's message a one-line error quotes (characters): one place for it.
QUOTE_CHARS = 200


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, cut after a whole word (or, in one
    long token such as a URL, after a ``/``) and ended with "…" where cut: a message that quotes
    another program's words never ends in the middle of one."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:max(1, limit - 2)]
    at = max(cut.rfind(" "), cut.rfind("/"))
    if at > len(cut) // 2:
        cut = cut[:at + 1] if cut[at] == "/" else cut[:at]
    return cut.rstrip(" ,;:(") + " …"


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what lies beneath it, outermost first: its causes and contexts, and the errors
    that requests and urllib3 wrap in their own (``args[0]``, ``reason``); for a server that
    does not answer, the ``Read timed out`` or ``Connection refused`` under MLflow's long line."""
    seen = [exc]
    while True:
        e = seen[-1]
        wrapped = e.args[0] if e.args and isinstance(e.args[0], BaseException) else None
        nxt = e.__cause__ or getattr(e, "reason", None) or wrapped or e.__context__
        if not isinstance(nxt, BaseException) or any(nxt is s for s in seen):
            return seen
        seen.append(nxt)
