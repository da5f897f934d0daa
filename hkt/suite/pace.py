"""The measured pace of a suite: how the work that ran compares with the cost model
(:mod:`hkt.suite.estimate`), read from the suite's logs and records. A job's log holds one header
per attempt (:data:`HEADER`, written by ``hkt --log``): its last attempt and when it started
(:func:`last_attempt`, :func:`attempt_start`); a finished training job's record gives its
measured seconds per step, a running one's checkpoints the throughput they logged; another rule's
finished job how long it took against its cost. :func:`measured_pace` puts them together: what
``hkt status`` and a plan with ``tail_bytes`` scale the work left by. Torch-free."""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hkt.run_record import RecordError, load_record

__all__ = ["HEADER", "last_attempt", "attempt_start", "took_s", "record_ratio", "history_ratio",
           "Pace", "measured_pace", "log_tail_bytes"]


#: The header ``hkt --log`` writes at the start of each attempt of a job, in the job's log.
HEADER = re.compile(r"^===== hkt (?P<cmd>.*) \| (?P<when>\S+) \| host (?P<host>\S+) "
                    r"pid (?P<pid>\d+) =====$")


def _tail(path: Path, limit: int) -> list[str]:
    """The lines of the last ``limit`` bytes of ``path`` (a log may be long)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - limit))
        text = fh.read().decode("utf-8", errors="replace")
    return text.splitlines()


def last_attempt(log: Path, limit: int) -> tuple[dict[str, str] | None, list[str]]:
    """The header fields of the log's last attempt (None if it has none) and that attempt's
    lines (the last ``limit`` bytes of the log are read)."""
    lines = _tail(log, limit)
    for i in range(len(lines) - 1, -1, -1):
        m = HEADER.match(lines[i])
        if m:
            return m.groupdict(), lines[i + 1:]
    return None, lines


def attempt_start(header: Mapping[str, str], log: Path) -> float:
    """When an attempt started (its header's time; the log's mtime if that does not parse)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(header["when"]).timestamp()
    except ValueError:
        return log.stat().st_mtime


def took_s(job: Mapping[str, Any], tail_bytes: int) -> float | None:
    """What a done job's last attempt took: from its log's header to its output (None: no log)."""
    log = Path(job.get("log") or "")
    if not job.get("log") or not log.is_file() or not job.get("output"):
        return None
    header, _ = last_attempt(log, tail_bytes)
    if header is None:
        return None
    return Path(job["output"]).stat().st_mtime - attempt_start(header, log)


def record_ratio(job: Mapping[str, Any]) -> float | None:
    """Measured / calibrated seconds per step of a finished training job (its record's
    ``ms_per_step``; a record that does not load through its schema says nothing)."""
    try:
        rec = load_record(job["output"])
    except (OSError, RecordError):
        return None
    ms = rec.get("ms_per_step")
    return ms / 1000 / float(job["step_s"]) if ms and job.get("step_s") else None


def history_ratio(job: Mapping[str, Any]) -> float | None:
    """Measured / calibrated seconds per step of a training job's steps so far: the throughput
    its checkpoints logged (``history.csv``'s samples_per_s, at its batch)."""
    from hkt.run_record import read_history

    if not (job.get("batch") and job.get("step_s") and job.get("output")):
        return None
    try:
        rates = [r["samples_per_s"] for r in read_history(Path(job["output"]).parent)
                 if r.get("samples_per_s")]
    except (OSError, ValueError, KeyError):
        return None
    return int(job["batch"]) / statistics.median(rates) / float(job["step_s"]) if rates else None


@dataclass
class Pace:
    """How the work that ran compares with the cost model: training steps (measured /
    calibrated seconds per step; None: none ran) and each other rule (took / cost)."""

    train: float | None = None
    rules: dict[str, float] = field(default_factory=dict)


def measured_pace(jobs: Sequence[Mapping[str, Any]], done: Sequence[bool], tail_bytes: int,
                  live: Sequence[float] = ()) -> Pace:
    """The pace of ``jobs`` (``plan/suite.json``'s dicts; ``done``: whether each one's output
    exists) from what ran: training from ``live`` ratios (running jobs' ETAs, ``hkt status``)
    and finished records, else the throughput checkpoints logged; another rule from how long its
    finished jobs took against their cost."""
    train = list(live) + [r for j, d in zip(jobs, done)
                          if d and j["rule"] == "train" and (r := record_ratio(j))]
    if not train:  # steps that ran, but no job finished nor gives an ETA: their checkpoints
        train = [r for j, d in zip(jobs, done)
                 if not d and j["rule"] == "train" and (r := history_ratio(j))]
    rules: dict[str, list[float]] = {}
    for j, d in zip(jobs, done):
        cost = float(j.get("cost_s", j.get("seconds")) or 0.0)
        if d and j["rule"] != "train" and cost > 0 and (t := took_s(j, tail_bytes)):
            if t > 0:
                rules.setdefault(j["rule"], []).append(t / cost)
    return Pace(statistics.median(train) if train else None,
                {r: statistics.median(v) for r, v in rules.items()})


def log_tail_bytes() -> int:
    """How much of a log's end is read for its last attempt (config/status.yaml ``tail_bytes``)."""
    import yaml

    from hkt.config_compose import config_dir

    return int(yaml.safe_load((config_dir() / "status.yaml").read_text(encoding="utf-8"))
               ["tail_bytes"])
