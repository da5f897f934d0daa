# Shared definitions: a thin adapter over hkt.workflow.grid (the jobs, paths, command arguments
# and resources of the config; tested in tests/test_workflow_grid.py), and the check of every
# training config before any job runs (hkt.workflow.job_configs).

import os
from functools import lru_cache

from snakemake.exceptions import WorkflowError

from hkt.errors import ConfigError, HKTError
from hkt.report.aggregate_outputs import MLFLOW_CHECK, RUNS_TABLE, SUMMARY, products
from hkt.mlflow_store import tracking_uri
from hkt.run_record import DAMAGED_NAME, set_aside_if_damaged
from hkt.workflow.job_configs import check_analysable, seedless, train_config_digests
from hkt.gpu_slots import ENV_VAR as SLOTS_ENV, RESOURCE as GPU_SLOTS
from hkt.workflow.grid import MAIN, Job
from hkt.workflow.next_steps import REPORT_COMMAND_ENV, closing_lines, report_command
from hkt.workflow.suites import put_interpreter_first, workflow_suite

# The suite, made once (hkt.workflow.suites): `suite: auto` (config.yaml's default) is the paper
# suite with CUDA, else the CPU suite; the command line's --configfile/--config keys still win.
# Its Grid (GRID) is the one this process builds: every rule and the plan read it.
try:
    SUITE = workflow_suite(
        config, CONFIG_DIR, overrides=workflow.config_settings.overwrite_config,
        files=bool(workflow.config_settings.configfiles),
        command_line=workflow.config_settings.config)
except ConfigError as exc:  # one line, not a traceback: often a suite's name mistyped
    print(f"hkt: error: workflow config (config/config.yaml + --configfile/--config): {exc}",
          file=sys.stderr, flush=True)
    sys.exit(1)
config.clear()
config.update(SUITE.config)
GRID = SUITE.grid
# Its jobs' suite, by the one channel ($HKT_SUITE: a cluster node's job and an external command
# inherit it); a cluster job re-reads the Snakefile, and auto then chooses the same suite.
os.environ.update(SUITE.env)
if workflow.is_main_process:
    print(f"hkt: suite {SUITE.name} ({SUITE.reason}), profile {GRID.profile}, "
          f"results in {GRID.results}/", file=sys.stderr)

R = GRID.results  # as given: relative to the working directory

# A run record that does not load (cut short by a copy, edited by hand, holding a NaN) would
# count as done: Snakemake checks only that a job's output exists. It is set aside
# (RUN/record.json.damaged) before the DAG is built, so its job runs again: `hkt train` finishes
# the run from its last checkpoint (an external baseline runs again). A dry run does so too.
if workflow.is_main_process:
    for _record in GRID.records():
        _problem = set_aside_if_damaged(_record)
        if _problem is not None:
            print(f"hkt: warning: {_record} does not load ({_problem}); set aside as "
                  f"{DAMAGED_NAME}: its job runs again (hkt train finishes the run from its last "
                  "checkpoint)", file=sys.stderr)
PY = sys.executable  # the Python that runs Snakemake (has hkt installed)
CONDA_ENV = str(REPO / "environment.yml")  # the rules' software (with --use-conda)

TRACKING_URI = tracking_uri(config.get("tracking_uri"), R)  # hkt.mlflow_store: the one rule

# Every job runs with the repository's config/ and MLflow writing under results_dir (or the
# server); jobs inherit the environment, on a cluster too (envvars: below).
os.environ.update(HKT_CONFIG_DIR=str(CONFIG_DIR), HKT_RESULTS_DIR=str(Path(R).resolve()),
                  MLFLOW_TRACKING_URI=TRACKING_URI, MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false")
put_interpreter_first()  # rules call `hkt`: the one beside this Python, venv activated or not
# The command that builds this suite's report, as it works here (hkt/workflow/next_steps.py):
# summary.md prints it (`hkt aggregate` reads it from the environment), the last lines repeat it.
if workflow.is_main_process:
    os.environ[REPORT_COMMAND_ENV] = report_command(
        R, suite=SUITE.name, snakefile=workflow.main_snakefile,
        configfiles=workflow.config_settings.configfiles, config=workflow.config_settings.config)

# GPUs shared by local jobs (hkt/gpu_slots.py): Snakemake counts the slots (a global
# resource, GPUs x jobs_per_gpu, unless --resources gives it) and `hkt` claims its job's GPU,
# told where the slots are by $HKT_GPU_SLOTS (an environment variable, so that the rules' shell
# text and params, rerun triggers, stay as they were). Not on a cluster, whose jobs get GPUs of
# their own (resources.RULE.gpu); a cluster executor's dry run runs locally but has --jobs
# (Snakemake's "nodes"), which a local run has not.
LOCAL_GPU_SLOTS = (workflow.is_main_process and not workflow.non_local_exec
                   and workflow.resource_settings.nodes is None)
if workflow.is_main_process:
    os.environ.pop(SLOTS_ENV, None)  # the jobs inherit this process's choice, nothing older
if LOCAL_GPU_SLOTS and GRID.gpu_env() is not None:
    os.environ[SLOTS_ENV] = GRID.gpu_env()
    if GPU_SLOTS not in workflow.global_resources:
        workflow.register_resource(GPU_SLOTS, GRID.gpu_layout().total)


envvars:
    "HKT_SUITE",
    "HKT_CONFIG_DIR",
    "HKT_RESULTS_DIR",
    "MLFLOW_TRACKING_URI",


def disk_error(exc):
    """A full disk or a read-only file system met at the workflow's start (the lock, the store,
    the plan and its calibration cache, plan/sessions.json): the one line `hkt` prints for
    every such error (hkt.cli.main.describe_os_error), as a WorkflowError, which stops the workflow
    without a traceback."""
    from hkt.cli.main import describe_os_error

    return WorkflowError(f"hkt: error: {describe_os_error(exc)}")


PLAN_ERRORS = []  # what stopped suite_plan(), for onstart to report in one line


def print_plan(calibrate):
    """The suite's plan (hkt/suite/plan.py): its job counts when the workflow is read (a dry run too,
    without timing anything), the full plan with its ETA when jobs are about to start."""
    from hkt.suite.plan import workflow_plan

    plan = suite_plan() if calibrate else None
    if calibrate and PLAN_ERRORS:
        raise PLAN_ERRORS[0]
    try:
        print(workflow_plan(SUITE, plan=plan), file=sys.stderr, flush=True)
    except OSError as exc:  # writing plan/suite.json
        raise disk_error(exc)
    if LOCAL_GPU_SLOTS and GRID.gpu_packing():
        print(f"hkt: {GRID.gpu_packing(workflow.cores)}", file=sys.stderr, flush=True)


@lru_cache(maxsize=None)
def suite_plan():
    """The suite's plan, calibrated once per workflow (cached timings, else a short fresh one):
    the training jobs' priorities and the plan printed at start. The results directory is
    claimed and the store opened first, so that nothing is timed for a workflow that cannot run;
    None when either fails (onstart then stops the workflow with their one-line error), or the
    calibration cannot write its cache (PLAN_ERRORS: onstart says so in one line). Never
    raises: it runs while Snakemake builds the DAG (the jobs' priorities), where an error is a
    traceback."""
    from hkt.suite.plan import calibrated_plan

    try:
        claim_results()
        init_tracking_store()
    except WorkflowError:
        return None
    try:
        return calibrated_plan(SUITE)
    except OSError as exc:
        PLAN_ERRORS.append(disk_error(exc))
        return None


def executing():
    """Whether this process runs jobs: not a dry run, a cluster job, nor `--report` or `--lint`
    (no executor), which must neither time anything nor write into a results directory."""
    return (workflow.is_main_process and not workflow.dryrun
            and workflow.executor_plugin is not None)


def train_priority(wc):
    """Jobs resuming from a checkpoint start first, then the longest (their estimated seconds,
    from the plan: Plan.priority), so that the last long job does not run alone at the end;
    none on a dry run (nothing is timed)."""
    if not executing():
        return 0
    plan = suite_plan()
    return plan.priority(GRID.record(job(wc))) if plan is not None else 0


def prepare_priority(wc):
    """A task's data first where its training jobs are the longest (the plan's), so that the
    longest job does not wait on another task's download; none on a dry run."""
    if not executing():
        return 0
    plan = suite_plan()
    records = [GRID.record(j) for j in GRID.train_jobs() if j.task == wc.task]
    return plan.data_priority(records) if plan is not None else 0


if workflow.is_main_process:
    print_plan(calibrate=False)
    if workflow.non_local_exec:  # a cluster: jobs run on other nodes than this one
        try:
            GRID.check_cluster_node()
        except ConfigError as exc:
            raise WorkflowError(f"workflow config: {exc}")
    for _clamp in GRID.clamps():
        print(f"hkt: {_clamp}", file=sys.stderr)


@lru_cache(maxsize=None)  # once: the lock is held by this process until it exits
def claim_results():
    """Refuse to start when another running workflow (another checkout) uses results_dir."""
    from hkt.workflow.results_lock import claim_results_dir

    try:
        claim_results_dir(R, REPO)
    except HKTError as exc:
        raise WorkflowError(f"hkt: error: {exc}")
    except OSError as exc:
        raise disk_error(exc)


def start_session():
    """Record this run of the workflow in the results directory (hkt/workflow/sessions.py), so
    that `hkt status` measures the suite's wall time over its interruptions: from Snakemake's
    start, the span of its `Elapsed time`, against the time already spent before the first job
    (reading the workflow, checking every config, opening the store, the calibration: measured)
    plus the plan's. One line says that whole estimate."""
    import time

    from hkt.suite.status import settings
    from hkt.workflow.sessions import duration, start_session as start

    plan = suite_plan()
    began = getattr(workflow, "start_time", None)  # Snakemake's start (a local datetime)
    started = began.timestamp() if began is not None else time.time()
    before = max(0.0, time.time() - started)
    jobs = plan.wall_seconds if plan is not None else 0.0
    try:
        start(R, estimate_s=before + jobs, started=started,
              heartbeat_s=float(settings([])["heartbeat_s"]), cluster=bool(workflow.non_local_exec))
    except OSError as exc:  # writing plan/sessions.json
        raise disk_error(exc)
    if plan is not None:
        print(f"hkt: from Snakemake's start, as its `Elapsed time` and `hkt status` count: about "
              f"{duration(before + jobs)} ({before:.0f} s before the first job: reading the workflow, "
              f"checking every config, the calibration; then the jobs)", file=sys.stderr, flush=True)


def end_session(ok):
    from hkt.workflow.sessions import end_session as end

    end(R, ok=ok)


def say_complete():
    """After a suite completes, its last lines (after Snakemake's `Elapsed time`, as the process
    exits) say where the summary is, how to build the report and how to open MLflow's UI."""
    import atexit

    lines = closing_lines(R, SUMMARY, os.environ[REPORT_COMMAND_ENV], TRACKING_URI)
    atexit.register(lambda: print("\n".join(lines), file=sys.stderr, flush=True))


def say_if_stopped():
    """After a stop (`hkt stop`, Ctrl-C, SIGTERM) that failed no job, the run's last line says
    it is resumable, and how (hkt/suite/stop.py): printed as the process exits, after Snakemake's own
    closing lines. Snakemake's exit status (1: the suite is not complete) is kept."""
    import atexit

    from hkt.suite.stop import resumable_line

    try:
        line = resumable_line(R)
    except Exception as exc:  # a note on the way out, never a second error
        print(f"hkt: warning: could not tell whether this was a stop ({exc})", file=sys.stderr)
        return
    if line is not None:
        atexit.register(lambda: print(line, file=sys.stderr, flush=True))


@lru_cache(maxsize=None)
def init_tracking_store():
    """Open (and if new, create) the MLflow store once, under the lock `hkt` takes for it,
    before parallel jobs start: a broken store stops the workflow here with one line."""
    from hkt.mlflow_store import open_client

    try:
        open_client(TRACKING_URI)
    except HKTError as exc:
        raise WorkflowError(f"hkt: error: {exc}")
    except OSError as exc:  # a full disk (hkt.mlflow_store.full_disk)
        raise disk_error(exc)


def job(wc):
    """The grid job of a rule's wildcards."""
    return Job(wc.task, wc.model, wc.variant, int(wc.seed))


def resources(rule_name):
    """``resources.RULE`` of the config without threads (the one place resources are set), and
    the GPU slots a local job takes."""
    res = {k: v for k, v in GRID.resources(rule_name).items() if k != "threads"}
    slots = GRID.gpu_slots(rule_name) if LOCAL_GPU_SLOTS else None
    if slots is not None:
        res[GPU_SLOTS] = slots.take
    return res


def threads(rule_name):
    return GRID.resources(rule_name)["threads"]


# --- the rules' parameters (the rules stay a few lines: input, output, log, one command) ---------


def train_params():
    """`hkt train`'s arguments, and the composed config's digest: the rerun trigger. The suite is
    one too (a record names its suite), though the job learns it from $HKT_SUITE."""
    return dict(data=lambda wc: data_dir(wc.task),
                out=lambda wc: GRID.path("run", **job(wc).wildcards()),
                overrides=lambda wc: list(GRID.train_overrides(job(wc))),
                suite=SUITE.name,
                config_digest=lambda wc: train_digest(job(wc)))


def analyze_params():
    return dict(run=lambda wc: GRID.path("run", **job(wc).wildcards()),
                out=lambda wc: GRID.path("analysis", **job(wc).wildcards()),
                args=GRID.analyze_args())


def external_params():
    """An external baseline job's command (its entry's, or `hkt baseline NAME`, filled in: the
    rerun trigger), the MLflow experiment of the task's trained runs, and the suite: a rerun
    trigger only (a record names its suite), the command reads it from $HKT_SUITE."""
    return dict(command=lambda wc: GRID.external_command(job(wc), TRACKING_URI),
                experiment=lambda wc: GRID.experiment(wc.task), suite=SUITE.name)


def aggregate_inputs():
    return dict(records=GRID.records(), analyses=GRID.analyses(),
                bench=[f"{R}/bench/attention.csv"] if GRID.bench_enabled else [],
                # a derived row's setting is read from its variant file
                derived=[str(CONFIG_DIR / "variant" / f"{name}.yaml") for name in GRID.derived],
                leaderboard=[GRID.leaderboard] if GRID.leaderboard else [],  # published figures
                audit=declared(MLFLOW_CHECK)[0])  # first: the summary and the suite run include it


def bench_after():
    """What the benchmark waits for: every run record, analysis and the MLflow audit."""
    return [*GRID.records(), *GRID.analyses(), *(str(f) for f in MLFLOW_CHECK.files(R))]


def aggregate_params():
    return dict(out=lambda wc, output: Path(output.summary).parent, main=MAIN, suite=SUITE.name,
                ablation=GRID.ablation_args(), reference=GRID.sweep_reference_args(),
                leaderboard=lambda wc, input: (["--leaderboard", *input.leaderboard]
                                               if input.leaderboard else []),
                tracking_uri=TRACKING_URI,
                analyses=lambda wc, input: ["--analyses", *input.analyses] if input.analyses else [],
                bench=lambda wc, input: ["--bench", *input.bench] if input.bench else [])


def data_dir(task):
    return GRID.path("data", task=task)


# --- every training config, composed and validated before any job runs ---------------------------

TRAIN_DIGESTS = {}


def _check_train_configs(jobs):
    try:
        TRAIN_DIGESTS.update(train_config_digests(GRID.train_overrides(j) for j in jobs))
    except ConfigError as exc:
        raise WorkflowError(f"training config: {exc}")


if workflow.is_main_process:  # a cluster job composes only its own config (train_digest)
    _check_train_configs(GRID.train_jobs())
    try:
        check_analysable(GRID.analyze_models if GRID.analysis_jobs() else [])
    except ConfigError as exc:
        raise WorkflowError(f"workflow config: {exc}")


@lru_cache(maxsize=None)
def train_digest(j):
    """The digest of a job's composed config: its rerun trigger (a param)."""
    key = seedless(GRID.train_overrides(j))
    if key not in TRAIN_DIGESTS:
        _check_train_configs([j])
    return TRAIN_DIGESTS[key]


# --- the tables and figures (`snakemake --report` captions in workflow/report/) ----------------------

CAPTIONS = REPO / "workflow" / "report"  # absolute: these are called from several .smk files


def declared(product):
    """A product's files (hkt.report.aggregate_outputs); the first carries its report caption."""
    first, *rest = (str(f) for f in product.files(R))
    return [report(first, category=product.category,
                   caption=str(CAPTIONS / f"{product.caption}.rst")), *rest]


def aggregate_outputs():
    """Exactly what `hkt aggregate` writes for this suite (one list: hkt.report.aggregate_outputs)."""
    out = [f for p in products(analyses=bool(GRID.analyses()), leaderboard=bool(GRID.leaderboard),
                               predictions=GRID.writes_predictions)
           for f in declared(p)]
    return [*out, declared(RUNS_TABLE)[0]]


def mlflow_check_outputs():
    return declared(MLFLOW_CHECK)


def final_outputs():
    return [*aggregate_outputs(), f"{R}/{SUMMARY}", *mlflow_check_outputs(), *GRID.analyses()]
