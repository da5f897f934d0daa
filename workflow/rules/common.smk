# Shared definitions: a thin adapter over hkt.workflow. Reading the workflow makes one frozen
# Invocation (the suite, its grid, every training config checked, the records that do not load)
# and changes nothing: a dry run, --lint and --report write nothing, claim nothing and set no
# environment variable. What starts the jobs (their environment, the results directory's lock,
# the MLflow store, the calibrated plan, the session) and what ends the run are HANDLERS'
# (hkt/workflow/handlers.py), called from the Snakefile's onstart, onsuccess and onerror.

import sys

from hkt.errors import ConfigError
from hkt.report.aggregate_outputs import MLFLOW_CHECK, RUNS_TABLE, SUMMARY, products
from hkt.suite.plan import calibrated_plan, workflow_plan
from hkt.suite.standing import settings
from hkt.suite.stop import resumable_line
from hkt.workflow.grid import MAIN, Job
from hkt.workflow.handlers import Handlers, SuiteParts
from hkt.workflow.invocation import GPU_SLOTS, apply_env, damage_warning, read_invocation

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
# told where the slots are by $HKT_GPU_SLOTS (set by HANDLERS.start(): an environment variable, so that
# the rules' shell text and params, rerun triggers, stay as they were). Not on a cluster, whose
# jobs get GPUs of their own (resources.RULE.gpu).
if RUN.gpu_slots_total is not None and GPU_SLOTS not in workflow.global_resources:
    workflow.register_resource(GPU_SLOTS, RUN.gpu_slots_total)


HANDLERS = Handlers(RUN, workflow, repo=REPO, suite=SuiteParts(
    plan=calibrated_plan, describe=lambda suite, plan: workflow_plan(suite, plan=plan),
    heartbeat_s=lambda: float(settings([])["heartbeat_s"]), resumable_line=resumable_line))


def run_inputs(wc):
    """A run's job waits for its task's data; a damaged record is set aside first (Handlers)."""
    return HANDLERS.run_inputs(wc.task)


def train_priority(wc):
    return HANDLERS.train_priority(job(wc))


def prepare_priority(wc):
    return HANDLERS.prepare_priority(wc.task)


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
                ablation=GRID.ablation_args(), borrow=GRID.borrow_args(),
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
