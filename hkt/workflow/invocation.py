"""One Snakemake invocation of the workflow: what reading the Snakefile finds, made once and
changing nothing.

:func:`read_invocation` is the one call ``workflow/rules/common.smk`` makes when Snakemake reads
the workflow (a run, a dry run, ``--lint``, ``--report``, a cluster job): it chooses the suite
(:func:`hkt.workflow.suites.workflow_suite`), composes and checks every training config
(:mod:`hkt.workflow.job_configs`: their digests are the training jobs' rerun triggers), and finds the
run records that do not load, and returns a frozen :class:`Invocation` holding what the rules
read. It writes nothing, claims nothing and sets no environment variable, so ``snakemake -n``
run any number of times leaves the results directory as it was (or absent).

What changes the world happens when jobs are about to run, in the workflow's ``onstart``
(:mod:`hkt.workflow.handlers`): the environment the jobs inherit (:attr:`Invocation.env`), the
results directory's lock, the MLflow store, the calibrated plan (written for ``hkt status`` and
printed) and the session record. A cluster job, which runs no ``onstart``, takes the
environment when it reads the workflow (:func:`apply_env`). One thing cannot wait for
``onstart``: a damaged record is set aside while a run builds its DAG (Snakemake chooses the
jobs to run before ``onstart``), by the rules' input function
(:meth:`hkt.workflow.handlers.Handlers.run_inputs`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hkt.errors import ConfigError
from hkt.mlflow_store import tracking_uri
from hkt.run_record import DAMAGED_NAME, RecordError, load_record
from hkt.workflow.job_configs import check_analysable, seedless, train_config_digests
from hkt.gpu_slots import ENV_VAR as SLOTS_ENV, RESOURCE as GPU_SLOTS
from hkt.workflow.grid import Grid, Job
from hkt.workflow.next_steps import REPORT_COMMAND_ENV, published_form, report_command
from hkt.workflow.suites import Suite, cuda_available, interpreter_first, workflow_suite

__all__ = ["Invocation", "read_invocation", "damaged_records", "damage_warning", "apply_env",
           "ENV_PASSED", "GPU_SLOTS"]

#: The variables a cluster node's job receives from the login node (Snakemake's envvars).
ENV_PASSED = ("HKT_SUITE", "HKT_CONFIG_DIR", "HKT_RESULTS_DIR", "MLFLOW_TRACKING_URI")


@dataclass(frozen=True, eq=False)
class Invocation:
    """What one reading of the workflow found: made by :func:`read_invocation`, never changed."""

    suite: Suite
    config_dir: Path          # the repository's config/ (every job's $HKT_CONFIG_DIR)
    tracking_uri: str         # the store every job logs to (hkt.mlflow_store.tracking_uri)
    main: bool                # the process that runs the workflow (not a cluster node's job)
    local_gpu_slots: bool     # local jobs share the GPUs through $HKT_GPU_SLOTS
    report_command: str | None  # the command that builds the report (the main process's)
    #: each seedless training override set's config digest (the main process composes all)
    digests: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    #: the run records that exist but do not load, and why: their jobs run again
    damaged: tuple[tuple[str, str], ...] = ()

    @property
    def grid(self) -> Grid:
        return self.suite.grid

    @property
    def results(self) -> str:
        """``results_dir`` as given: relative to the working directory."""
        return self.grid.results

    @property
    def env(self) -> dict[str, str]:
        """The environment every job inherits: the suite (the one channel), the config
        directory, the results directory, the store, the GPU slots of local jobs, the report
        command (``hkt aggregate`` prints it in summary.md, a file that may be published: in
        :func:`published_form`) and ``hkt`` first on PATH."""
        env = {**self.suite.env, "HKT_CONFIG_DIR": str(self.config_dir),
               "HKT_RESULTS_DIR": str(Path(self.results).resolve()),
               "MLFLOW_TRACKING_URI": self.tracking_uri,
               "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
               "PATH": interpreter_first(os.environ.get("PATH", ""))}
        if self.report_command is not None:
            env[REPORT_COMMAND_ENV] = published_form(self.report_command)
        slots = self.grid.gpu_env() if self.local_gpu_slots else None
        if slots is not None:
            env[SLOTS_ENV] = slots
        return env

    @property
    def gpu_slots_total(self) -> int | None:
        """The GPU slots Snakemake counts for local jobs (GPUs x jobs_per_gpu); None when no
        local job shares a GPU."""
        if not self.local_gpu_slots or self.grid.gpu_env() is None:
            return None
        return self.grid.gpu_layout().total

    def resources(self, rule: str) -> dict[str, int]:
        """``resources.RULE`` of the config without threads (the one place resources are set),
        and the GPU slots a local job takes."""
        res = {k: v for k, v in self.grid.resources(rule).items() if k != "threads"}
        slots = self.grid.gpu_slots(rule) if self.local_gpu_slots else None
        if slots is not None:
            res[GPU_SLOTS] = slots.take
        return res

    def threads(self, rule: str) -> int:
        return self.grid.resources(rule)["threads"]

    def train_digest(self, job: Job) -> str:
        """The digest of a training job's composed config: its rerun trigger. A cluster job's
        process composes only its own."""
        key = seedless(self.grid.train_overrides(job))
        found = self.digests.get(key)
        return found if found is not None else _digest(key, self.config_dir)

    def train_priority(self, job: Job, plan: Any) -> int:
        """A training job's priority: the plan's (jobs resuming from a checkpoint first, then the
        longest); 0 without a plan (a dry run: nothing is timed)."""
        return plan.priority(self.grid.record(job)) if plan is not None else 0

    def prepare_priority(self, task: str, plan: Any) -> int:
        """A task's data first where its training jobs are the longest (the plan's)."""
        if plan is None:
            return 0
        return plan.data_priority([self.grid.record(j) for j in self.grid.train_jobs()
                                   if j.task == task])


@contextmanager
def _composing_in(config_dir: Path) -> Iterator[None]:
    """Compose from ``config_dir`` (the jobs' ``$HKT_CONFIG_DIR``), this process's environment
    as it was afterwards: the configs checked are the ones the jobs will compose."""
    before = os.environ.get("HKT_CONFIG_DIR")
    os.environ["HKT_CONFIG_DIR"] = str(config_dir)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HKT_CONFIG_DIR", None)
        else:
            os.environ["HKT_CONFIG_DIR"] = before


def _digests(keys: Sequence[Sequence[str]], config_dir: Path) -> dict[tuple[str, ...], str]:
    try:
        with _composing_in(config_dir):
            return train_config_digests(keys)
    except ConfigError as exc:
        raise ConfigError(f"training config: {exc}") from None


@lru_cache(maxsize=None)  # a job's params are read more than once
def _digest(key: tuple[str, ...], config_dir: Path) -> str:
    return _digests([key], config_dir)[key]


def damaged_records(records: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The run records among ``records`` that exist but do not load (cut short by a copy, edited
    by hand, holding a NaN), each with what is wrong; read only: the run sets them aside
    (:meth:`hkt.workflow.handlers.Handlers.run_inputs`)."""
    found = []
    for record in records:
        if not Path(record).is_file():
            continue
        try:
            load_record(record)
        except RecordError as exc:
            found.append((record, exc.problem))
    return tuple(found)


def damage_warning(record: str, problem: str) -> str:
    """The line that names a damaged record when the workflow is read (a dry run too, which
    changes nothing and so lists its job as done; a run sets the record aside as it builds its
    DAG, so that the job runs again: :mod:`hkt.workflow.handlers`)."""
    return (f"hkt: warning: {record} does not load ({problem}); a run sets it aside as "
            f"{DAMAGED_NAME} and runs its job again (hkt train finishes the run from its last "
            "checkpoint); a dry run leaves it, and lists its job as done")


def read_invocation(config: Mapping[str, Any], config_dir: str | Path, *, main: bool,
                    overrides: Mapping[str, Any] | None = None,
                    configfiles: Sequence[str | Path] = (),
                    command_line: Mapping[str, Any] | None = None,
                    nodes: int | None = None,
                    snakefile: str | Path = "workflow/Snakefile",
                    cuda: Callable[[], bool] = cuda_available) -> Invocation:
    """The :class:`Invocation` of a Snakemake reading of the workflow; writes nothing.

    ``config`` is ``config.yaml`` with the ``--configfile`` files and ``--config`` keys merged,
    ``overrides`` Snakemake's ``overwrite_config``, ``command_line`` what ``--config`` alone gave
    (see :func:`~hkt.workflow.suites.workflow_suite`); ``main`` whether this process runs the
    workflow (not a cluster node's job) and ``nodes`` Snakemake's ``--jobs``, which a cluster
    executor requires: Snakemake reads the workflow before it has an executor, so whether jobs
    run elsewhere is known only at :func:`hkt.workflow.handlers.start`.

    The main process composes every training config once (the configs of the suite, checked
    before any job runs) and lists the records that do not load. Raises :class:`ConfigError`
    (one line, naming the key) for a suite, config or training override that cannot run."""
    cdir = Path(config_dir)
    try:
        suite = workflow_suite(config, cdir, overrides=overrides or {}, files=bool(configfiles),
                               command_line=command_line, cuda=cuda)
    except ConfigError as exc:  # often a suite's name mistyped
        raise ConfigError(f"workflow config (config/config.yaml + --configfile/--config): {exc}") \
            from None
    grid = suite.grid
    uri = tracking_uri(suite.config.get("tracking_uri"), grid.results)
    digests: dict[tuple[str, ...], str] = {}
    damaged: tuple[tuple[str, str], ...] = ()
    report = None
    if main:  # a cluster job composes only its own config (Invocation.train_digest)
        digests = _digests([grid.train_overrides(j) for j in grid.train_jobs()], cdir.resolve())
        try:
            with _composing_in(cdir.resolve()):
                check_analysable(grid.analyze_models if grid.analysis_jobs() else [])
        except ConfigError as exc:
            raise ConfigError(f"workflow config: {exc}") from None
        damaged = damaged_records(grid.records())
        report = report_command(grid.results, suite=suite.name, snakefile=snakefile,
                                configfiles=list(configfiles), config=command_line)
    return Invocation(suite=suite, config_dir=cdir.resolve(), tracking_uri=uri, main=main,
                      local_gpu_slots=main and nodes is None,
                      report_command=report, digests=digests, damaged=damaged)


def apply_env(inv: Invocation) -> None:
    """Give this process the environment its jobs inherit (:attr:`Invocation.env`); the main
    process first drops an older ``$HKT_GPU_SLOTS``, so the jobs get this run's choice only."""
    if inv.main:
        os.environ.pop(SLOTS_ENV, None)
    os.environ.update(inv.env)
