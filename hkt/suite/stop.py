"""``hkt stop [RESULTS_DIR]``: stop the workflow running on one results directory, and only it,
so that the same command resumes it.

Which processes: the workflow is the process that holds ``RESULTS_DIR/.workflow.lock``
(:mod:`hkt.workflow.results_lock`; its pid is written there and in its session, ``plan/sessions.json``),
asked of the OS, so a stale pid is never signalled. Its jobs are its own child processes: each
job is a shell that Snakemake starts, running one command (``hkt --log … train …``, an external
baseline's command); the first process below Snakemake that is not a shell is the job's command.
Nothing else is touched: not another results directory's workflow, not someone else's `hkt`.

How: SIGTERM to Snakemake first (it then starts no new job and waits for those running), then
SIGTERM to each job's command. A training job finishes its step and writes a checkpoint of it
within ``train.stop_grace_s`` (:mod:`hkt.signals`); every other `hkt` command leaves nothing
half-written. Jobs that start in between are found and stopped at the next look (every
``poll_s``) until the workflow ends. Then it lists the stopped jobs (from their logs, as ``hkt
status`` reads them) and ends with one line: the command that resumes the suite.

The workflow itself says so too: after a stop that failed no job, its last line reads ``stopped,
resumable`` (:func:`resumable_line`, from its ``onerror`` hook, printed as the process exits,
after Snakemake's own lines). Snakemake still exits with status 1: the suite is not complete,
and a script that goes on after ``snakemake … &&`` must not go on.

A workflow whose jobs run on a cluster is not stopped here: its jobs are not this machine's
processes. Ctrl-C in its terminal (or SIGINT to its pid) makes Snakemake cancel them, and the
cluster's SIGTERM makes each training job write its checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from hkt.errors import HKTError
from hkt.fileio import atomic_write_text

__all__ = ["SHELLS", "STOP_FILE", "process_table", "job_processes", "running_workflow",
           "stop_workflow", "resumable_line", "resume_command", "add_arguments", "run"]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})  # what Snakemake runs a job's command in
STOP_FILE = "plan/stop.json"  # under results_dir: who asked which workflow to stop, and when
RESUMABLE = "stopped, resumable"


def process_table() -> dict[int, tuple[int, str]]:
    """Every process on this host: pid -> (parent pid, command name), from ``ps`` (Linux and
    macOS alike)."""
    out = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "comm="],
                         capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = (int(parts[1]), os.path.basename(parts[2].strip()))
    return table


def job_processes(workflow_pid: int, table: dict[int, tuple[int, str]]) -> list[int]:
    """The jobs' commands of the workflow ``workflow_pid``: below it, the first process on each
    branch that is not a shell (a job's own children, such as data-loader workers, are its
    business)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(workflow_pid, []))
    while todo:
        pid = todo.pop()
        if table[pid][1] in SHELLS:
            todo.extend(children.get(pid, []))
        else:
            found.append(pid)
    return sorted(found)


def running_workflow(results: Path) -> dict[str, Any] | None:
    """The workflow running on ``results`` on this host (its lock's holder and its session:
    pid, argv, cwd, cluster), or None when none runs; raises :class:`HKTError` for a directory
    no workflow has run in, or one whose workflow runs on another host."""
    from hkt.suite.standing import close_results_dir
    from hkt.workflow.results_lock import LOCK_NAME, holder, is_held
    from hkt.workflow.sessions import load_sessions

    if not results.is_dir():
        raise HKTError(f"no results directory {results}: give the results_dir of the suite to "
                       "stop (default: results)" + close_results_dir(results))
    if not (results / LOCK_NAME).is_file():
        raise HKTError(f"no workflow has run in {results} (it has no {LOCK_NAME}): give the "
                       "results_dir of the suite to stop")
    if not is_held(results):
        return None
    info = holder(results / LOCK_NAME)
    if info.get("host") != socket.gethostname():
        raise HKTError(f"the workflow on {results} runs on host {info.get('host')} (pid "
                       f"{info.get('pid')}): run `hkt stop` there")
    pid = int(info.get("pid") or 0)
    if pid <= 0:
        raise HKTError(f"the workflow on {results} has not yet said who it is ({LOCK_NAME} "
                       "names no pid): try again in a moment")
    session = next((s for s in reversed(load_sessions(results)) if s.get("pid") == pid
                    and s.get("host") == info.get("host")), {})
    return {**session, **info}


def resume_command(session: dict[str, Any], results: Path) -> str:
    """The shell line that resumes the suite: the workflow's own command, from its directory."""
    argv = session.get("argv")
    if not argv:  # a session from before commands were recorded
        return f"the same snakemake command (with results_dir={results})"
    command = shlex.join(str(a) for a in argv)
    cwd = session.get("cwd")
    return f"cd {shlex.quote(cwd)} && {command}" if cwd and cwd != os.getcwd() else command


def _signal(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
        return True
    except ProcessLookupError:  # ended meanwhile
        return False


def _recent_jobs(results: Path, since: float) -> list[Any]:
    """The jobs (``hkt status``'s :class:`~hkt.suite.standing.JobState`) whose logs were written since
    ``since``: those of this session; [] where the workflow wrote no plan yet."""
    from hkt.suite.standing import settings, suite_status

    try:
        jobs = suite_status(results, settings([])).jobs
    except HKTError:
        return []
    return [j for j in jobs if _touched_since(j.log, since)]


def _touched_since(log: str, since: float) -> bool:
    try:
        return Path(log).stat().st_mtime >= since - 1.0  # file times are coarse on some systems
    except OSError:
        return False


def stop_workflow(results: str | Path, *, wait_s: float, poll_s: float,
                  say: Any = print) -> int:
    """Stop the workflow on ``results`` (see the module docstring) and wait up to ``wait_s``
    for it to end; returns 0 (stopped, or none was running). Raises :class:`HKTError` when it
    is still running after ``wait_s``."""
    from hkt.workflow.results_lock import is_held

    results = Path(results)
    found = running_workflow(results)
    if found is None:
        say(f"hkt: no workflow is running on {results}: nothing to stop")
        return 0
    pid = int(found["pid"])
    if found.get("cluster"):
        raise HKTError(f"the workflow on {results} (pid {pid}) runs its jobs on a cluster, not "
                       f"here: press Ctrl-C in its terminal or send it SIGINT (`kill -INT "
                       f"{pid}`); Snakemake then cancels its jobs, and each training job "
                       "writes a checkpoint at the cluster's SIGTERM")
    asked = time.time()
    request = results / STOP_FILE
    request.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(request, json.dumps({"pid": pid, "host": socket.gethostname(),
                                           "requested": asked, "by_pid": os.getpid()}) + "\n")
    say(f"hkt: stopping the workflow on {results} (pid {pid}) and its jobs; each training job "
        "writes a checkpoint of its step")
    jobs = job_processes(pid, process_table())  # while it lives: its children are its jobs
    _signal(pid, signal.SIGTERM)  # before its jobs: it starts no job after this
    signalled: set[int] = set()
    deadline = time.monotonic() + wait_s
    while True:
        for job in jobs:
            if job not in signalled and _signal(job, signal.SIGTERM):
                signalled.add(job)
        if not is_held(results):
            break
        if time.monotonic() >= deadline:
            left = job_processes(pid, process_table())
            raise HKTError(f"the workflow on {results} (pid {pid}) has not ended within "
                           f"{wait_s:g} s (wait_s, config/stop.yaml); still running: "
                           f"{', '.join(f'pid {p}' for p in left) or 'the workflow alone'}; "
                           f"run `hkt stop {shlex.quote(str(results))}` again to wait longer")
        time.sleep(poll_s)
        jobs = job_processes(pid, process_table())  # and any started meanwhile
    for job in _recent_jobs(results, asked):
        if job.state == "stopped":
            say(f"  {job.rule} {job.name}: {job.detail.removeprefix('hkt: ')}")
    say(f"hkt: stopped the workflow on {results} (pid {pid}) and {len(signalled)} running "
        f"job{'' if len(signalled) == 1 else 's'}; resume with: {resume_command(found, results)}")
    return 0


def resumable_line(results: str | Path) -> str | None:
    """What the workflow (this process) says last when it ends without success: ``stopped,
    resumable`` and how, when a stop ended it (``hkt stop`` asked this process, or a signal
    ended its jobs) and none of its jobs failed in this session; None otherwise (a failure:
    Snakemake's error stands)."""
    from hkt.workflow.sessions import load_sessions

    results, me = Path(results), (os.getpid(), socket.gethostname())
    session = next((s for s in reversed(load_sessions(results))
                    if (s.get("pid"), s.get("host")) == me), {})
    started = float(session.get("started", time.time()))
    try:
        asked = json.loads((results / STOP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        asked = {}
    requested = (isinstance(asked, dict) and (asked.get("pid"), asked.get("host")) == me
                 and float(asked.get("requested") or 0) >= started)
    recent = _recent_jobs(results, started)
    if any(j.state == "failed" for j in recent):
        return None
    stopped = [j for j in recent if j.state == "stopped"]
    if not (requested or stopped):
        return None
    training = sum(j.rule == "train" for j in stopped)
    return (f"hkt: {RESUMABLE}: {len(stopped)} job{'' if len(stopped) == 1 else 's'} stopped, "
            f"{training} of them training from {'its' if training == 1 else 'their'} "
            f"checkpoint{'' if training == 1 else 's'}; the same command resumes the suite: "
            f"{resume_command(session, results)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Stop the workflow running on RESULTS_DIR, and only it: Snakemake and "
                          "its jobs, by the pid its lock records; every training job writes a "
                          "checkpoint of its step, and the last line says how to resume "
                          "(settings: config/stop.yaml).")
    from hkt.suite.standing import results_arguments

    results_arguments(parser, "stop.yaml", "wait_s=600")


def run(args: argparse.Namespace) -> int:
    from hkt.suite.standing import settings

    cfg = settings(args.overrides, "stop.yaml")
    return stop_workflow(args.results, wait_s=float(cfg["wait_s"]), poll_s=float(cfg["poll_s"]),
                         say=lambda line: print(line, flush=True))
