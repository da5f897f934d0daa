# Shared definitions: paths, the job grid from config/config.yaml, and the overrides of each job.
# Pure Python at parse time (no torch, no Hydra): a dry run of an up-to-date tree stays fast.

import hashlib
import json
import os
import shlex
import shutil
from functools import lru_cache

import yaml
from snakemake.exceptions import WorkflowError

# --- paths and commands -------------------------------------------------------------------------

R = str(config["results_dir"]).rstrip("/") or "."  # as given: relative to the working directory
R_ABS = Path(R).resolve()
HKT = shutil.which("hkt") or str(Path(sys.executable).with_name("hkt"))  # the `hkt` command
PY = sys.executable  # the Python that runs Snakemake (has hkt installed)
TRACKING_URI = (config.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
                or f"sqlite:///{R_ABS}/mlflow.db")
MAIN = "main"  # variant label of the main-table runs


def q(value):
    """Quote one shell word."""
    return shlex.quote(str(value))


# Every job runs with the repository's config/, MLflow writing under results_dir (or the server).
ENV = (f"export HKT_CONFIG_DIR={q(CONFIG_DIR)} HKT_RESULTS_DIR={q(R_ABS)} "
       f"MLFLOW_TRACKING_URI={q(TRACKING_URI)} MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false;")


def init_tracking_store():
    """Create the SQLite MLflow store once, before parallel jobs race to run its migrations."""
    if not TRACKING_URI.startswith("sqlite:///"):
        return
    Path(TRACKING_URI[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    from mlflow.tracking import MlflowClient

    MlflowClient(tracking_uri=TRACKING_URI).search_experiments(max_results=1)


def res(rule_name, key, default=None):
    return (config.get("resources") or {}).get(rule_name, {}).get(key, default)


# --- what exists --------------------------------------------------------------------------------

EXTERNAL = {name: spec for name, spec in (config.get("external") or {}).items()
            if (spec or {}).get("enabled", True)}
MODELS = sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml") if p.stem not in EXTERNAL)


def fail(msg):
    raise WorkflowError(f"workflow config (config/config.yaml + --configfile/--config): {msg}")


def _config_file(group, name):
    return CONFIG_DIR / group / f"{name}.yaml"


TASKS = config["tasks"]


def task_config_name(task):
    return (TASKS[task] or {}).get("config") or task


@lru_cache(maxsize=None)
def task_info(task):
    """The Hydra task config's name (task family, as in run records) and sequence length."""
    cfg = yaml.safe_load(_config_file("task", task_config_name(task)).read_text()) or {}
    return str(cfg.get("name", task)), int(cfg.get("max_length", 0))


def _check_task(task, where):
    if task not in TASKS:
        fail(f"{where} names task '{task}', which is not under `tasks:` "
             f"(defined: {', '.join(sorted(TASKS))})")
    path = _config_file("task", task_config_name(task))
    if not path.is_file():
        fail(f"task '{task}' uses Hydra task config '{task_config_name(task)}', but {path} "
             "does not exist")


def _check_model(model, where):
    if model not in MODELS:
        fail(f"{where} names model '{model}', which has no config/model/{model}.yaml "
             f"(models: {', '.join(MODELS)}); add one (README: 'Adding a baseline')")


if not _config_file("profile", config["profile"]).is_file():
    fail(f"profile '{config['profile']}' has no config/profile/{config['profile']}.yaml "
         f"(profiles: {', '.join(sorted(p.stem for p in (CONFIG_DIR / 'profile').glob('*.yaml')))})")

MAIN_CFG = config["main"]
LRA = config.get("lra") or {}
ABL = config.get("ablation") or {}
ABL_TASK = ABL.get("task", "listops")  # the paper runs its ablations on ListOps
ANALYZE = config.get("analyze") or {}
SEEDS = list(config["seeds"])

for t in MAIN_CFG["tasks"]:
    _check_task(t, "main.tasks")
for m in MAIN_CFG["models"]:
    _check_model(m, "main.models")
if LRA.get("enabled"):
    for t in LRA.get("tasks", []):
        _check_task(t, "lra.tasks")
    for m in LRA.get("models", []):
        _check_model(m, "lra.models")
VARIANTS = ABL.get("variants") or {}
if ABL.get("enabled"):
    _check_task(ABL_TASK, "ablation.task")
    for v in ABL.get("include", []):
        if v not in VARIANTS:
            fail(f"ablation.include names variant '{v}', which is not under ablation.variants "
                 f"(defined: {', '.join(sorted(VARIANTS)) or 'none'})")
        _check_model(VARIANTS[v]["model"], f"ablation.variants.{v}.model")
        if VARIANTS[v].get("match_params") and VARIANTS[v]["model"] != "mha":
            fail(f"ablation.variants.{v}: match_params widens an MHA; its model must be mha")
for _name, _spec in EXTERNAL.items():
    if _name in MODELS or _name in ("hkt", "mha"):
        fail(f"external.{_name}: the name is taken by config/model/{_name}.yaml")
    for t in (_spec or {}).get("tasks") or MAIN_CFG["tasks"]:
        _check_task(t, f"external.{_name}.tasks")


# --- the job grid -------------------------------------------------------------------------------


def ablation_seeds():
    return list(ABL.get("seeds") or SEEDS)


def train_jobs():
    """Every (task, model, variant, seed) that `hkt train` runs, main table first."""
    jobs = []
    grids = [(MAIN_CFG["tasks"], MAIN_CFG["models"])]
    if LRA.get("enabled"):
        grids.append((LRA.get("tasks", []), LRA.get("models", [])))
    for tasks, models in grids:
        jobs += [(t, m, MAIN, s) for t in tasks for m in models for s in SEEDS]
    if ABL.get("enabled"):
        t = ABL_TASK
        for s in ablation_seeds():
            jobs += [(t, "hkt", MAIN, s), (t, "mha", MAIN, s)]  # the references
            jobs += [(t, VARIANTS[v]["model"], v, s) for v in ABL.get("include", [])]
    return list(dict.fromkeys(jobs))


def external_jobs():
    """Every (task, name, variant, seed) record an external baseline's rule writes."""
    jobs = []
    for name, spec in EXTERNAL.items():
        spec = spec or {}
        jobs += [(t, name, MAIN, s) for t in spec.get("tasks") or MAIN_CFG["tasks"]
                 for s in spec.get("seeds") or [0]]
    return jobs


def run_dir(task, model, variant, seed):
    return f"{R}/runs/{task}/{model}/{variant}/seed{seed}"


def record_path(task, model, variant, seed):
    return f"{run_dir(task, model, variant, seed)}/record.json"


def data_dir(task):
    return f"{R}/data/{task}"


def data_files(task):
    return [f"{data_dir(task)}/{split}.parquet" for split in ("train", "val", "test")]


def all_records():
    return [record_path(*j) for j in train_jobs() + external_jobs()]


def analysis_jobs():
    if not ANALYZE.get("enabled"):
        return []
    variants, models = ANALYZE.get("variants"), ANALYZE.get("models", ["hkt", "mha"])
    return [j for j in train_jobs() if j[1] in models and (variants is None or j[2] in variants)]


def analysis_path(task, model, variant, seed):
    return f"{R}/analysis/{task}/{model}/{variant}/seed{seed}/analysis.parquet"


def all_analyses():
    return [analysis_path(*j) for j in analysis_jobs()]


BENCH = config.get("bench") or {}


def bench_outputs():
    return [f"{R}/bench/attention.csv"] if BENCH.get("enabled", True) else []


# --- one training job's overrides and the files its config is composed from ------------------------


def variant_spec(model, variant):
    if variant == MAIN:
        return {"model": model, "overrides": []}
    if variant not in VARIANTS:
        raise WorkflowError(f"no variant '{variant}' under ablation.variants in the config")
    spec = VARIANTS[variant]
    if spec["model"] != model:
        raise WorkflowError(f"variant '{variant}' is defined for model '{spec['model']}', "
                            f"not '{model}'")
    return spec


def train_overrides(task, model, variant, seed):
    """The Hydra overrides of `hkt train` for this job (the variant's come last and win)."""
    spec = variant_spec(model, variant)
    return [f"task={task_config_name(task)}", f"model={model}", f"profile={config['profile']}",
            f"seed={seed}", f"variant={variant}", *config.get("train_overrides", []),
            *spec.get("overrides", [])]


def match_file(task, variant):
    return f"{R}/params/{task}/{variant}.override"


def needs_match(model, variant):
    return variant != MAIN and bool(variant_spec(model, variant).get("match_params"))


def train_config_files(task, model, variant="main"):
    """The config files a training job's config is composed from (its rerun triggers)."""
    files = [CONFIG_DIR / "train.yaml", _config_file("model", model),
             _config_file("task", task_config_name(task)),
             _config_file("profile", config["profile"]),
             *sorted((CONFIG_DIR / "optim").glob("*.yaml"))]
    pt = CONFIG_DIR / "profile_task" / f"{config['profile']}_{task_config_name(task)}.yaml"
    if pt.is_file():
        files.append(pt)
    for o in train_overrides(task, model, variant, 0):  # e.g. experiment=ablation_levels2
        key, _, value = o.partition("=")
        if (CONFIG_DIR / key).is_dir() and _config_file(key, value).is_file():
            files.append(_config_file(key, value))
    return [str(f) for f in dict.fromkeys(files)]


@lru_cache(maxsize=None)
def _file_digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def config_stamp(task, model, variant, seed):
    """A digest of what defines the run: its overrides and its config files' contents."""
    h = hashlib.sha256(json.dumps(train_overrides(task, model, variant, seed)).encode())
    for f in train_config_files(task, model, variant):
        h.update(f"{Path(f).relative_to(CONFIG_DIR)}:{_file_digest(f)}".encode())
    return h.hexdigest()[:32]


def shell_words(words):
    return " ".join(q(w) for w in words)


def final_outputs():
    outs = [f"{R}/summary.md", *aggregate_outputs(), *mlflow_check_outputs()]
    return outs + all_analyses()
