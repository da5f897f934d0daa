"""The workflow's job grid (hkt/workflow/grid.py) without Snakemake: jobs, paths, command
arguments, resources and the config checks, on the repository's config and on small variations."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hkt.gpu_slots import Slots
from hkt.workflow.grid import MAIN, Grid, GridError, Job
from hkt.workflow.suites import check_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def grid(cpus: int = 64, **changes) -> Grid:
    cfg = copy.deepcopy(CONFIG)
    for key, value in changes.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    check_config(cfg, SCHEMA)
    return Grid(cfg, CONFIG_DIR, cpus=cpus)


def test_default_grid_is_the_paper_suite():
    g = grid()
    jobs = g.train_jobs()
    main, abl = CONFIG["main"], CONFIG["ablation"]
    n_main = len(main["tasks"]) * len(main["models"]) * len(CONFIG["seeds"])
    n_abl = len(abl["include"]) * len(abl["seeds"] or CONFIG["seeds"])
    assert len(jobs) == len(set(jobs)) == n_main + n_abl  # from the config: a new model adds 3
    assert jobs[0] == Job("listops", "mha", MAIN, 0)
    ablations = {j.variant: j.model for j in jobs if j.variant != MAIN}
    assert ablations == {"levels1": "hkt", "levels2": "hkt", "levels4": "hkt",
                         "static_fusion": "hkt", "linear_upsample": "hkt", "stride4": "hkt",
                         "mha_matched": "mha"}
    assert {j.task for j in jobs if j.variant != MAIN} == {"listops"}
    # majority, ngram x 3 tasks, and the five ListOps rule references, seed 0
    assert len(g.external_jobs()) == 2 * 3 + 5
    assert {j.task for j in g.external_jobs() if j.model.endswith(("_rule", "_prior"))} == {"listops"}
    assert {(j.model, j.variant) for j in g.analysis_jobs()} == {("hkt", MAIN), ("mha", MAIN)}
    assert len(g.records()) == len(jobs) + 11


def test_a_derived_ablation_is_not_trained_and_reaches_the_aggregate():
    g = grid(ablation={"include": ["levels2"], "derived": {"levels1": "mha"}})
    variants = {j.variant for j in g.train_jobs()}
    assert "levels1" not in variants and "levels2" in variants
    assert all(Job("listops", "mha", MAIN, s) in g.train_jobs() for s in CONFIG["seeds"])
    assert "--derived=levels1=mha" in g.ablation_args()


@pytest.mark.parametrize("derived, message", [
    ({"levels9": "mha"}, "ablation.derived names variant 'levels9'"),
    ({"levels1": "transformer"}, "ablation.derived.levels1 names model 'transformer'"),
    ({"levels2": "mha"}, "'levels2' is also in ablation.include"),
])
def test_a_bad_derived_ablation_is_named(derived, message):
    with pytest.raises(GridError, match=message):
        grid(ablation={"include": ["levels2"], "derived": derived})


def test_ablation_model_comes_from_the_variant_file():
    g = grid()
    for name in CONFIG["ablation"]["include"]:
        text = (CONFIG_DIR / "variant" / f"{name}.yaml").read_text()
        assert f"override /model: {g.variant_model(name)}" in text
    assert g.variant_model(MAIN) is None


def test_train_overrides_are_the_hkt_train_command():
    g = grid(train_overrides=["train.device=cuda"], suite="paper")
    # no suite among them: a job learns it from $HKT_SUITE (hkt.workflow.suites)
    assert g.train_overrides(Job("imdb_lra", "hkt", "levels2", 1)) == [
        "task=imdb_lra", "model=hkt", "profile=paper", "seed=1", "variant=levels2",
        "train.device=cuda"]


def test_a_task_file_that_builds_on_another_takes_its_family():
    """listops_lra.yaml sets no family of its own (defaults: [listops, _self_]): the ablation
    table of an LRA task reads the listops records at T = 2000."""
    g = grid(ablation={"task": "listops_lra"})
    assert g.task_info("listops_lra") == ("listops", 2000)
    assert g.ablation_args()[:4] == ["--ablation-task", "listops", "--ablation-length", "2000"]


def test_a_training_jobs_overrides_are_one_shell_word_each():
    """The train rule's overrides param (a list, also its rerun trigger) reaches `hkt train` as
    one shell word per override, however an override is spelt."""
    import shlex

    from snakemake.utils import QuotedFormatter, SequenceFormatter

    rule = (ROOT / "workflow" / "rules" / "train.smk").read_text()
    assert "{params.overrides:q}" in rule  # the list, quoted element by element
    new = [*grid().train_overrides(Job("listops", "hkt", "levels2", 0)),
           "+model.mixer.x=1", "~model.mixer", "model.mixer={a: 1, b: 2}"]
    shell = SequenceFormatter(separator=" ", element_formatter=QuotedFormatter())
    assert shlex.split(shell.format("{x:q}", x=new)) == new  # one word each


def test_paths_follow_one_layout():
    g = grid(results_dir="out/")
    j = Job("listops", "hkt", "levels1", 2)
    assert g.record(j) == "out/runs/listops/hkt/levels1/seed2/record.json"
    assert g.pattern("run", "record.json") == "out/runs/{task}/{model}/{variant}/seed{seed}/record.json"
    assert g.path("run", **j.wildcards()) == "out/runs/listops/hkt/levels1/seed2"
    assert g.analysis_file(j) == "out/analysis/listops/hkt/levels1/seed2/analysis.parquet"
    assert g.data_files("imdb") == [*(f"out/data/imdb/{s}.parquet" for s in ("train", "val", "test")),
                                    "out/data/imdb/manifest.json"]
    assert g.log("train", "{task}") == "out/logs/train/{task}.log"


def test_command_arguments():
    g = grid(tasks={"listops": {"config": "listops_lra", "prepare": ["prepare.seed=3"],
                                "source": "/data/lops"}},
             data_mirror="/mirror", suite="paper",
             external={"ngram": {"options": {"orders": [1, 2], "buckets": 64, "epochs": 1,
                                             "max_train": None}},
                       "tool": {"command": "run-it {data} --to {out} {options} > {log}",
                                "options": {"n": 3}}})
    assert g.prepare_args("listops") == ["listops_lra", "prepare.seed=3", "--source",
                                         "/data/lops", "prepare.mirror=/mirror"]
    # a baseline of ours runs `hkt baseline NAME`, its options as `--key value` words
    assert g.external_command(Job("listops", "ngram", "main", 0), "sqlite:///a b.db") == (
        "hkt --log results/logs/external/listops/ngram/main/seed0.log baseline ngram"
        " --data results/data/listops --out results/runs/listops/ngram/main/seed0 --seed 0"
        " --variant main --profile paper --orders 1 2 --buckets 64 --epochs 1"
        " --tracking-uri 'sqlite:///a b.db'")
    # another program: its own command, the placeholders filled in
    assert g.external_command(Job("listops", "tool", "main", 0), "u") == (
        "run-it results/data/listops --to results/runs/listops/tool/main/seed0 --n 3"
        " > results/logs/external/listops/tool/main/seed0.log")
    assert g.ablation_args() == ["--ablation-task", "listops", "--ablation-length", "2000"]


BIG_NODE = {"cpus": None, "mem_mb": 10**7, "gpus": 8}


def test_resources_are_the_config_clamped_to_the_node():
    assert grid(cpus=64, node=BIG_NODE).resources("train") == CONFIG["resources"]["train"]
    assert grid(cpus=64, node=BIG_NODE).clamps() == []
    assert CONFIG["resources"]["analyze"]["threads"] > 2
    assert grid(cpus=2).resources("analyze")["threads"] == 2
    assert grid(cpus=2).resources("aggregate")["threads"] == 1
    assert grid(resources={"aggregate": {}}).resources("aggregate") == {"threads": 1}
    small = Grid({**CONFIG, "node": {"cpus": 2, "mem_mb": 8000, "gpus": 0}}, CONFIG_DIR)
    assert small.resources("analyze") == {**CONFIG["resources"]["analyze"], "threads": 2,
                                          "mem_mb": 8000, "gpu": 0}
    assert small.resources("aggregate") == CONFIG["resources"]["aggregate"]  # 1 thread, 4000 MB
    clamps = small.clamps()
    asked = CONFIG["resources"]["train"]
    assert (f"resources.analyze.threads: {CONFIG['resources']['analyze']['threads']} asked, the "
            "node has 2 CPUs: 2 used (config `node` sets the node)") in clamps
    assert any(c.startswith(f"resources.train.mem_mb: {asked['mem_mb']} asked, the node has "
                            "8000 MB: 8000 used") for c in clamps)
    assert ("resources.train.gpu: 1 asked, the node has 0 GPUs: 0 used (config `node` sets the "
            "node)") in clamps
    assert not any(c.startswith("resources.aggregate") for c in clamps)


def test_the_node_default_is_this_machine(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert grid(cpus=64, node={"mem_mb": 10**7}).resources("train")["gpu"] == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert grid(cpus=64, node={"mem_mb": 10**7}).resources("train")["gpu"] == 0
    assert grid(cpus=64, node={"mem_mb": 10**7, "gpus": 2}).resources("train")["gpu"] == 1


def test_a_cluster_without_gpus_in_view_refuses_gpu_jobs(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(GridError, match=r"resources\.\{analyze,bench,train\}\.gpu ask for GPUs, "
                                        r"this machine has none and config `node\.gpus` is not set"):
        grid(cpus=64).check_cluster_node()
    grid(cpus=64, node={"gpus": 0}).check_cluster_node()  # said explicitly: CPU jobs
    grid(cpus=64, node={"gpus": 4}).check_cluster_node()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    grid(cpus=64).check_cluster_node()  # this machine has one


def test_a_node_key_that_does_not_exist_is_named():
    cfg = {**copy.deepcopy(CONFIG), "node": {"cpu": 4}}
    with pytest.raises(GridError, match=r"unknown key node\.cpu \(allowed under node: cpus, gpus, mem_mb\)"):
        check_config(cfg, SCHEMA)


@pytest.mark.parametrize("changes, message", [
    ({"profile": "fast"}, "profile 'fast' has no config/profile/fast.yaml"),
    ({"main": {"models": ["transformer"]}}, "main.models names model 'transformer'"),
    ({"main": {"tasks": ["pathfinder"]}}, "main.tasks names task 'pathfinder'"),
    ({"ablation": {"include": ["levels9"]}}, "ablation.include names variant 'levels9'.*levels1"),
    ({"external": {"conv": {"enabled": True}}}, "external.conv: the name is taken"),
    ({"leaderboard": "config/report/nope.yaml"},
     "leaderboard: config/report/nope.yaml is not a file in the repository"),
    ({"external": {"mine": {"enabled": True}}},
     "external.mine: no `command` given, and hkt/baselines/ has no baseline 'mine' "
     r"\(registered: bracketless_rule, depth1_rule, depth2_rule, depth3_rule, exact_rule, majority, ngram, "
     r"root_op_prior\)"),
    ({"external": {"mine": {"command": "x {data} {out} {dir}"}}},
     r"external.mine.command names \{dir\}; it may name \{data\}, \{out\}"),
    ({"external": {"mine": {"command": "x {data} > out.json"}}},
     r"external.mine.command never names \{out\}"),
    ({"external": {"mine": {"command": "awk '{print}' {out}"}}},
     r"external.mine.command names \{print\}"),
])
def test_bad_names_are_named(changes, message):
    with pytest.raises(GridError, match=message):
        grid(**changes)


def test_unknown_key_lists_the_allowed_keys_only():
    with pytest.raises(GridError) as exc:
        grid(sedes=[0])
    msg = str(exc.value)
    assert msg.startswith("unknown key sedes (allowed: ")
    assert "seeds" in msg and "$schema" not in msg and len(msg.splitlines()) == 1
    with pytest.raises(GridError, match=r"unknown key ablation.variants \(allowed under "
                                        r"ablation: derived, enabled, include, seeds, task\)"):
        grid(ablation={"variants": {}})
    with pytest.raises(GridError, match="key seeds: 'abc' is not of type 'array'"):
        grid(seeds="abc")


def test_grid_module_imports_neither_torch_nor_hydra():
    code = ("import sys, hkt.workflow.grid; "
            "print(sorted(m for m in ('torch', 'hydra') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the Hydra side: every training config composed and validated before any job runs -----------

def test_train_config_digests_follow_the_composed_config(tmp_path, monkeypatch):
    from hkt.workflow.job_configs import train_config_digests

    g = grid()
    jobs = [Job("listops", m, MAIN, s) for m in ("hkt", "mha") for s in (0, 1)]
    before = train_config_digests(g.train_overrides(j) for j in jobs)
    assert len(before) == 2  # composed once per model: the seed is not part of the key
    cdir = tmp_path / "config"
    subprocess.run(["cp", "-r", str(CONFIG_DIR), str(cdir)], check=True)
    path = cdir / "model" / "hkt.yaml"
    path.write_text(path.read_text() + "dropout: 0.25\n")  # a value no profile sets
    monkeypatch.setenv("HKT_CONFIG_DIR", str(cdir))
    after = train_config_digests(g.train_overrides(j) for j in jobs)
    changed = {key[1] for key in before if before[key] != after[key]}
    assert changed == {"model=hkt"}


def test_a_bad_override_names_the_job_and_the_key():
    from hkt.errors import ConfigError
    from hkt.workflow.job_configs import train_config_digests

    g = grid(train_overrides=["optim.lr=abc"])
    with pytest.raises(ConfigError, match=r"hkt train task=listops model=mha profile=paper "
                                          r"variant=main optim.lr=abc: config key 'optim.lr'"):
        train_config_digests(g.train_overrides(j) for j in g.train_jobs())


def test_jobs_find_hkt_beside_the_python_that_runs_snakemake():
    import os
    import sys

    from hkt.workflow.suites import interpreter_first

    here = str(Path(sys.executable).parent)
    path = os.pathsep.join(["/usr/bin", here, "/bin"])
    assert interpreter_first(path).split(os.pathsep) == [here, "/usr/bin", "/bin"]  # once, first
    assert (Path(here) / "hkt").exists()


def test_a_task_whose_workflow_id_differs_from_its_hydra_name_has_one_experiment():
    """Workflow task `lops` = Hydra task listops_lra (family listops): its trained runs and its
    external baselines log to one experiment, apart from the T = 512 listops runs, and its run
    names differ from theirs (issue 22: they shared hkt-paper-listops and listops-mha-main-s0)."""
    from hkt.train.run_config import load_config
    from hkt.workflow.grid import Job

    g = grid(tasks={"lops": {"config": "listops_lra", "prepare": [], "source": None}},
             main={"tasks": ["listops", "lops"], "models": ["mha"]})
    names = {}
    for task in ("listops", "lops"):
        cfg = load_config(g.train_overrides(Job(task, "mha", "main", 0)))
        assert cfg.tracking.experiment == g.experiment(task)  # hkt train == the baselines' rule
        names[task] = (cfg.tracking.experiment, cfg.tracking.run_name)
    assert names == {"listops": ("hkt-paper-listops", "listops-mha-main-s0"),
                     "lops": ("hkt-paper-listops_lra", "listops_lra-mha-main-s0")}


def test_a_task_can_have_its_own_budget():
    """tasks.NAME.profile: ListOps at the paper's budget beside IMDB at a CPU budget in one
    suite; each job, its baselines' experiment and its composed config follow the task's."""
    from hkt.train.run_config import load_config
    from hkt.workflow.grid import GridError, Job

    tasks = {**CONFIG["tasks"], "listops": {"config": "listops", "prepare": [], "source": None,
                                             "profile": "paper"}}
    g = grid(profile="cpu", tasks=tasks, main={"tasks": ["listops", "imdb"], "models": ["mha"]})
    assert [g.task_profile(t) for t in ("listops", "imdb")] == ["paper", "cpu"]
    for task, profile in (("listops", "paper"), ("imdb", "cpu")):
        overrides = g.train_overrides(Job(task, "mha", "main", 0))
        assert f"profile={profile}" in overrides
        cfg = load_config(overrides)
        assert cfg.train.profile == profile and cfg.tracking.experiment == g.experiment(task)
    assert load_config(g.train_overrides(Job("listops", "mha", "main", 0))).train.max_steps == 10000
    bad = {**tasks, "imdb": {"config": "imdb", "prepare": [], "source": None, "profile": "fast"}}
    with pytest.raises(GridError, match="tasks.imdb.profile: profile 'fast' has no "
                                        "config/profile/fast.yaml"):
        grid(tasks=bad)


def test_a_task_s_prepare_reads_the_file_it_builds_on():
    """Editing listops.yaml's prepare settings re-prepares listops_lra too (its `defaults`)."""
    g = grid()
    assert g.task_config_files("listops_lra") == [str(CONFIG_DIR / "task" / "listops_lra.yaml"),
                                                  str(CONFIG_DIR / "task" / "listops.yaml")]
    assert g.task_config_files("imdb") == [str(CONFIG_DIR / "task" / "imdb.yaml")]


def test_gpu_slots_of_a_local_node():
    """jobs_per_gpu training jobs share each GPU (one slot each), the benchmark takes a GPU's
    every slot; jobs claim only for rules that ask for a GPU, and nothing without GPUs."""
    g = grid(node={"gpus": 2}, jobs_per_gpu=3, results_dir="out")
    assert g.gpu_slots("train") == Slots(Path("out") / ".gpu-slots", 2, 3, 1)
    assert g.gpu_slots("analyze").take == 1 and g.gpu_slots("bench").take == 3
    assert g.gpu_slots("prepare") is None  # asks no GPU
    assert g.gpu_env() == f"{Path('out') / '.gpu-slots'}:2:3:train,analyze,bench"
    assert g.gpu_packing(cores=16) == ("GPUs: 2, 3 training jobs on each (jobs_per_gpu): up to 6 "
                                       "at once, each on one GPU (Snakemake resource gpu_slots = 6)")
    cpu_training = grid(node={"gpus": 1}, resources={**CONFIG["resources"],
                                                     "train": {"threads": 1, "gpu": 0}})
    assert cpu_training.gpu_env().endswith(":1:9:analyze,bench") and cpu_training.gpu_packing() is None
    no_gpu = grid(node={"gpus": 0})
    assert no_gpu.gpu_slots("train") is None and no_gpu.gpu_env() is None


def test_the_contracts_name_exactly_the_placeholders_an_external_command_may_use():
    """docs/contracts.md lists the placeholders of an external command: the list is the code's
    (it once offered `{suite}`, which the workflow never filled in: the suite is $HKT_SUITE)."""
    import re

    from hkt.workflow.external import PLACEHOLDERS

    text = (Path(__file__).resolve().parents[1] / "docs" / "contracts.md").read_text("utf-8")
    listed = re.search(r"shell-quoted \((.*?): `PLACEHOLDERS`\)", text, re.S)
    assert listed, "docs/contracts.md no longer lists the placeholders before `PLACEHOLDERS`"
    assert re.findall(r"`\{(\w+)\}`", listed.group(1)) == list(PLACEHOLDERS)
