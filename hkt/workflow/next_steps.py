"""What a finished suite tells its user to run next: the command that builds its report and the
one that opens the MLflow UI on its runs, written as they work where the workflow ran.

The report command is the workflow's own (its Snakemake, Snakefile, ``--configfile`` files and
``--config`` keys), with the suite and its results directory always named: ``snakemake --report``
builds the workflow's DAG again, and without them it reads another suite's (``suite: auto``) and
another results directory. The workflow passes it to ``hkt aggregate`` in
:data:`REPORT_COMMAND_ENV` (an environment variable, not a rule parameter: a parameter is a rerun
trigger, and the same suite resumed by a command spelled differently must not run its aggregate
again), which prints it in ``summary.md`` (a program outside the repository by its name:
:func:`published_form`); the workflow's last lines repeat it as it works there
(:func:`closing_lines`). ``docs/tracking.md`` holds the MLflow UI command this follows.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hkt.mlflow_store import sqlite_path
from hkt.provenance import NO_SUITE
from hkt.report.aggregate import REPORT_COMMAND_ENV

__all__ = ["REPORT_COMMAND_ENV", "shown", "program", "report_command", "published_form",
           "mlflow_ui_command", "closing_lines"]

#: Where the MLflow UI listens (docs/tracking.md: this machine only; an SSH tunnel from elsewhere).
UI_ADDRESS = ("127.0.0.1", 5000)


def shown(path: str | Path, cwd: Path | None = None) -> str:
    """``path`` as a user types it in ``cwd``: relative below it, else absolute."""
    cwd = Path.cwd() if cwd is None else cwd
    p = Path(path)
    full = p if p.is_absolute() else cwd / p
    try:
        return str(full.relative_to(cwd))
    except ValueError:
        return str(full)


def program(name: str, cwd: Path | None = None) -> str:
    """The command ``name`` installed beside this Python (the venv's ``bin/``), as typed in
    ``cwd``: ``.venv/bin/snakemake`` after the README's setup; the bare name where it is not there."""
    beside = Path(sys.executable).parent / name
    return shown(beside, cwd) if beside.is_file() else name


def _value(v: Any) -> str:
    """A ``--config`` value as Snakemake parses it back (strings bare, the rest as YAML flow)."""
    return v if isinstance(v, str) else json.dumps(v)


def report_command(results: str, *, suite: str, snakefile: str | Path,
                   configfiles: Sequence[str | Path] = (), config: Mapping[str, Any] | None = None,
                   cwd: Path | None = None) -> str:
    """The shell line that builds ``results``' report, run where the workflow ran (``cwd``):
    the workflow's Snakefile (named unless it is the one Snakemake finds there), its config files
    (after one ``--configfile``: given twice, Snakemake would keep only the last), its
    ``--config`` keys, and ``results_dir`` always; the suite too, unless config files name it
    (a suite of one's own, config/cuts/cpu.yaml's, is refused as ``--config suite=NAME``) or
    name none."""
    cwd = Path.cwd() if cwd is None else cwd
    words = [program("snakemake", cwd), "--report", f"{results}/report.html"]
    found = {(cwd / "Snakefile").resolve(), (cwd / "workflow" / "Snakefile").resolve()}
    if Path(cwd, snakefile).resolve() not in found:
        words += ["--snakefile", shown(snakefile, cwd)]
    if configfiles:
        words += ["--configfile", *(shown(f, cwd) for f in configfiles)]
    named = suite != NO_SUITE and not configfiles
    keys = {**({"suite": suite} if named else {}), "results_dir": results}
    keys.update({k: v for k, v in (config or {}).items() if k not in keys})
    words += ["--config", *(f"{k}={_value(v)}" for k, v in keys.items())]
    return shlex.join(words)


def published_form(command: str) -> str:
    """``command`` as a file that may be published writes it (``summary.md``): a program given
    by an absolute path (a venv outside the repository, as ``/work/main/.venv/bin/snakemake``)
    by its name, so that no publication names the machine that made it (issue 73). The
    workflow's closing lines keep the path, which works where it ran."""
    words = shlex.split(command)
    if words and Path(words[0]).is_absolute():
        words[0] = Path(words[0]).name
    return shlex.join(words)


def mlflow_ui_command(uri: str, cwd: Path | None = None) -> str | None:
    """The command that opens MLflow's UI on a SQLite store (docs/tracking.md); None for a
    server, which is its own UI."""
    db = sqlite_path(uri)
    if db is None:
        return None
    host, port = UI_ADDRESS
    return shlex.join([program("mlflow", cwd), "ui", "--backend-store-uri",
                       f"sqlite:///{shown(db, cwd)}", "--host", host, "--port", str(port)])


def closing_lines(results: str, summary: str, report: str, uri: str) -> list[str]:
    """The workflow's last lines after a suite completes: where its summary is, the command
    that builds its report, and how to open its runs in MLflow."""
    ui = mlflow_ui_command(uri)
    host, port = UI_ADDRESS
    mlflow = (f"`{ui}`, then http://{host}:{port}/#/experiments?workflowType=machine_learning"
              if ui else f"the tracking server {uri}")
    return [f"hkt: suite complete: results in {results}/, read {results}/{summary} first",
            f"hkt: the report (every table and figure with its caption, one HTML file): `{report}`",
            f"hkt: the runs in MLflow's UI: {mlflow} (docs/tracking.md)"]
