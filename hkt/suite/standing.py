"""Where a suite run stands and when it should finish, read from its files: what ``hkt status``
prints and ``hkt stop`` reads.

When it starts executing, the workflow writes its plan to ``RESULTS_DIR/plan/suite.json``: every
job with its estimate, the file it writes last and its log (:func:`hkt.suite.estimate.write_plan`). This
module reads that and, per job, what the job itself writes: its output (done); the header of
its log's last attempt (``hkt --log``: host and pid), so that it is running while that process
lives or, on another host (a SLURM node), while its log keeps growing; the attempt's last
progress line (a training job's step, validation accuracy and ETA) or its last error line
(failed; stopped, where a signal ended it: the workflow's next run resumes it, a training job
from its checkpoint). It imports neither torch nor mlflow, so it answers at once, and it reads
the same files whether the jobs ran on this machine or on a cluster.

The remaining wall time is the cost model's (:mod:`hkt.suite.estimate`, as ``hkt plan``, ``hkt doctor``
and the workflow's banner count it), from the files as they are now: a done job costs nothing, a
waiting or stopped training job its overhead and the steps after its checkpoint, a running job
its own ETA (a training job's progress line says it; until it prints one, its cost from the step
it resumed at, less the time it has run), packed on the suite's cores and, on a GPU, its GPU slots
(:func:`hkt.suite.estimate.pack`). Training is scaled by how the steps measured so far (progress lines,
the throughput each checkpoint logged in ``history.csv``, finished records) compare with the
plan, and the other rules by how long their finished jobs took (:func:`scale_other_rules`).
The wall time so far is the sum of the workflow's sessions on the directory (a suite resumed
after a pause or a preemption runs in several; :mod:`hkt.workflow.sessions`), set beside the
plan's estimate at the first.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hkt.errors import HKTError, did_you_mean
from hkt.fileio import pid_alive
from hkt.run_record import RECORD_NAME, RecordError, load_record
from hkt.suite.estimate import checkpointed_step, pack, settle_done, train_cost
from hkt.suite.pace import attempt_start, last_attempt, measured_pace
from hkt.workflow.grid import suite_plan_file
from hkt.workflow.sessions import duration, load_sessions, session_seconds

__all__ = ["JobState", "SuiteStatus", "suite_status", "schedule", "scale_other_rules",
           "results_arguments", "settings"]

#: The packing of the remaining jobs: the cost model's (:func:`hkt.suite.estimate.pack`).
schedule = pack

PROGRESS = re.compile(r"^step\s+(?P<step>\d+)/(?P<total>\d+) \| (?P<rest>.*)$")
ERROR = re.compile(r"^(hkt(?: [\w-]+)*: error: |hkt: stopped by |\w*Error: )")  # hkt train: error: argparse
ETA = re.compile(r"eta (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
STOPPED = re.compile(r"^hkt: stopped by \w+")
RESUMES_AT = re.compile(r"at step \d+/(?P<total>\d+).*?(?:checkpoint written at step "
                        r"(?P<saved>\d+)|kept the checkpoint of step (?P<kept>\d+))")
RESUMING = re.compile(r"^resuming from .* at step (?P<step>\d+)/(?P<total>\d+)$")


@dataclass
class JobState:
    rule: str
    name: str
    state: str                  # done | running | failed | stopped | waiting
    detail: str = ""            # progress (running) or the last error line (failed, stopped)
    remaining_s: float = 0.0    # its remaining seconds (running, waiting)
    threads: int = 1
    log: str = ""
    step_ratio: float | None = None  # measured / planned seconds per training step
    planned_s: float = 0.0      # the plan's seconds for the whole job
    left: float = 1.0           # the fraction of it its attempt (next, or running) starts with
    elapsed_s: float = 0.0      # since its last attempt started (running), or what it took (done)
    timed: bool = False         # running, with an ETA of its own (its progress line)


@dataclass
class SuiteStatus:
    results: Path
    plan: dict[str, Any]
    jobs: list[JobState]
    workflow: str               # one line on the workflow process itself
    remaining_s: float
    speed: float | None         # training steps: measured / planned time (None: none measured)
    now: float
    sessions: list[dict[str, Any]] = field(default_factory=list)  # plan/sessions.json
    wall_s: float = 0.0         # the sessions' wall time, summed

    def count(self, state: str) -> int:
        return sum(j.state == state for j in self.jobs)


def _eta_seconds(text: str) -> float | None:
    m = ETA.search(text)
    if not m or not any(m.groups()):
        return None
    h, mi, s = (int(g or 0) for g in m.groups())
    return 3600 * h + 60 * mi + s


def _progress(lines: list[str]) -> tuple[str, float | None, int, int] | None:
    """The last training progress line with an ETA: (shown text, eta seconds, step, total)."""
    for line in reversed(lines):
        m = PROGRESS.match(line.strip())
        if m and "eta " in m["rest"]:
            step, total = int(m["step"]), int(m["total"])
            keep = [p for p in m["rest"].split(" | ")
                    if p.startswith(("val ", "best ", "acc ", "testing: "))]
            shown = " | ".join([f"step {step}/{total} ({100 * step / max(1, total):.0f}%)",
                                *keep, f"eta {m['rest'].rsplit('eta ', 1)[1]}"])
            return shown, _eta_seconds(m["rest"]), step, total
    return None


def _error_line(lines: list[str]) -> str | None:
    for line in reversed(lines):
        if ERROR.match(line.strip()):
            return line.strip()
    return None


def job_state(job: dict[str, Any], *, now: float, host: str, stale_after_s: float,
              tail_bytes: int) -> JobState:
    """The state of one planned job, from its output and its log."""
    modelled = _modelled(job)
    st = JobState(job["rule"], job["name"], "waiting", remaining_s=float(job["seconds"]),
                  threads=int(job.get("threads") or 1), log=job.get("log", ""),
                  planned_s=float(job.get("cost_s", job["seconds"])))
    if modelled and job.get("output"):  # from its checkpoint as it is now
        st.remaining_s = train_cost(job, checkpointed_step(job["output"]))
    log = Path(job.get("log") or "")
    header, lines = last_attempt(log, tail_bytes) if job.get("log") and log.is_file() else (None, [])
    if job.get("output") and Path(job["output"]).exists():
        if _damaged_record(job["output"], st):
            return st
        st.state, st.remaining_s = "done", 0.0
        if header is not None:  # what it took: from its attempt's start to its output
            st.elapsed_s = Path(job["output"]).stat().st_mtime - attempt_start(header, log)
        return st
    if header is None:
        return st
    if header["host"] == host:
        alive = pid_alive(int(header["pid"]))
    else:
        alive = now - log.stat().st_mtime < stale_after_s
    if not alive:
        st.detail = _error_line(lines) or "ended without a result or an error line (killed?)"
        if STOPPED.match(st.detail):  # a signal ended it: the next run takes it up again
            st.left = _left_after_stop(st.detail)
            st.state = "stopped"
            if not modelled:
                st.remaining_s = st.planned_s * st.left
        else:
            st.state, st.remaining_s = "failed", 0.0
        return st
    st.state = "running"
    started = attempt_start(header, log)
    st.elapsed_s = now - started
    st.left = _left_on_resume(lines)
    st.remaining_s = max(0.0, _cost_from(job, st.left) - st.elapsed_s)
    found = _progress(lines) if job["rule"] == "train" else None
    if found is not None:
        st.detail, eta, step, total = found
        if eta is not None:
            st.remaining_s, st.timed = eta, True
            if total > step and job.get("steps"):
                # the trainer's ETA runs at its pace with validations, so it is set against the
                # plan's seconds per step with validations too (job seconds / steps)
                st.step_ratio = eta / (total - step) / _per_step(job)
    else:
        st.detail = f"running for {duration(now - started)}"
    return st


def _damaged_record(output: str, st: JobState) -> bool:
    """A job whose output is a run record that does not load is not done: the workflow's next
    run sets the record aside and redoes the job (``st`` says so, waiting). True where so."""
    if Path(output).name != RECORD_NAME:
        return False
    try:
        load_record(output)
    except RecordError as exc:
        st.detail = (f"{output} does not load ({exc.problem}): the workflow's next run redoes "
                     "this run (hkt train finishes it from its last checkpoint)")
        return True
    return False


def _modelled(job: dict[str, Any]) -> bool:
    """Whether a planned job carries the cost model's terms (:func:`hkt.suite.estimate.train_cost`): a
    training job of a timed shape. Otherwise its planned ``seconds`` are all there is (a shape
    the calibration left out: nothing, as planned)."""
    return job["rule"] == "train" and "overhead_s" in job and bool(job.get("step_s"))


def _cost_from(job: dict[str, Any], left: float) -> float:
    """What a job costs when it starts with the fraction ``left`` of its work to do."""
    if _modelled(job):
        return train_cost(job, round(int(job["steps"]) * (1.0 - left)))
    return float(job["seconds"]) * left


def _per_step(job: dict[str, Any]) -> float:
    """The plan's seconds per training step with its share of the validations (a trainer's ETA
    runs at that pace)."""
    steps = int(job["steps"])
    if "eval_steps" in job:
        return float(job["step_s"]) * (steps + float(job["eval_steps"])) / steps
    return float(job["seconds"]) / steps


def _left_after_stop(line: str) -> float:
    """The fraction of a stopped job still to do: a training job resumes from the checkpoint
    its stop line names; anything else starts again."""
    m = RESUMES_AT.search(line)
    if not m:
        return 1.0
    return _left(m["saved"] or m["kept"], m["total"])


def _left_on_resume(lines: list[str]) -> float:
    """The fraction of a running job its attempt started with: a training job that resumed from
    a checkpoint says at which step; anything else started from nothing."""
    for line in lines:
        m = RESUMING.match(line.strip())
        if m:
            return _left(m["step"], m["total"])
    return 1.0


def _left(step: str, total: str) -> float:
    """The fraction of a training job after ``step`` of ``total``."""
    return max(0.0, 1.0 - int(step) / max(1, int(total)))


def scale_other_rules(jobs: list[JobState], paces: dict[str, float] | None = None) -> None:
    """The other rules' costs (config/plan.yaml) at the pace their finished jobs took
    (``paces``, :func:`hkt.suite.pace.measured_pace`; None: from the jobs' own elapsed times)."""
    if paces is None:
        paces = {}
        for rule in {j.rule for j in jobs} - {"train"}:
            took = [j.elapsed_s / j.planned_s for j in jobs if j.rule == rule and j.state == "done"
                    and j.elapsed_s > 0 and j.planned_s > 0]
            if took:
                paces[rule] = statistics.median(took)
    for rule, pace in paces.items():
        if rule == "train":
            continue
        for j in jobs:
            if j.rule == rule and j.state in ("waiting", "stopped"):
                j.remaining_s = j.planned_s * pace
            elif j.rule == rule and j.state == "running":
                j.remaining_s = max(0.0, j.planned_s * pace - j.elapsed_s)


def _workflow_line(results: Path, host: str) -> str:
    from hkt.workflow.results_lock import LOCK_NAME, holder

    info = holder(results / LOCK_NAME)
    if not info:
        return "workflow: not started in this results directory"
    who = f"pid {info.get('pid')} on {info.get('host')}, from {info.get('checkout')}"
    if info.get("host") != host:
        return f"workflow: last started by {who} (another host: its state is not visible here)"
    if pid_alive(int(info.get("pid", 0) or 0)):
        return f"workflow: running ({who}, since {info.get('started')})"
    return (f"workflow: not running (its last run, {who}, has ended); the same snakemake "
            "command resumes the suite")


def suite_status(results: str | Path, settings: dict[str, Any], now: float | None = None
                 ) -> SuiteStatus:
    """Read the results directory ``results`` (see the module docstring)."""
    results = Path(results)
    path = suite_plan_file(results)
    if not results.is_dir():
        raise HKTError(f"results directory {results} does not exist: give the results_dir of "
                       "the suite (default: results)" + close_results_dir(results))
    if not path.is_file():
        raise HKTError(f"no suite plan in {path}: the workflow writes it when it starts "
                       "(`snakemake --cores all`, or with --config results_dir=DIR), once it has "
                       "timed a few training steps (up to a minute or two; then ask again); "
                       "`hkt plan` estimates a suite without running it")
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise HKTError(f"{path} is not a suite plan ({exc}); the workflow's next start "
                       "writes it anew") from None
    now = time.time() if now is None else now
    host = socket.gethostname()
    base = _base(plan, results)
    planned = [{**j, **{k: str(base / j[k]) for k in ("output", "log") if j.get(k)}}
               for j in plan["jobs"]]
    jobs = [job_state(j, now=now, host=host, stale_after_s=float(settings["stale_after_s"]),
                      tail_bytes=int(settings["tail_bytes"])) for j in planned]
    settled = settle_done([j.rule for j in jobs], [j.name for j in jobs],
                          [j.state == "done" for j in jobs])
    for job, st, d in zip(planned, jobs, settled):
        if st.state == "done" and not d:  # its output exists, but the workflow runs it again
            st.state, st.remaining_s, st.elapsed_s = "waiting", st.planned_s, 0.0
    pace = measured_pace(planned, [st.state == "done" for st in jobs],
                         int(settings["tail_bytes"]), [j.step_ratio for j in jobs if j.step_ratio])
    speed = pace.train
    for job, st in zip(planned, jobs):  # training not timed by its own progress line: at the pace
        if st.rule == "train" and speed and st.step_ratio is None:
            if st.state in ("waiting", "stopped"):
                st.remaining_s *= speed
            elif st.state == "running" and not st.timed:
                st.remaining_s = max(0.0, _cost_from(job, st.left) * speed - st.elapsed_s)
    scale_other_rules(jobs, pace.rules)
    sessions = load_sessions(results)
    return SuiteStatus(results, plan, jobs, _workflow_line(results, host),
                       schedule(jobs, int(plan.get("cores") or 1), plan.get("slots"),
                                plan.get("gpu_slots")), speed, now, sessions,
                       sum(session_seconds(x, now=now, host=host) for x in sessions))


def _base(plan: dict[str, Any], results: Path) -> Path:
    """What the plan's relative paths are relative to: the workflow's working directory, or,
    where that is gone (a copied results directory), the directory above ``results``, as a
    one-component results_dir has it."""
    workdir = Path(plan.get("workdir") or "")
    if plan.get("workdir") and (workdir / plan.get("results_dir", "")).resolve() == results.resolve():
        return workdir
    return results.resolve().parent


def close_results_dir(results: Path) -> str:
    """``"; did you mean results-smoke?"`` for a results directory ``results`` that does not
    exist, where one beside it (holding a suite plan, or named results*) is close; else ``""``."""
    parent = results.parent
    try:
        near = [d.name for d in parent.iterdir() if d.is_dir() and not d.name.startswith(".")
                and (d.name.startswith("results") or suite_plan_file(d).is_file())]
    except OSError:
        return ""
    return did_you_mean(results.name, near, "" if str(parent) == "." else f"{parent}/")


def results_arguments(parser: argparse.ArgumentParser, file: str, example: str) -> None:
    """RESULTS_DIR and KEY=VALUE overrides of ``config/FILE`` (:func:`settings`): status, stop."""
    parser.add_argument("results", nargs="?", default="results", metavar="RESULTS_DIR",
                        help="the suite's results directory (default: results)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help=f"overrides of config/{file}, e.g. {example}")


def settings(overrides: list[str], file: str = "status.yaml") -> dict[str, Any]:
    """config/status.yaml (or ``file``, ``hkt stop``'s) with ``KEY=VALUE`` overrides (plain YAML)."""
    import yaml

    from hkt.config_compose import config_dir

    cfg = yaml.safe_load((config_dir() / file).read_text(encoding="utf-8"))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in cfg:
            raise HKTError(f"bad override {item!r}: give KEY=VALUE with KEY one of "
                           f"{', '.join(sorted(cfg))} (config/{file})")
        cfg[key] = yaml.safe_load(value)
    return cfg
