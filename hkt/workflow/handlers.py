"""What the workflow does when its jobs start and when it ends: the Snakefile's ``onstart``,
``onsuccess`` and ``onerror``, and the two things the rules ask of a started run (its priorities,
from the plan, and the damaged records set aside before their jobs run again).

Reading the workflow changes nothing (:mod:`hkt.workflow.invocation`); what changes the world is
here. :func:`start` does what starting the jobs must, in order: the jobs' environment, the
results directory's lock, the MLflow store, the calibrated plan (written for ``hkt status`` and
printed) and the session record. :class:`Handlers` holds one run's state (the Snakemake workflow
object, its plan once made) for ``workflow/rules/common.smk``, which makes one and calls it.

The plan, its description, the status heartbeat and the stop's closing line come from
:mod:`hkt.suite`, which reads this package (the grid, the sessions, the lock): they are given as
:class:`SuiteParts`, never imported here, so that no import runs back between the two packages
(``tests/test_structure.py``).
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hkt.errors import ConfigError, HKTError
from hkt.report.aggregate_outputs import SUMMARY
from hkt.workflow.grid import Job
from hkt.workflow.invocation import ENV_PASSED, Invocation, apply_env
from hkt.workflow.next_steps import closing_lines
from hkt.workflow.sessions import duration, end_session, start_session
from hkt.workflow.suites import Suite

__all__ = ["SuiteParts", "start", "Handlers"]


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SuiteParts:
    """What starting and ending a run uses of :mod:`hkt.suite`, given by the Snakefile."""

    plan: Callable[[Suite], Any]             # the calibrated plan (``calibrated_plan``)
    describe: Callable[[Suite, Any], str]    # writes it for ``hkt status`` (``workflow_plan``)
    heartbeat_s: Callable[[], float]         # config/status.yaml's ``heartbeat_s``
    resumable_line: Callable[[str], str | None]  # after a stop, how to resume (``hkt.suite.stop``)


def start(inv: Invocation, *, started: float | None = None, cores: int | None = None,
          cluster: bool = False, claim: Callable[[], Any], open_store: Callable[[], Any],
          plan: Callable[[Suite], Any], describe: Callable[[Suite, Any], str],
          heartbeat_s: Callable[[], float], say: Callable[[str], None] = _say) -> Any:
    """What the workflow does when its jobs are about to run (``onstart``), in this order: on a
    ``cluster``, GPU rules that no GPU in view could run refused (:meth:`Grid.check_cluster_node`,
    a :class:`~hkt.errors.ConfigError`); the jobs' environment; the results directory claimed
    and the store opened (``claim``, ``open_store``: a workflow that cannot run stops before
    anything is timed); the plan calibrated (``plan``), written for ``hkt status`` and printed
    (``describe``); this session recorded (:mod:`hkt.workflow.sessions`, its heartbeat every
    ``heartbeat_s()``) from Snakemake's ``started``, its jobs on a ``cluster`` or here (known
    once Snakemake has its executor, not when it reads the workflow). Returns the plan, whose
    estimates are the training jobs' priorities. Raises what the lock, the store or a write
    raises (:class:`~hkt.errors.HKTError`, :class:`OSError`)."""
    if cluster:  # known now, not when the workflow was read: refused before anything is claimed
        try:
            inv.grid.check_cluster_node()
        except ConfigError as exc:
            raise ConfigError(f"workflow config: {exc}") from None
    apply_env(inv)
    claim()
    open_store()
    calibrated = plan(inv.suite)
    say(describe(inv.suite, calibrated))
    packing = inv.grid.gpu_packing(cores) if inv.local_gpu_slots and inv.grid.gpu_packing() \
        else None
    if packing:
        say(f"hkt: {packing}")
    began = time.time() if started is None else started
    before = max(0.0, time.time() - began)
    start_session(inv.results, estimate_s=before + calibrated.wall_seconds, started=began,
                  heartbeat_s=heartbeat_s(), cluster=cluster)
    say(f"hkt: from Snakemake's start, as its `Elapsed time` and `hkt status` count: about "
        f"{duration(before + calibrated.wall_seconds)} ({before:.0f} s before the first job: "
        "reading the workflow, checking every config, the calibration; then the jobs)")
    return calibrated


def disk_error(exc: OSError) -> Exception:
    """A full disk or a read-only file system met at the workflow's start (the lock, the store,
    the plan and its calibration cache, plan/sessions.json): the one line `hkt` prints for
    every such error (hkt.cli.main.describe_os_error), as a WorkflowError, which stops the workflow
    without a traceback."""
    from hkt.cli.main import describe_os_error
    from snakemake.exceptions import WorkflowError  # Snakemake's: the library runs without it

    return WorkflowError(f"hkt: error: {describe_os_error(exc)}")


class Handlers:
    """One Snakemake run's ``onstart``, ``onsuccess`` and ``onerror``, and its plan once started
    (None until then, and on a dry run: nothing is timed)."""

    def __init__(self, run: Invocation, workflow: Any, *, repo: Path, suite: SuiteParts) -> None:
        self.run, self.workflow, self.repo, self.suite = run, workflow, repo, suite
        self.plan: Any = None
        self._set_aside = False

    def start(self) -> None:
        """onstart: jobs are about to run (not a dry run, --lint or --report). The jobs'
        environment, the results directory claimed (one running workflow per results_dir,
        whichever checkout it runs from), the MLflow store opened (a broken one stops here,
        before anything is timed), the plan calibrated and printed and this session recorded
        (:func:`start`). The plan's estimates then become the jobs' priorities."""
        from snakemake.exceptions import WorkflowError

        wf, run = self.workflow, self.run
        began = getattr(wf, "start_time", None)  # Snakemake's start (a local datetime)
        packing = run.local_gpu_slots and run.grid.gpu_packing()  # what it prints needs --cores
        try:
            self.plan = start(run, started=began.timestamp() if began is not None else None,
                              cores=wf.cores if packing else None,
                              cluster=bool(wf.non_local_exec),  # known now, not when read
                              claim=self.claim_results, open_store=self.open_store,
                              plan=self.suite.plan, describe=self.suite.describe,
                              heartbeat_s=self.suite.heartbeat_s)
        except HKTError as exc:
            raise WorkflowError(f"hkt: error: {exc}")
        except OSError as exc:
            raise disk_error(exc)
        wf.register_envvars(*ENV_PASSED)  # set now: what a cluster node's jobs receive
        wf.dag.update_priority()  # the priority functions now read the plan

    def claim_results(self) -> None:
        """Refuse to start when another running workflow (another checkout) uses results_dir; the
        lock is held by this process until it exits."""
        from hkt.workflow.results_lock import claim_results_dir

        claim_results_dir(self.run.results, self.repo)

    def open_store(self) -> None:
        """Open (and if new, create) the MLflow store once, under the lock `hkt` takes for it,
        before parallel jobs start."""
        from hkt.mlflow_store import open_client

        open_client(self.run.tracking_uri)

    def run_inputs(self, task: str) -> list[str]:
        """A run's job (train, external) waits for its task's data. The first call of a run that
        executes jobs sets aside the records that do not load (``damaged``), so that Snakemake,
        which takes a job whose output exists as done, runs their jobs again (`hkt train`
        finishes the run from its last checkpoint). Here and not in onstart: Snakemake decides
        which jobs run before onstart, which it skips when nothing is left to do; and not when
        the workflow is read, which cannot tell a run from a dry run, --lint or --report, none
        of which may change it."""
        if self.run.damaged and self.executing() and not self._set_aside:
            self._set_aside_damaged()
        return self.run.grid.data_files(task)

    def executing(self) -> bool:
        """Whether this process runs jobs: not a dry run, a cluster job, nor `--report` or
        `--lint` (no executor). Known once Snakemake builds its DAG, not when it reads the
        workflow."""
        wf = self.workflow
        return wf.is_main_process and not wf.dryrun and wf.executor_plugin is not None

    def _set_aside_damaged(self) -> None:
        from hkt.run_record import set_aside_if_damaged

        try:
            for record, _ in self.run.damaged:
                set_aside_if_damaged(record)
        except OSError as exc:
            raise disk_error(exc)
        self._set_aside = True  # once per run

    def train_priority(self, job: Job) -> int:
        """Jobs resuming from a checkpoint start first, then the longest (their estimated seconds,
        from the plan: Plan.priority), so that the last long job does not run alone at the end;
        0 until the plan exists (a dry run times nothing)."""
        return self.run.train_priority(job, self.plan)

    def prepare_priority(self, task: str) -> int:
        """A task's data first where its training jobs are the longest (the plan's)."""
        return self.run.prepare_priority(task, self.plan)

    def succeeded(self) -> None:
        """onsuccess: the session ends, and the last lines (after Snakemake's `Elapsed time`, as
        the process exits) say where the summary is, how to build the report and how to open
        MLflow's UI."""
        end_session(self.run.results, ok=True)
        run = self.run
        lines = closing_lines(run.results, SUMMARY, run.report_command, run.tracking_uri)
        atexit.register(lambda: _say("\n".join(lines)))

    def failed(self) -> None:
        """onerror: the session ends; after a stop (`hkt stop`, Ctrl-C, SIGTERM) that failed no
        job, the run's last line says it is resumable, and how (hkt/suite/stop.py): printed as
        the process exits, after Snakemake's own closing lines. Snakemake's exit status (1: the
        suite is not complete) is kept."""
        end_session(self.run.results, ok=False)
        try:
            line = self.suite.resumable_line(self.run.results)
        except Exception as exc:  # a note on the way out, never a second error
            print(f"hkt: warning: could not tell whether this was a stop ({exc})", file=sys.stderr)
            return
        if line is not None:
            atexit.register(lambda: _say(line))
