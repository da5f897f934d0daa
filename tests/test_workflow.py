"""The Snakemake workflow, fast checks: dry runs resolve every job (default config, the smoke suite,
the SLURM profile), and a bad config.yaml or a bad training override stops the run, naming the key,
before any job runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEFILE = ROOT / "workflow" / "Snakefile"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def user_env(env: dict | None = None) -> dict:
    """The environment of a user who runs `.venv/bin/snakemake`: the venv is not activated (its
    bin/ is not on PATH; the workflow finds `hkt` itself), no tracking server in the shell."""
    e = dict(os.environ if env is None else env)
    venv_bin = str(Path(sys.executable).parent)
    e["PATH"] = os.pathsep.join(p for p in e.get("PATH", "").split(os.pathsep) if p != venv_bin)
    e.pop("MLFLOW_TRACKING_URI", None)
    return e


def snakemake_cmd(*args: str, cwd: Path, snakefile: Path = SNAKEFILE,
                  program: tuple[str, ...] = ("-m", "snakemake")) -> list[str]:
    """Snakemake with this Python; ``program`` is what Python runs (a wrapper script instead)."""
    return [sys.executable, *program, "-s", str(snakefile), "--directory", str(cwd), *args]


def snakemake(*args: str, cwd: Path, snakefile: Path = SNAKEFILE, timeout: int = 300,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run Snakemake with this Python in directory ``cwd``, as a user runs it (:func:`user_env`)."""
    return subprocess.run(snakemake_cmd(*args, cwd=cwd, snakefile=snakefile), capture_output=True,
                          text=True, timeout=timeout, env=user_env(env))


def job_stats(output: str) -> dict[str, int]:
    """The 'Job stats' table of a (dry) run: rule -> count."""
    m = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\ntotal\s+(\d+)", output, re.S)
    assert m, output[-3000:]
    stats = {}
    for line in m.group(1).splitlines():
        name, count = line.split()
        stats[name] = int(count)
    stats["total"] = int(m.group(2))
    return stats


def expected_counts(cfg: dict) -> dict[str, int]:
    seeds = len(cfg["seeds"])
    main = cfg["main"]
    trains = {(t, m, "main", s) for t in main["tasks"] for m in main["models"]
              for s in range(seeds)}
    abl = cfg["ablation"]
    if abl["enabled"]:
        aseeds = len(abl["seeds"] or cfg["seeds"])
        for s in range(aseeds):
            trains |= {(abl["task"], "hkt", "main", s), (abl["task"], "mha", "main", s)}
            trains |= {(abl["task"], v, v, s) for v in abl["include"]}
    # one rule, `external`, runs every external baseline's jobs
    external = {"external": sum(len(spec.get("seeds") or [0]) * len(spec.get("tasks") or main["tasks"])
                                for spec in cfg["external"].values() if spec.get("enabled", True))}
    tasks = set(main["tasks"]) | ({abl["task"]} if abl["enabled"] else set())
    models = cfg["analyze"].get("models", ["hkt", "mha"])
    analyze = len({j for j in trains if j[1] in models and j[2] in cfg["analyze"]["variants"]})
    return {"train": len(trains), "prepare": len(tasks), **external,
            "analyze": analyze if cfg["analyze"]["enabled"] else 0}


def suite(name: str) -> dict:
    """config.yaml with config/suites/NAME.yaml merged over it (as --configfile does)."""
    from hkt.workflow.suites import merge

    return merge(CONFIG, yaml.safe_load((ROOT / "config" / "suites" / f"{name}.yaml").read_text()))


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="auto picks the paper suite here")
def test_dry_run_without_cuda_picks_the_cpu_suite_and_says_so(tmp_path):
    r = snakemake("-n", "--quiet", "rules", "--config", "results_dir=res", cwd=tmp_path,
                  env={k: v for k, v in os.environ.items() if k != "HKT_SUITE"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "hkt: suite cpu (suite: auto, no CUDA" in out and "results in res/" in out
    stats = job_stats(out)
    cpu = suite("cpu")
    for rule, n in expected_counts(cpu).items():
        assert stats.get(rule, 0) == n, (rule, stats)
    assert stats["train"] == len(cpu["main"]["tasks"]) * len(cpu["main"]["models"]) \
        * len(cpu["seeds"])  # every task x model x seed; levels1 derived, not trained


def test_dry_run_of_the_paper_suite_resolves_every_job(tmp_path):
    r = snakemake("-n", "--quiet", "rules", "--configfile",
                  str(ROOT / "config" / "suites" / "paper.yaml"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "hkt: suite paper (config/suites/paper.yaml)" in r.stderr
    stats = job_stats(r.stdout + r.stderr)
    want = expected_counts(suite("paper"))
    for rule, n in want.items():
        assert stats.get(rule, 0) == n, (rule, stats)
    assert stats["train"] == want["train"] > 0
    for rule in ("check_mlflow", "aggregate", "bench_attention", "all"):
        assert stats[rule] == 1


def test_dry_run_of_the_smoke_suite(tmp_path):
    r = snakemake("-n", "-p", "--configfile", str(ROOT / "config" / "suites" / "smoke.yaml"),
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    stats = job_stats(out)
    smoke = suite("smoke")
    assert len(smoke["seeds"]) == 1
    assert stats["train"] == expected_counts(smoke)["train"]  # one seed: main grid + ablations
    assert "profile=smoke" in out and "train.test_batches=4" in out
    assert "prepare.splits.train=2000" in out


def test_lra_suite_adds_its_tasks(tmp_path):
    """A config file that names no suite adds to config.yaml's own values (suite none)."""
    cfg = tmp_path / "lra.yaml"
    cfg.write_text("lra: {enabled: true}\n")
    r = snakemake("-n", "--quiet", "rules", "--configfile", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    stats = job_stats(r.stdout + r.stderr)
    base = expected_counts(CONFIG)
    lra = CONFIG["lra"]  # its tasks x its models x the seeds, from the config
    assert stats["train"] == base["train"] + len(lra["tasks"]) * len(lra["models"]) * len(CONFIG["seeds"])
    assert stats["prepare"] == base["prepare"] + len(lra["tasks"])


def rule_names() -> set[str]:
    text = "".join(p.read_text() for p in (ROOT / "workflow").rglob("*.smk"))
    return set(re.findall(r"^rule (\w+):", text, re.M))


@pytest.mark.parametrize("name", ["slurm", "slurm-local"])
def test_slurm_profile_names_real_rules_and_no_resource_amounts(name):
    """Resources are set once, in config.yaml; the profile only places jobs (partitions)."""
    profile = yaml.safe_load((ROOT / "workflow" / "executors" / name / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert "slurm_partition" in profile["default-resources"]
    assert "set-threads" not in profile
    rules = rule_names()
    assert {"train", "prepare", "external", "analyze", "aggregate"} <= rules
    amounts = {"gpu", "mem_mb", "runtime", "threads", "cpus_per_task"}
    for rule, res in profile.get("set-resources", {}).items():
        assert rule in rules, rule
        assert not amounts & set(res), (rule, res)
    assert not amounts & set(profile["default-resources"])
    assert CONFIG["resources"]["train"]["gpu"] == 1


def test_the_old_executor_settings_path_still_leads_to_the_same_files():
    """workflow/profiles/ (before "profile" meant only a training budget) is a link to
    workflow/executors/, so that old `snakemake --profile workflow/profiles/slurm` lines work."""
    for name in ("slurm", "slurm-local"):
        old = ROOT / "workflow" / "profiles" / name / "config.yaml"
        assert old.resolve() == (ROOT / "workflow" / "executors" / name / "config.yaml").resolve()


@pytest.mark.parametrize("name", ["slurm", "slurm-local"])
def test_slurm_profiles_ask_for_sigterm_before_the_time_limit(name):
    """So that a training job that runs out of time checkpoints its step first (issue 23)."""
    profile = yaml.safe_load((ROOT / "workflow" / "executors" / name / "config.yaml").read_text())
    assert re.fullmatch(r"--signal=TERM@\d+", profile["default-resources"]["slurm_extra"])


def test_dry_run_with_the_slurm_local_profile(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm",
                        reason="the SLURM executor plugin is an optional extra: hkt-bench[slurm]")
    r = snakemake("-n", "--profile", str(ROOT / "workflow" / "executors" / "slurm-local"),
                  "--configfile", str(ROOT / "config" / "suites" / "smoke.yaml"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert job_stats(out)["train"] == expected_counts(suite("smoke"))["train"]
    assert "slurm_partition=hkt" in out


def test_dry_run_with_the_slurm_profile_resolves_every_job(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm",
                        reason="the SLURM executor plugin is an optional extra: hkt-bench[slurm]")
    node = tmp_path / "node.yaml"  # a cluster's GPU node, as docs/clusters.md says to give
    node.write_text("node: {cpus: 32, mem_mb: 256000, gpus: 4}\n")
    r = snakemake("-n", "--profile", str(ROOT / "workflow" / "executors" / "slurm"), "--configfile",
                  str(ROOT / "config" / "suites" / "paper.yaml"), str(node), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "asked, the node has" not in out  # nothing clamped on that node
    assert job_stats(out)["train"] == expected_counts(CONFIG)["train"]
    train_resources = re.findall(r"rule train:.*?resources: ([^\n]*)", out, re.S)
    assert train_resources and all("gpu=1" in line for line in train_resources)
    assert all("runtime=720" in line for line in train_resources)
    assert "gpu_slots" not in out  # a job has its GPU to itself there: no slots to claim


def test_one_gpu_runs_the_paper_suites_training_jobs_nine_at_once(tmp_path):
    """On a one-GPU machine (simulated: node.gpus 1) Snakemake's own scheduler starts the paper
    suite's training jobs jobs_per_gpu (9) at a time, each holding one of the GPU's 9 slots, on
    16 cores where it would otherwise start 16. A --touch run: real job selection, no command
    run (each job's `hkt` would claim its GPU: tests/test_gpu_slots.py). At the smoke budget,
    so that the workflow's start-up calibration takes seconds."""
    node = tmp_path / "one-gpu.yaml"
    node.write_text("node: {gpus: 1}\nprofile: smoke\n")
    r = snakemake("--touch", "--cores", "16", "--verbose", "--until", "train", "--configfile",
                  str(ROOT / "config" / "suites" / "paper.yaml"), str(node), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert ("hkt: GPUs: 1, 9 training jobs on each (jobs_per_gpu): up to 9 at once, each on one "
            "GPU (Snakemake resource gpu_slots = 9)") in out
    assert job_stats(out)["train"] == expected_counts(suite("paper"))["train"]
    train = re.findall(r"rule train:.*?resources: ([^\n]*)", out, re.S)
    assert train and all("gpu_slots=1" in line for line in train)
    # the plan made at the start is the jobs' priorities: the longest first (estimated seconds)
    priorities = re.findall(r"rule train:\n(?:    .*\n)*?    priority: (\d+)", out)
    assert len(priorities) == len(train) and min(map(int, priorities)) > 0, priorities
    selected = [int(n) for n in re.findall(r"Selected jobs: (\d+)", out)]
    in_use = [9 - int(n) for n in re.findall(r"Resources after job selection: .*'gpu_slots': (\d+)", out)]
    assert max(selected) == 9 and max(in_use) == 9, (selected, in_use)


@pytest.mark.parametrize("bad, message", [
    ({"seeds": "abc"}, "seeds"),
    ({"sedes": [0]}, "sedes"),
    ({"profile": "fast"}, "profile 'fast'"),
    ({"main": {"tasks": ["listops"], "models": ["transformer"]}}, "config/model/transformer.yaml"),
    ({"main": {"tasks": ["pathfinder"], "models": ["hkt"]}}, "task 'pathfinder'"),
    ({"ablation": {"include": ["levels9"]}}, "names variant 'levels9'"),
    ({"external": {"ngram": {"seeds": [-1]}}}, "seeds"),
    ({"train_overrides": ["model.d_model = 8"]}, "train_overrides"),
])
def test_bad_config_stops_with_the_key(tmp_path, bad, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump(bad))
    r = snakemake("-n", "--configfile", str(cfg), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert message in out, out[-3000:]
    assert "Job stats" not in out  # stopped before building the DAG


def test_unknown_key_names_the_allowed_keys_not_the_schema(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("sedes: [0]\n")
    r = snakemake("-n", "--configfile", str(cfg), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "unknown key sedes (allowed: " in out and ", seeds, " in out, out[-3000:]
    assert "$schema" not in out and "additionalProperties" not in out
    assert len(out.splitlines()) < 15, out


def test_a_bad_training_override_stops_before_any_job(tmp_path):
    """Every training config of the DAG is composed and validated when the workflow starts."""
    r = snakemake("--cores", "1", "--configfile", str(ROOT / "config" / "suites" / "smoke.yaml"),
                  "--config", "results_dir=results", "train_overrides=[optim.lr=abc]",
                  cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "config key 'optim.lr' = 'abc': must be a number" in out, out[-3000:]
    assert "hkt train task=listops model=mha profile=smoke variant=main optim.lr=abc" in out
    assert "Job stats" not in out and "rule prepare" not in out
    assert not (tmp_path / "results").exists()


def _tree(root: Path) -> dict[str, tuple[int, int, bytes]] | None:
    """Every path under ``root`` with its mode, modification time and bytes; None when absent."""
    if not root.exists():
        return None
    return {str(p.relative_to(root)): (p.stat().st_mode, p.stat().st_mtime_ns,
                                       p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


def test_reading_the_workflow_changes_nothing(tmp_path):
    """Issue 62: `snakemake -n` (the cpu suite, run twice) writes nothing into the results
    directory and claims nothing: no lock, no MLflow store, no plan, no sessions file; an absent
    results directory stays absent, a results directory with runs in it (one whole record, one
    that does not load) stays byte for byte and time for time as it was. The record that does
    not load is named (set aside when jobs start: tests/test_faults_records.py)."""
    from hkt.workflow.suites import load_suite
    from test_report_aggregate import make_record

    args = ("-n", "--config", "suite=cpu", "results_dir=res")
    res = tmp_path / "res"
    r = snakemake(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _tree(res) is None  # not even created

    grid = load_suite("cpu", overrides={"results_dir": "res"}).grid
    whole, damaged = grid.train_jobs()[:2]
    for f in grid.data_files(whole.task):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    for j, text in ((whole, json.dumps(make_record(task=whole.task, model=whole.model,
                                                   seed=whole.seed))),
                    (damaged, '{"task": "cut short')):
        (tmp_path / grid.record(j)).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / grid.record(j)).write_text(text)
    before = _tree(res)
    for _ in range(2):
        r = snakemake(*args, cwd=tmp_path)
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-3000:]
        assert _tree(res) == before
        warned = [line for line in out.splitlines() if line.startswith("hkt: warning:")]
        assert len(warned) == 1 and f"{grid.record(damaged)} does not load (not valid JSON" \
            in warned[0] and "a dry run leaves it, and lists its job as done" in warned[0]
        listed = re.findall(r"rule train:\n(?:    .*\n)*?    output: (\S+)", out)
        assert grid.record(damaged) not in listed and grid.record(whole) not in listed
        assert len(listed) == len(grid.train_jobs()) - 2  # the rest
