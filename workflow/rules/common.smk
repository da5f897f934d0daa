# Shared definitions: a thin adapter over hkt.workflow.invocation. Reading the workflow makes one
# frozen Invocation (the suite, its grid, every training config checked, the records that do not
# load) and changes nothing: a dry run, --lint and --report write nothing, claim nothing and set no
# environment variable. What starts the jobs (their environment, the results directory's lock,
# the MLflow store, the calibrated plan, the session) is onstart's: start() below.

import sys
from functools import lru_cache

from snakemake.exceptions import WorkflowError

from hkt.errors import ConfigError, HKTError
from hkt.report.aggregate_outputs import MLFLOW_CHECK, RUNS_TABLE, SUMMARY, products
from hkt.workflow.grid import MAIN, Job
from hkt.workflow.invocation import (ENV_PASSED, GPU_SLOTS, apply_env, damage_warning,
                                     read_invocation)
from hkt.workflow.next_steps import closing_lines

try:
    RUN = read_invocation(
        config, CONFIG_DIR, main=workflow.is_main_process,
        overrides=workflow.config_settings.overwrite_config,
        configfiles=workflow.config_settings.configfiles,
        command_line=workflow.config_settings.config,
        nodes=workflow.resource_settings.nodes,
        snakefile=workflow.main_snakefile)
except ConfigError as exc:  # one line, not a traceback: often a suite's name mistyped
    print(f"hkt: error: {exc}", file=sys.stderr, flush=True)
    sys.exit(1)
SUITE, GRID = RUN.suite, RUN.grid
config.clear()  # the workflow's `config` is its suite's merged config
config.update(SUITE.config)
R = RUN.results  # as given: relative to the working directory
TRACKING_URI = RUN.tracking_uri
PY = sys.executable  # the Python that runs Snakemake (has hkt installed)
CONDA_ENV = str(REPO / "environment.yml")  # the rules' software (with --use-conda)

if workflow.is_main_process:  # what was read, before Snakemake's DAG (a dry run too)
    print(f"hkt: suite {SUITE.name} ({SUITE.reason}), profile {GRID.profile}, "
          f"results in {R}/", file=sys.stderr)
    from hkt.suite.plan import workflow_plan

    print(workflow_plan(SUITE, plan=None, configfiles=workflow.config_settings.configfiles),
          file=sys.stderr, flush=True)  # jobs per rule; the plan command of the files given
    for _clamp in GRID.clamps():
        print(f"hkt: {_clamp}", file=sys.stderr)
    for _record, _problem in RUN.damaged:  # set aside when a run builds its DAG: run_inputs()
        print(damage_warning(_record, _problem), file=sys.stderr)
else:  # a cluster node's job runs no onstart: its jobs get their environment here
    apply_env(RUN)

# GPUs shared by local jobs (hkt/gpu_slots.py): Snakemake counts the slots (a global
# resource, GPUs x jobs_per_gpu, unless --resources gives it) and `hkt` claims its job's GPU,
# told where the slots are by $HKT_GPU_SLOTS (set by start(): an environment variable, so that
# the rules' shell text and params, rerun triggers, stay as they were). Not on a cluster, whose
# jobs get GPUs of their own (resources.RULE.gpu).
if RUN.gpu_slots_total is not None and GPU_SLOTS not in workflow.global_resources:
    workflow.register_resource(GPU_SLOTS, RUN.gpu_slots_total)


def disk_error(exc):
    """A full disk or a read-only file system met at the workflow's start (the lock, the store,
    the plan and its calibration cache, plan/sessions.json): the one line `hkt` prints for
    every such error (hkt.cli.main.describe_os_error), as a WorkflowError, which stops the workflow
    without a traceback."""
    from hkt.cli.main import describe_os_error

    return WorkflowError(f"hkt: error: {describe_os_error(exc)}")


PLAN = None  # the calibrated plan, once start() has made it: the training jobs' priorities


def start():
    """onstart: jobs are about to run (not a dry run, --lint or --report). The jobs'
    environment, the results directory claimed (one running workflow per results_dir, whichever
    checkout it runs from), the MLflow store opened (a broken one stops here, before anything is
    timed), the plan calibrated and printed (the device, jobs per rule, ETA, where the logs are)
    and this session recorded (plan/sessions.json). The plan's estimates then become the jobs'
    priorities."""
    from hkt.suite.plan import calibrated_plan, workflow_plan
    from hkt.suite.standing import settings
    from hkt.workflow.invocation import start as start_jobs

    global PLAN
    began = getattr(workflow, "start_time", None)  # Snakemake's start (a local datetime)
    packing = RUN.local_gpu_slots and GRID.gpu_packing()  # what it prints needs --cores
    try:
        PLAN = start_jobs(RUN, started=began.timestamp() if began is not None else None,
                          cores=workflow.cores if packing else None,
                          cluster=bool(workflow.non_local_exec),  # known now, not when read
                          claim=claim_results, open_store=init_tracking_store,
                          plan=calibrated_plan,
                          describe=lambda suite, plan: workflow_plan(suite, plan=plan),
                          heartbeat_s=lambda: float(settings([])["heartbeat_s"]))
    except HKTError as exc:
        raise WorkflowError(f"hkt: error: {exc}")
    except OSError as exc:
        raise disk_error(exc)
    workflow.register_envvars(*ENV_PASSED)  # set now: what a cluster node's jobs receive
    workflow.dag.update_priority()  # the priority functions now read PLAN


def claim_results():
    """Refuse to start when another running workflow (another checkout) uses results_dir; the
    lock is held by this process until it exits."""
    from hkt.workflow.results_lock import claim_results_dir

    claim_results_dir(R, REPO)


def init_tracking_store():
    """Open (and if new, create) the MLflow store once, under the lock `hkt` takes for it,
    before parallel jobs start."""
    from hkt.mlflow_store import open_client

    open_client(TRACKING_URI)


def run_inputs(wc):
    """A run's job (train, external) waits for its task's data. The first call of a run that
    executes jobs sets aside the records that do not load (RUN.damaged), so that Snakemake,
    which takes a job whose output exists as done, runs their jobs again (`hkt train` finishes
    the run from its last checkpoint). Here and not in onstart: Snakemake decides which jobs run
    before onstart, which it skips when nothing is left to do; and not when the workflow is read,
    which cannot tell a run from a dry run, --lint or --report, none of which may change it."""
    if RUN.damaged and executing():
        set_aside_damaged()
    return GRID.data_files(wc.task)


def executing():
    """Whether this process runs jobs: not a dry run, a cluster job, nor `--report` or `--lint`
    (no executor). Known once Snakemake builds its DAG, not when it reads the workflow."""
    return (workflow.is_main_process and not workflow.dryrun
            and workflow.executor_plugin is not None)


@lru_cache(maxsize=None)  # once per run
def set_aside_damaged():
    from hkt.run_record import set_aside_if_damaged

    try:
        for record, _ in RUN.damaged:
            set_aside_if_damaged(record)
    except OSError as exc:
        raise disk_error(exc)


def train_priority(wc):
    """Jobs resuming from a checkpoint start first, then the longest (their estimated seconds,
    from the plan: Plan.priority), so that the last long job does not run alone at the end;
    0 until the plan exists (a dry run times nothing)."""
    return RUN.train_priority(job(wc), PLAN)


def prepare_priority(wc):
    """A task's data first where its training jobs are the longest (the plan's)."""
    return RUN.prepare_priority(wc.task, PLAN)


def end_session(ok):
    from hkt.workflow.sessions import end_session as end

    end(R, ok=ok)


def say_complete():
    """After a suite completes, its last lines (after Snakemake's `Elapsed time`, as the process
    exits) say where the summary is, how to build the report and how to open MLflow's UI."""
    import atexit

    lines = closing_lines(R, SUMMARY, RUN.report_command, TRACKING_URI)
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


def job(wc):
    """The grid job of a rule's wildcards."""
    return Job(wc.task, wc.model, wc.variant, int(wc.seed))


def resources(rule_name):
    return RUN.resources(rule_name)


def threads(rule_name):
    return RUN.threads(rule_name)


# --- the rules' parameters (the rules stay a few lines: input, output, log, one command) ---------


def train_params():
    """`hkt train`'s arguments, and the composed config's digest: the rerun trigger. The suite is
    one too (a record names its suite), though the job learns it from $HKT_SUITE."""
    return dict(data=lambda wc: data_dir(wc.task),
                out=lambda wc: GRID.path("run", **job(wc).wildcards()),
                overrides=lambda wc: list(GRID.train_overrides(job(wc))),
                suite=SUITE.name,
                config_digest=lambda wc: RUN.train_digest(job(wc)))


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
