"""``hkt status [RESULTS_DIR]``: where a suite stands and when it should finish, as
:mod:`hkt.suite.standing` reads it from the suite's files, printed once or until every job
has ended (``--watch``)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from typing import Any

from hkt.suite.standing import SuiteStatus, results_arguments, settings, suite_status
from hkt.workflow.grid import RULE_ORDER
from hkt.workflow.sessions import duration, wall_line

__all__ = ["format_status", "add_arguments", "run"]


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _on_gpus(plan: dict[str, Any]) -> str:
    """What the remaining time counts of the GPUs: their slots ("" without)."""
    g = plan.get("gpu_slots")
    if not g:
        return ""
    at_once = (plan.get("slots") or {}).get("train")
    return (f" and {g['gpus']} GPU(s) x {g['per_gpu']} slots (jobs_per_gpu)"
            + (f", {at_once} training jobs at once" if at_once else ""))


def format_status(s: SuiteStatus) -> str:
    """What ``hkt status`` prints."""
    p = s.plan  # its start is the last run's; a suite run in pieces started with its first
    start = min([float(p["started"])] + [float(x["started"]) for x in s.sessions if x.get("started")])
    lines = [f"suite {p.get('suite')} (profile {p.get('profile')}) in {s.results}/, started "
             f"{_when(start)} ({duration(s.now - start)} ago) on "
             f"{p.get('device')}", s.workflow,
             f"jobs: {len(s.jobs)}: done {s.count('done')}, running {s.count('running')}, "
             f"waiting {s.count('waiting')}, failed {s.count('failed')}"
             + (f", stopped {s.count('stopped')}" if s.count("stopped") else "")]
    width = max((len(j.name) for j in s.jobs), default=0)
    for state in ("running", "failed", "stopped"):
        group = [j for j in s.jobs if j.state == state]
        if group:
            lines.append(f"{state}:")
            for j in group:
                where = f"  (log: {j.log})" if state == "failed" else ""
                lines.append(f"  {j.rule:<9} {j.name:<{width}}  {j.detail}{where}")
    redo = [j for j in s.jobs if j.state == "waiting" and j.detail]  # a record that does not load
    if redo:
        lines.append("to redo:")
        lines += [f"  {j.rule:<9} {j.name:<{width}}  {j.detail}" for j in redo]
    for state in ("waiting", "done"):
        per_rule = {r: sum(j.state == state and j.rule == r for j in s.jobs) for r in RULE_ORDER}
        if any(per_rule.values()):
            lines.append(f"{state}: " + ", ".join(f"{r} {n}" for r, n in per_rule.items() if n))
    if s.count("done") == len(s.jobs):
        lines.append("finished: every job is done")
    elif s.count("running") + s.count("waiting") + s.count("stopped"):
        pace = (f"; training steps take {s.speed:.2f}x the plan's time" if s.speed else
                "; no training step has run yet: the plan's times")
        about = "at least" if p.get("untimed") else "about"  # shapes the calibration left out
        lines.append(f"remaining: {about} {duration(s.remaining_s)} on {p.get('cores')} cores"
                     f"{_on_gpus(p)}{pace}; expected to finish {_when(s.now + s.remaining_s)}")
        if s.count("failed"):
            lines.append("(failed jobs are not counted: the workflow stops after the running "
                         "jobs unless --keep-going; fix them and run it again)")
        if s.count("stopped"):
            lines.append("(stopped jobs are counted from where they resume: "
                         + ("the running workflow takes them up again)" if
                            s.workflow.startswith("workflow: running") else
                            "the same snakemake command resumes them, training from its "
                            "checkpoint)"))
    if s.sessions:
        finished = s.count("done") == len(s.jobs)
        lines.append(wall_line(s.sessions, s.wall_s, None if finished else s.remaining_s))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Where a suite stands: its jobs by state (done, running with step, accuracy "
                           "and ETA, waiting, failed with the log's error line, stopped by a signal), the "
                           "remaining wall time and when it should finish (settings: config/status.yaml).")
    results_arguments(parser, "status.yaml", "watch_every_s=30")
    parser.add_argument("--watch", action="store_true", help="refresh until every job has "
                        "ended (watch_every_s of config/status.yaml); Ctrl-C stops watching")



def run(args: argparse.Namespace) -> int:
    from hkt import signals

    cfg = settings(args.overrides)
    try:
        while True:
            status = suite_status(args.results, cfg)
            text = format_status(status)
            if args.watch and sys.stdout.isatty():
                text = "\x1b[H\x1b[2J" + text
            print(text, flush=True)
            if not args.watch or not (status.count("running") or status.count("waiting")):
                return 0
            time.sleep(float(cfg["watch_every_s"]))
    except signals.Stopped:
        if args.watch:  # Ctrl-C is how one stops watching
            return 0
        raise
