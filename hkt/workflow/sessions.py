"""Each time the workflow ran on a results directory, so that a suite's wall time is measured
over its interruptions.

A night-long suite is often run in pieces: paused for other work, preempted, ended with a
login session, and resumed by the same command from its checkpoints. Its wall time is then the
sum of those pieces, which no single log holds. When it starts executing, the workflow appends a
session to ``RESULTS_DIR/plan/sessions.json`` (host, pid, the checkout's commit, its start, which
is Snakemake's, so that a session spans what Snakemake's ``Elapsed time`` measures, and the
estimate of that span: the time before the first job, measured, plus the plan's; the command and directory it ran from, which ``hkt stop`` gives
back as the way to resume, and whether its jobs go to a cluster) and, from a background
thread, writes the session's ``last_seen`` every ``heartbeat_s`` (config/status.yaml), so that
a session killed without a word (SIGKILL, a lost node) still has an end, to within that. One that ends by itself also writes ``ended``
and whether it succeeded. ``hkt status`` sums them and sets the total beside the estimate.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hkt.fileio import atomic_write_text, pid_alive

__all__ = ["SESSIONS_FILE", "command_line", "start_session", "end_session", "load_sessions",
           "running_here", "session_end", "session_seconds", "wall_line", "duration"]

SESSIONS_FILE = "plan/sessions.json"  # under results_dir

_lock = threading.Lock()  # the heartbeat thread and the end hook write the same file
_heartbeats: dict[Path, threading.Event] = {}  # results directory -> stops its heartbeat


def _path(results_dir: str | Path) -> Path:
    return Path(results_dir) / SESSIONS_FILE


def _read(path: Path) -> list[dict[str, Any]] | None:
    """The sessions in ``path``; [] when it does not exist, None when it is not a sessions file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("sessions"), list):
        return None
    return [x for x in doc["sessions"] if isinstance(x, dict) and "started" in x]


def load_sessions(results_dir: str | Path) -> list[dict[str, Any]]:
    """The sessions recorded for ``results_dir``, oldest first ([] when none or unreadable: it
    is a record for reading, never a reason for a run to stop)."""
    return _read(_path(results_dir)) or []


def _update(results_dir: str | Path, change: dict[str, Any], *, new: bool = False) -> None:
    path = _path(results_dir)
    with _lock:
        sessions = _read(path)
        if sessions is None and new:  # kept for whoever wants it, not written over
            aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
            os.replace(path, aside)
            print(f"hkt: warning: {path} is not a sessions file; moved to {aside.name}, and "
                  "the suite's wall time counts from this run on", file=sys.stderr)
            sessions = []
        if sessions is None:
            return
        last = sessions[-1] if sessions else {}
        if new:
            sessions.append(change)
        elif (last.get("pid"), last.get("host")) != (os.getpid(), socket.gethostname()) \
                or ("ended" in last and "ended" not in change):
            return  # another process's session (not ours to touch), or a beat after the end
        else:
            last.update(change)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"sessions": sessions}, indent=1) + "\n")


def command_line() -> list[str]:
    """This process's command as its user typed it: ``snakemake …`` for the script, ``python -m
    snakemake …`` for the module (whose ``sys.argv[0]`` is a file inside the package) and
    ``python -c …``."""
    script = Path(sys.argv[0])
    if script.name != "__main__.py" and script.is_file():
        return list(sys.argv)
    return list(sys.orig_argv)


def start_session(results_dir: str | Path, *, estimate_s: float, heartbeat_s: float,
                  cluster: bool = False, started: float | None = None) -> threading.Thread:
    """Record that this process (the workflow, holding the results directory's lock) runs a
    session of the suite that began at ``started`` (default: now; the workflow gives Snakemake's
    start, the span its ``Elapsed time`` measures) and that its plan estimates at ``estimate_s``
    over the same span (its jobs on a ``cluster`` or here), and keep its ``last_seen`` fresh until
    the process ends; returns the thread."""
    from hkt.provenance import git_state

    commit, dirty = git_state()
    now = time.time()
    _update(results_dir, {"started": now if started is None else float(started), "last_seen": now,
                          "host": socket.gethostname(),
                          "pid": os.getpid(), "commit": commit, "dirty": dirty,
                          "estimate_s": float(estimate_s), "argv": command_line(),
                          "cwd": os.getcwd(), "cluster": bool(cluster)}, new=True)

    stop = _heartbeats[Path(results_dir).resolve()] = threading.Event()

    def beat() -> None:
        while not stop.wait(heartbeat_s):
            try:
                _update(results_dir, {"last_seen": time.time()})
            except OSError:  # a full or vanished disk: the jobs will say so, not this thread
                pass

    thread = threading.Thread(target=beat, name="hkt-session-heartbeat", daemon=True)
    thread.start()
    return thread


def end_session(results_dir: str | Path, *, ok: bool) -> None:
    """Record that this process's session ends now (the workflow's onsuccess/onerror), and stop
    its heartbeat."""
    stop = _heartbeats.pop(Path(results_dir).resolve(), None)
    if stop is not None:
        stop.set()
    now = time.time()
    _update(results_dir, {"last_seen": now, "ended": now, "ok": ok})


def running_here(session: dict[str, Any], host: str) -> bool:
    """Whether ``session`` is still running on ``host`` (no end written, its process alive)."""
    return "ended" not in session and session.get("host") == host \
        and pid_alive(int(session.get("pid") or 0))


def session_end(session: dict[str, Any], *, now: float, host: str) -> float:
    """When ``session`` ended: its end, or ``now`` for one still running here; one that ended
    without a word, the last time it was seen."""
    if running_here(session, host):
        return now
    return float(session.get("ended", session.get("last_seen", session["started"])))


def session_seconds(session: dict[str, Any], *, now: float, host: str) -> float:
    """How long ``session`` ran (:func:`session_end`)."""
    return max(0.0, session_end(session, now=now, host=host) - float(session["started"]))


def wall_line(sessions: list[dict[str, Any]], wall_s: float,
              remaining_s: float | None = None) -> str:
    """What ``hkt status`` says of the suite's wall time ``wall_s`` over ``sessions``: all of it
    (``remaining_s`` None: every job is done), or so far and, with ``remaining_s``, in all; set
    against the first session's estimate, and from which commits."""
    first = float(sessions[0].get("estimate_s") or 0.0)
    runs = f"{len(sessions)} run{'s' if len(sessions) > 1 else ''} of the workflow"
    total = wall_s if remaining_s is None else wall_s + remaining_s
    so_far = "" if remaining_s is None else f"; with the remaining, about {duration(total)}"
    against = (f", against {duration(first)} planned at its first start "
               f"({100 * (total / first - 1):+.0f}%)" if first else "")
    commits = sorted({f"{x['commit'][:7]}{'+dirty' if x.get('dirty') else ''}"
                      for x in sessions if x.get("commit")})
    code = (f"; from {len(commits)} commits: {', '.join(commits)}" if len(commits) > 1
            else f"; commit {commits[0]}" if commits else "")
    return (f"wall time{'' if remaining_s is None else ' so far'}: {duration(wall_s)} over {runs}"
            f"{so_far}{against}{code}")


def duration(seconds: float) -> str:
    """A wall time as the plan and the status say it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
