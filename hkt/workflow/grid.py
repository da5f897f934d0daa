"""The workflow's job grid: which runs the workflow config asks for, where their files go, and the
arguments of each job's ``hkt`` command.

``workflow/rules/common.smk`` is a thin adapter over :class:`Grid`: every rule's inputs, outputs,
command words and resources come from here, so the grid is tested without Snakemake
(``tests/test_workflow_grid.py``). Pure Python and YAML, no torch and no Hydra, so that a dry run
stays fast; composing the training configs is :mod:`hkt.workflow.job_configs`.

An ablation is a variant file, ``config/variant/NAME.yaml``: the workflow's
``ablation.include`` lists variant names, and each job trains
``hkt train … model=M variant=NAME``, with M the model the file selects
(``override /model: M``). ``hkt train variant=NAME`` and the workflow therefore train the same
thing, and the run's variant label is the file's name.

A sweep is the other way round: its variant files select no model (a learning rate), and the
workflow's ``sweep`` trains each of ``sweep.variants`` with each of ``sweep.models``
(``hkt train … model=M variant=NAME`` for every M), on one task, without main-table runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import yaml

from hkt.baselines import BASELINES
from hkt.data_layout import MANIFEST, SPLITS, split_file
from hkt.data.taskfile import read_task_info, task_id_problem
from hkt.errors import GridError, did_you_mean, yaml_problem
from hkt.paper import ABLATION_TASK
from hkt.mlflow_store import experiment_name
from hkt.workflow.external import externals
from hkt.workflow.rule_resources import Placement
from hkt.workflow.node import Node

__all__ = ["MAIN", "LAYOUT", "Job", "GridError", "Grid", "RULE_ORDER", "suite_plan_file",
           "read_variant_model", "read_model_mixer"]

MAIN = "main"  # the variant (config/variant/main.yaml, and label) of the main-table runs
# Where each kind of file goes, relative to results_dir: the one statement of the layout.
LAYOUT = {
    "data": "data/{task}",
    "run": "runs/{task}/{model}/{variant}/seed{seed}",
    "analysis": "analysis/{task}/{model}/{variant}/seed{seed}",
}

JOB_LOG = "{task}/{model}/{variant}/seed{seed}"  # a per-run job's log, under logs/RULE/
# The rules with jobs, in the order a suite runs them (plan and status lay them out so).
RULE_ORDER = ("prepare", "train", "external", "analyze", "bench", "aggregate")
PLAN_FILE = "plan/suite.json"  # under results_dir: the plan the workflow writes at its start


def suite_plan_file(results_dir: str | Path) -> Path:
    """Where the workflow's plan of a results directory is (``hkt status`` reads it)."""
    return Path(results_dir) / PLAN_FILE


def read_yaml(path: Path) -> Any:
    """A config file read as plain YAML (safe: a Python tag constructs nothing); one that does
    not load is a :class:`GridError` naming its file and line (:func:`hkt.errors.yaml_problem`)."""
    try:
        with open(path, encoding="utf-8") as stream:  # a stream: PyYAML's marks name the file
            return yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise GridError(yaml_problem(exc)) from None


@lru_cache(maxsize=None)
def read_variant_model(path: Path) -> str | None:
    """The model a variant file selects by ``override /model: M``, or None (read as plain YAML,
    cached per path)."""
    cfg = read_yaml(path) or {}
    model = None
    for entry in cfg.get("defaults") or []:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if key.replace(" ", "") in ("override/model", "/model"):
                    model = str(value)
    return model


@lru_cache(maxsize=None)
def read_model_mixer(path: Path) -> str:
    """The token mixer a model file builds, the ``M`` of its ``/schema/model/M@_here_`` default
    (a copy of ``mha.yaml`` builds ``mha``); the file's name if it names none or is missing."""
    from hkt.config_compose import MODEL_SCHEMA_GROUP  # here: the grid is read without OmegaConf

    cfg = (read_yaml(path) or {}) if path.is_file() else {}
    prefix = f"/{MODEL_SCHEMA_GROUP}/"
    for entry in cfg.get("defaults") or []:
        if isinstance(entry, str) and entry.startswith(prefix):
            return entry.removeprefix(prefix).partition("@")[0]
    return path.stem


@dataclass(frozen=True)
class Job:
    """One run: a (task, model, variant, seed) cell of the grid; variant = variant file's name."""

    task: str
    model: str
    variant: str
    seed: int

    def wildcards(self) -> dict[str, Any]:
        return asdict(self)

    def run_dir(self) -> str:
        """Its run directory below ``runs/``: ``TASK/MODEL/VARIANT/seedS``."""
        return LAYOUT["run"].removeprefix("runs/").format(**self.wildcards())


class Grid(Placement):
    """The jobs, paths and command arguments of one workflow config.

    ``config`` is the merged workflow config (``config/config.yaml`` + ``--configfile`` +
    ``--config``), already checked by :func:`hkt.workflow.suites.check_config`; ``config_dir`` the Hydra config
    directory its names refer to. The constructor checks every name (task, model, profile,
    variant) and raises :class:`GridError` naming the key.
    """

    def __init__(self, config: Mapping[str, Any], config_dir: str | Path, *,
                 cpus: int | None = None):
        self.config = config
        self.config_dir = Path(config_dir)
        self.results = str(config["results_dir"]).rstrip("/") or "."
        self.profile = str(config["profile"])
        self.seeds = list(config["seeds"])
        self.tasks: Mapping[str, Any] = config["tasks"]
        self.node = Node.of(config.get("node") or {}, cpus=cpus)  # what jobs are clamped to
        self._main = config["main"]
        self._lra = config.get("lra") or {}
        self._ablation = config.get("ablation") or {}
        self._sweep = config.get("sweep") or {}
        self._analyze = config.get("analyze") or {}
        self.external = externals(config)  # the enabled external baselines, by name
        self._check()

    # --- what exists ----------------------------------------------------------------------------

    def _options(self, group: str) -> list[str]:
        return sorted(p.stem for p in (self.config_dir / group).glob("*.yaml"))

    @cached_property
    def models(self) -> list[str]:
        """Trainable models: ``config/model/*.yaml`` (external baselines are not among them)."""
        return [m for m in self._options("model") if m not in self.external]

    def task_config(self, task: str) -> str:
        """The Hydra task config (``config/task/NAME.yaml``) of a workflow task id."""
        return (self.tasks[task] or {}).get("config") or task

    def task_config_files(self, task: str) -> list[str]:
        """The task's Hydra file and the files of its group it builds on (its ``defaults``, e.g.
        listops_lra.yaml on listops.yaml): what ``hkt prepare`` reads, so an edit re-prepares."""
        files: list[str] = []
        todo = [self.task_config(task)]
        while todo:
            path = self.config_dir / "task" / f"{todo.pop()}.yaml"
            if str(path) in files:
                continue
            files.append(str(path))
            node = read_yaml(path) if path.is_file() else None
            todo += [d for d in (node or {}).get("defaults") or []
                     if isinstance(d, str) and d != "_self_" and not d.startswith("/")]
        return files

    def experiment(self, task: str) -> str:
        """The MLflow experiment of a workflow task's runs (hkt.mlflow_store.experiment_name of its
        budget and Hydra task config, as ``hkt train`` names it)."""
        return experiment_name(self.task_profile(task), self.task_config(task))

    def task_profile(self, task: str) -> str:
        """The budget of a task's runs: its own ``tasks.NAME.profile``, else the suite's (a CPU
        suite can train one task at the paper's budget and the others at a CPU budget)."""
        return str((self.tasks.get(task) or {}).get("profile") or self.profile)

    def task_info(self, task: str) -> tuple[str, int]:
        """The data family (a run record's ``task``) and sequence length, from its Hydra task file
        and those it builds on (listops_lra.yaml's family is listops.yaml's)."""
        return read_task_info(tuple(map(Path, self.task_config_files(task))), task)

    def variant_model(self, name: str) -> str | None:
        """The model a variant file selects (``override /model: M``), or None (the caller's)."""
        return read_variant_model(self.config_dir / "variant" / f"{name}.yaml")

    @property
    def ablation_task(self) -> str:
        return self._ablation.get("task", ABLATION_TASK)

    @property
    def ablation_enabled(self) -> bool:
        return bool(self._ablation.get("enabled"))

    @property
    def derived(self) -> dict[str, str]:
        """Ablations whose row the aggregate step derives from a model's main runs instead of
        training them (``ablation.derived``: variant -> model, e.g. levels1: mha)."""
        return {str(k): str(v) for k, v in (self._ablation.get("derived") or {}).items()}

    @property
    def sweep_enabled(self) -> bool:
        return bool(self._sweep.get("enabled"))

    def sweep_jobs(self) -> list[Job]:
        """The sweep's runs: every variant of ``sweep.variants`` with every model of
        ``sweep.models`` on ``sweep.task``, over ``sweep.seeds`` (null: the suite's seeds)."""
        if not self.sweep_enabled:
            return []
        task = self._sweep["task"]
        return [Job(task, m, v, s) for v in self._sweep["variants"]
                for m in self._sweep["models"] for s in self._sweep.get("seeds") or self.seeds]

    def _fail(self, msg: str) -> None:
        raise GridError(msg)

    def _check_task(self, task: str, where: str) -> None:
        if task not in self.tasks:
            self._fail(f"{where} names task '{task}', which is not under `tasks:` "
                       f"(defined: {', '.join(sorted(self.tasks))})" + did_you_mean(task, self.tasks))
        path = self.config_dir / "task" / f"{self.task_config(task)}.yaml"
        if not path.is_file():
            self._fail(f"task '{task}' uses Hydra task config '{self.task_config(task)}', but "
                       f"{path} does not exist")
        if problem := task_id_problem(path):
            self._fail(f"task '{task}': {problem}")

    def _check_model(self, model: str, where: str) -> None:
        if model not in self.models:
            self._fail(f"{where} names model '{model}', which has no config/model/{model}.yaml "
                       f"(models: {', '.join(self.models)}); add one (docs/extending.md, "
                       "recipe (a))" + did_you_mean(model, self.models))

    def _check_variant(self, name: str, where: str) -> None:
        path = self.config_dir / "variant" / f"{name}.yaml"
        if not path.is_file():
            self._fail(f"{where} names variant '{name}', which has no config/variant/"
                       f"{name}.yaml (variants: {', '.join(self._options('variant'))})"
                       + did_you_mean(name, self._options("variant")))
        if name != MAIN:
            model = read_variant_model(path)
            if model is None:
                self._fail(f"{where}: config/variant/{name}.yaml selects no model "
                           "(add `defaults: [{override /model: M}]`)")
            self._check_model(model, f"config/variant/{name}.yaml")

    def _check_sweep_variant(self, name: str) -> None:
        path = self.config_dir / "variant" / f"{name}.yaml"
        if not path.is_file():
            self._fail(f"sweep.variants names variant '{name}', which has no config/variant/"
                       f"{name}.yaml (variants: {', '.join(self._options('variant'))})"
                       + did_you_mean(name, self._options("variant")))
        model = read_variant_model(path)
        if model is not None:
            self._fail(f"sweep.variants: config/variant/{name}.yaml selects model '{model}'; a "
                       "sweep's variant applies to every model of sweep.models, so it selects "
                       "none (a one-model variant goes in ablation.include)")

    def _check(self) -> None:
        for name, where in ((self.profile, "profile"), *(
                (spec["profile"], f"tasks.{t}.profile") for t, spec in self.tasks.items()
                if (spec or {}).get("profile"))):
            if not (self.config_dir / "profile" / f"{name}.yaml").is_file():
                self._fail(f"{where}: profile '{name}' has no config/profile/{name}.yaml "
                           f"(profiles: {', '.join(self._options('profile'))})")
        for t in self._main["tasks"]:
            self._check_task(t, "main.tasks")
        if self.leaderboard and not (self.config_dir.parent / self.leaderboard).is_file():
            self._fail(f"leaderboard: {self.leaderboard} is not a file in the repository "
                       f"({self.config_dir.parent}); give the path of a file of published "
                       "figures, e.g. config/report/lra_listops.yaml")
        for name, ext in self.external.items():
            if name in self._options("model"):
                self._fail(f"external.{name}: the name is taken by config/model/{name}.yaml")
            ext.check(BASELINES.names() if ext.command is None else [])
            for t in ext.tasks or self._main["tasks"]:
                self._check_task(t, f"external.{name}.tasks")
        for m in self._main["models"]:
            self._check_model(m, "main.models")
        if self._lra.get("enabled"):
            for t in self._lra.get("tasks", []):
                self._check_task(t, "lra.tasks")
            for m in self._lra.get("models", []):
                self._check_model(m, "lra.models")
        if self._analyze.get("enabled"):
            for m in self.analyze_models:
                self._check_model(m, "analyze.models")
        self._check_variant(MAIN, "the main table")
        if self.ablation_enabled:
            self._check_task(self.ablation_task, "ablation.task")
            for name in self._ablation.get("include", []):
                self._check_variant(name, "ablation.include")
            for name, model in self.derived.items():
                self._check_variant(name, "ablation.derived")
                self._check_model(model, f"ablation.derived.{name}")
                if name in self._ablation.get("include", []):
                    self._fail(f"ablation.derived.{name}: '{name}' is also in ablation.include; "
                               "a variant is either trained (include) or derived, not both")
        if self.sweep_enabled:
            self._check_task(self._sweep["task"], "sweep.task")
            for m in self._sweep["models"]:
                self._check_model(m, "sweep.models")
            for name in self._sweep["variants"]:
                self._check_sweep_variant(name)

    # --- the jobs -------------------------------------------------------------------------------

    def train_jobs(self) -> list[Job]:
        """Every run ``hkt train`` makes, main table first, each once."""
        jobs = []
        grids = [(self._main["tasks"], self._main["models"])]
        if self._lra.get("enabled"):
            grids.append((self._lra.get("tasks", []), self._lra.get("models", [])))
        for tasks, models in grids:
            jobs += [Job(t, m, MAIN, s) for t in tasks for m in models for s in self.seeds]
        if self.ablation_enabled:
            t = self.ablation_task
            for s in self._ablation.get("seeds") or self.seeds:
                jobs += [Job(t, "hkt", MAIN, s), Job(t, "mha", MAIN, s)]  # the full models
                jobs += [Job(t, m, MAIN, s) for m in self.derived.values()]  # what rows derive from
                jobs += [Job(t, self.variant_model(v) or "", v, s)
                         for v in self._ablation.get("include", [])]
        jobs += self.sweep_jobs()
        return list(dict.fromkeys(jobs))

    def external_jobs(self) -> list[Job]:
        """Every record the external baselines write (the rule `external`)."""
        return [Job(t, name, MAIN, s) for name, ext in self.external.items()
                for t in ext.tasks or self._main["tasks"] for s in ext.seeds]

    @property
    def writes_predictions(self) -> bool:
        """Whether a job of the suite writes ``predictions.parquet`` (every training run, every
        baseline of ours; an external program need not): then the aggregate writes the
        per-example readings (:mod:`hkt.report.example_runs`), and the workflow declares them."""
        return bool(self.train_jobs()) or any(
            ext.command is None for name, ext in self.external.items()
            if any(j.model == name for j in self.external_jobs()))

    def analysis_jobs(self) -> list[Job]:
        """The trained runs ``hkt analyze`` analyses."""
        if not self._analyze.get("enabled"):
            return []
        variants = self._analyze.get("variants")
        return [j for j in self.train_jobs()
                if j.model in self.analyze_models and (variants is None or j.variant in variants)]

    @property
    def analyze_models(self) -> list[str]:
        """The models whose runs ``hkt analyze`` analyses (``analyze.models``)."""
        return list(self._analyze.get("models", ["hkt", "mha"]))

    # --- paths ----------------------------------------------------------------------------------

    def pattern(self, kind: str, name: str = "") -> str:
        """A path pattern with Snakemake wildcards, e.g. ``pattern("run", "record.json")``."""
        return "/".join(p for p in (self.results, LAYOUT[kind], name) if p)

    def path(self, kind: str, name: str = "", **wildcards: Any) -> str:
        return self.pattern(kind, name).format(**wildcards)

    def log(self, rule: str, pattern: str) -> str:
        """A rule's log file pattern: ``logs/RULE/PATTERN.log``."""
        return f"{self.results}/logs/{rule}/{pattern}.log"

    def job_log(self, rule: str, job: Job | None = None) -> str:
        """The log of a per-run rule (train, external, analyze): its pattern, or ``job``'s file."""
        pattern = self.log(rule, JOB_LOG)
        return pattern if job is None else pattern.format(**job.wildcards())

    def data_files(self, task: str) -> list[str]:
        return [*(self.path("data", split_file(s), task=task) for s in SPLITS),
                self.path("data", MANIFEST, task=task)]

    def record(self, job: Job) -> str:
        return self.path("run", "record.json", **job.wildcards())

    def records(self) -> list[str]:
        return [self.record(j) for j in self.train_jobs() + self.external_jobs()]

    def analysis_file(self, job: Job) -> str:
        return self.path("analysis", "analysis.parquet", **job.wildcards())

    def analyses(self) -> list[str]:
        return [self.analysis_file(j) for j in self.analysis_jobs()]

    # --- command arguments ----------------------------------------------------------------------

    def train_overrides(self, job: Job) -> list[str]:
        """The Hydra overrides of the job's ``hkt train`` (the workflow's train_overrides last)."""
        return [f"task={self.task_config(job.task)}", f"model={job.model}",
                f"profile={self.task_profile(job.task)}", f"seed={job.seed}",
                f"variant={job.variant}", *self.config.get("train_overrides", [])]

    def prepare_args(self, task: str) -> list[str]:
        """``hkt prepare`` arguments after ``--out``: task config, overrides, ``--source``."""
        spec = self.tasks[task] or {}
        args = [self.task_config(task), *spec.get("prepare", [])]
        if spec.get("source"):
            args += ["--source", str(Path(spec["source"]).resolve())]
        if self.config.get("data_mirror"):
            args.append(f"prepare.mirror={Path(self.config['data_mirror']).resolve()}")
        return args

    def external_command(self, job: Job, tracking_uri: str) -> str:
        """The shell command of an external baseline's job: its entry's ``command`` (or
        ``hkt baseline NAME``) with the job's values (:mod:`hkt.workflow.external`)."""
        ext = self.external[job.model]
        return ext.shell({
            "data": self.path("data", task=job.task), "out": self.path("run", **job.wildcards()),
            "log": self.job_log("external", job), "task": job.task, "model": job.model,
            "variant": job.variant, "seed": job.seed, "profile": self.task_profile(job.task),
            "experiment": self.experiment(job.task), "tracking_uri": tracking_uri,
            "options": ext.option_words()})

    def ablation_args(self) -> list[str]:
        """``hkt aggregate`` arguments that name the ablation table's task and length."""
        task = self.ablation_task
        derived = [f"--derived={name}={model}" for name, model in self.derived.items()]
        if task not in self.tasks:
            return ["--ablation-task", task, *derived]
        family, length = self.task_info(task)
        return ["--ablation-task", family, "--ablation-length", str(length), *derived]

    def borrow_args(self) -> list[str]:
        """``hkt aggregate --borrow`` for each path of the sweep's borrowed runs (``sweep.borrow``:
        one path or a list; records of another publication read beside the suite's own), when it
        has any."""
        borrow = self._sweep.get("borrow") if self.sweep_enabled else None
        paths = [borrow] if isinstance(borrow, str) else list(borrow or [])
        return [word for path in paths for word in ("--borrow", str(path))]

    @property
    def leaderboard(self) -> str | None:
        """The suite's file of published figures (``leaderboard``: a path in the repository),
        read against its rule references (``hkt aggregate --leaderboard``), or None."""
        path = self.config.get("leaderboard")
        return str(path) if path else None

    def leaderboard_args(self) -> list[str]:
        """``hkt aggregate --leaderboard PATH`` when the suite has a leaderboard file."""
        return ["--leaderboard", self.leaderboard] if self.leaderboard else []

    def analyze_args(self) -> list[str]:
        return [str(a) for a in self._analyze.get("args", [])]

    def bench_args(self) -> list[str]:
        return [str(a) for a in (self.config.get("bench") or {}).get("args", [])]

    @property
    def bench_enabled(self) -> bool:
        return bool((self.config.get("bench") or {}).get("enabled", True))
