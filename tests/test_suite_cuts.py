"""The cpu suite's cut (config/cuts/cpu.yaml), the short run of the identity check
(docs/development.md): given after the suite, it runs the suite's jobs, with their model sizes and
learning rates, on one seed at a few steps, under a suite name of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from hkt.workflow.job_configs import job_configs
from hkt.workflow.suites import Suite, load_suite, merge

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
CUT = CONFIG_DIR / "cuts" / "cpu.yaml"


def read(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def cut_suite() -> Suite:
    """What `snakemake --configfile config/suites/cpu.yaml config/cuts/cpu.yaml` runs."""
    base = merge(read(CONFIG_DIR / "config.yaml"), read(CONFIG_DIR / "suites" / "cpu.yaml"))
    return load_suite(str(CUT), base=base, config_dir=CONFIG_DIR)


def kinds(jobs) -> set[tuple[str, str, str]]:
    return {(j.task, j.model, j.variant) for j in jobs}


def test_the_cut_runs_every_kind_of_the_cpu_suites_jobs_on_one_seed():
    cpu, cut = load_suite("cpu", config_dir=CONFIG_DIR), cut_suite()
    assert cut.name == "cpu_cut"
    for jobs in ("train_jobs", "external_jobs", "analysis_jobs"):
        full, short = getattr(cpu.grid, jobs)(), getattr(cut.grid, jobs)()
        assert kinds(short) == kinds(full) and {j.seed for j in short} == {0}, jobs
    assert cut.grid.derived == cpu.grid.derived and cut.grid.bench_enabled == cpu.grid.bench_enabled
    # a list replaces the suite's: the cut's train_overrides start with the suite's own
    suite = cpu.config["train_overrides"]
    assert cut.config["train_overrides"][:len(suite)] == suite


def test_each_cut_training_config_is_the_suites_but_its_budget():
    """Composed as `hkt train` composes them: the same model and optimiser as the cpu suite's
    job (each task's profile), 10 steps, a short warm-up, evaluations on 2 batches."""
    cpu, cut = load_suite("cpu", config_dir=CONFIG_DIR), cut_suite()
    full = {(j.task, j.model, j.variant): c for j, c in job_configs(cpu.grid).items()}
    for job, cfg in job_configs(cut.grid).items():
        ref = full[(job.task, job.model, job.variant)]
        assert OmegaConf.to_container(cfg.model) == OmegaConf.to_container(ref.model), job
        assert cfg.optim.lr == ref.optim.lr and cfg.train.batch_size == ref.train.batch_size
        assert cfg.train.profile == ref.train.profile
        if job.task != "listops":  # the cut generates fewer ListOps examples
            assert OmegaConf.to_container(cfg.task) == OmegaConf.to_container(ref.task), job
        assert (cfg.train.max_steps, cfg.optim.warmup_steps) == (10, 2)
        assert (cfg.train.eval_batches, cfg.train.test_batches) == (2, 2)


def test_hkt_plan_reads_the_cut_as_the_workflow_does_from_its_two_files():
    """`hkt plan --suite config/suites/cpu.yaml --suite config/cuts/cpu.yaml` (the command the
    workflow's banner gives for the cut) plans the suite the workflow runs: the same name,
    config and jobs; the banner names the two files, not a `--suite cpu_cut` that no file has."""
    from hkt.errors import ConfigError
    from hkt.suite.plan import plan_command, workflow_plan

    files = [str(CONFIG_DIR / "suites" / "cpu.yaml"), str(CUT)]
    listed, workflow = load_suite(files, config_dir=CONFIG_DIR), cut_suite()
    assert listed.name == workflow.name == "cpu_cut"
    assert listed.config == workflow.config
    assert kinds(listed.grid.train_jobs()) == kinds(workflow.grid.train_jobs())
    named = load_suite(["cpu", str(CUT)], config_dir=CONFIG_DIR)  # the cut's suite key renames it
    assert (named.name, named.config) == ("cpu_cut", workflow.config)
    with pytest.raises(ConfigError, match=r"suite 'quick' after cpu: what follows the first "
                                          r"suite is a file merged over it"):
        load_suite(["cpu", "quick"], config_dir=CONFIG_DIR)
    command = f"`hkt plan --suite {files[0]} --suite {files[1]}`"
    assert plan_command(workflow, files) == command
    assert f"to see it now: {command}" in workflow_plan(workflow, plan=None, configfiles=files)
    node = "node.yaml"  # a named suite with a file over it: the name, then the file
    assert plan_command(load_suite("cpu", config_dir=CONFIG_DIR), [node]) == \
        "`hkt plan --suite cpu --suite node.yaml`"
