"""The workflow's external baselines (``external:`` in the workflow config) and each job's command.

One rule runs them all (``workflow/rules/external.smk``): a job per task and seed of each entry,
whose shell command is the entry's ``command`` with its placeholders filled, shell-quoted, or,
for a baseline of ours (a module of ``hkt/baselines/``, :data:`hkt.baselines.BASELINES`), the
``hkt baseline NAME`` command of :data:`OURS`. A program that is not ours is therefore its
config entry alone: any command that writes ``{out}/record.json`` (docs/contracts.md "Runs").
Pure Python (no torch), as the rest of the grid.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hkt.errors import GridError

__all__ = ["PLACEHOLDERS", "OURS", "External", "externals"]

# What a command may name, and what the workflow puts there (each value shell-quoted).
PLACEHOLDERS = {
    "data": "the task's prepared data directory (what `hkt prepare` wrote)",
    "out": "the run directory: the command writes {out}/record.json there",
    "log": "the job's log file (logs/external/TASK/NAME/VARIANT/seedS.log)",
    "task": "the workflow's task id",
    "model": "the baseline's name, the record's `model`",
    "variant": "the record's `variant` (main)",
    "seed": "the record's `seed`",
    "profile": "the budget label of the task's trained runs (the record's `profile`)",
    "experiment": "the MLflow experiment of the task's trained runs ($HKT_MLFLOW_EXPERIMENT too)",
    "tracking_uri": "the MLflow store ($MLFLOW_TRACKING_URI too)",
    "options": "external.NAME.options as `--key value` words (lists: several values)",
}
# The command of a baseline of ours: `hkt baseline NAME` (hkt/baselines/run.py: its arguments).
OURS = ("hkt --log {log} baseline {model} --data {data} --out {out} --seed {seed}"
        " --variant {variant} --profile {profile} {options} --tracking-uri {tracking_uri}")


@dataclass(frozen=True)
class External:
    """One entry of ``external:``: which tasks and seeds it runs, its options and its command
    (None: ``hkt baseline NAME``)."""

    name: str
    tasks: list[str] | None = None
    seeds: list[int] = field(default_factory=lambda: [0])
    options: Mapping[str, Any] = field(default_factory=dict)
    command: str | None = None

    @classmethod
    def of(cls, name: str, spec: Mapping[str, Any] | None) -> External:
        spec = spec or {}
        return cls(name, list(spec["tasks"]) if spec.get("tasks") else None,
                   list(spec.get("seeds") or [0]), dict(spec.get("options") or {}),
                   spec.get("command") or None)

    @property
    def template(self) -> str:
        return self.command or OURS

    def option_words(self) -> list[str]:
        """``--key value`` words from the options (lists become several values; null: left out)."""
        words: list[str] = []
        for key, value in self.options.items():
            if value is None:
                continue
            flag = f"--{key.replace('_', '-')}"
            words += [flag, *map(str, value)] if isinstance(value, list) else [flag, str(value)]
        return words

    def check(self, registered: list[str]) -> None:
        """A :class:`GridError` naming the key unless the command can run: a placeholder it does
        not know, no ``{out}``, or no command and no baseline of ours of this name."""
        where = f"external.{self.name}"
        if self.command is None and self.name not in registered:
            raise GridError(
                f"{where}: no `command` given, and hkt/baselines/ has no baseline "
                f"'{self.name}' (registered: {', '.join(registered) or 'none'}); give the "
                f"program's command, or add hkt/baselines/{self.name}.py (docs/extending.md, "
                "recipe (b))")
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None}
        except ValueError as exc:
            raise GridError(f"{where}.command: {exc} (a literal brace is written twice: "
                            "{{ or }})") from None
        unknown = sorted(names - set(PLACEHOLDERS))
        if unknown:
            raise GridError(f"{where}.command names {', '.join('{' + u + '}' for u in unknown)}; "
                            f"it may name {', '.join('{' + p + '}' for p in PLACEHOLDERS)} (a "
                            "literal brace is written twice: {{ or }})")
        if "out" not in names:
            raise GridError(f"{where}.command never names {{out}}, the run directory where it "
                            "must write record.json")

    def shell(self, values: Mapping[str, Any]) -> str:
        """The job's shell command: the template with ``values`` (one per placeholder) quoted;
        a list value becomes several words, each quoted (an empty list: nothing)."""
        quoted = {k: " ".join(map(shlex.quote, map(str, v))) if isinstance(v, list)
                  else shlex.quote(str(v)) for k, v in values.items()}
        return self.template.format(**quoted)


def externals(config: Mapping[str, Any]) -> dict[str, External]:
    """The enabled entries of the workflow config's ``external:``, by name."""
    return {name: External.of(name, spec) for name, spec in (config.get("external") or {}).items()
            if (spec or {}).get("enabled", True)}
