"""The workflow's `sweep` (variants that select no model, trained with every model listed) and the
suites built on it: sensitivity (MHA and HKT at lr 3e-4 and 1e-3, issue 39), long (at 1e-3 for
20k steps and at 3e-3, issue 50) and s4_recipe (S4D at the S4 family's ListOps recipe). Their
jobs, and what their composed configs train."""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl
import pytest
import yaml
from omegaconf import OmegaConf

from hkt.workflow.grid import MAIN, Grid, GridError, Job
from hkt.workflow.suites import check_config
from hkt.workflow.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def suite_grid(name: str) -> Grid:
    return load_suite(name, config_dir=CONFIG_DIR).grid  # checked against the schema too


def sweep_grid(**sweep) -> Grid:
    cfg = copy.deepcopy(CONFIG)
    cfg["sweep"] = {**cfg["sweep"], "enabled": True, **sweep}
    check_config(cfg, SCHEMA)
    return Grid(cfg, CONFIG_DIR)


def test_the_sweep_is_off_by_default():
    cfg = copy.deepcopy(CONFIG)
    assert Grid(cfg, CONFIG_DIR).sweep_jobs() == []


def test_a_sweep_trains_every_variant_with_every_model_and_no_main_runs():
    g = sweep_grid(models=["mha", "hkt", "conv"], variants=["lr3e4", "lr1e3"], seeds=[4],
                   task="imdb")
    assert g.sweep_jobs() == [Job("imdb", m, v, 4) for v in ("lr3e4", "lr1e3")
                              for m in ("mha", "hkt", "conv")]
    paper = Grid(copy.deepcopy(CONFIG), CONFIG_DIR).train_jobs()
    assert g.train_jobs() == paper + g.sweep_jobs()  # added to the grid, nothing else changes
    assert g.train_overrides(Job("imdb", "conv", "lr1e3", 4))[:5] == [
        "task=imdb", "model=conv", "profile=paper", "seed=4", "variant=lr1e3"]


def test_a_sweep_without_seeds_takes_the_suite_s():
    assert {j.seed for j in sweep_grid(variants=["lr3e4"], seeds=None).sweep_jobs()} == \
        set(CONFIG["seeds"])


@pytest.mark.parametrize("sweep, message", [
    ({"variants": ["levels2"]}, "config/variant/levels2.yaml selects model 'hkt'"),
    ({"variants": ["lr9"]}, "sweep.variants names variant 'lr9'"),
    ({"variants": ["lr3e4"], "models": ["transformer"]}, "sweep.models names model 'transformer'"),
    ({"variants": ["lr3e4"], "task": "mnist"}, "sweep.task names task 'mnist'"),
])
def test_a_bad_sweep_is_named(sweep, message):
    with pytest.raises(GridError, match=message):
        sweep_grid(**sweep)


# ------------------------------------------------------------------------ the sensitivity suite
def test_the_sensitivity_suite_is_mha_and_hkt_at_two_learning_rates_three_seeds():
    g = suite_grid("sensitivity")
    assert set(g.train_jobs()) == {Job("listops", m, v, s) for m in ("mha", "hkt")
                                   for v in ("lr3e4", "lr1e3") for s in (0, 1, 2)}
    assert len(g.train_jobs()) == 12  # the lr-1e-4 default setting is the cpu suite's published runs (borrowed)
    # the ListOps rule references only: the lines its tables read the rates against
    assert {j.model for j in g.external_jobs()} == {"root_op_prior", "depth1_rule", "depth2_rule",
                                                    "depth3_rule", "exact_rule"}
    assert {j.task for j in g.external_jobs()} == {"listops"}
    assert g.analysis_jobs() == [] and not g.bench_enabled


def _plain(cfg) -> dict:
    """A composed config without what names the run rather than defines it, nor where it runs
    (the run-neutral train keys: the long suite runs 2 threads a job, the sensitivity suite ran
    on a GPU)."""
    from hkt.train.run_config import RUN_NEUTRAL_TRAIN_KEYS

    out = OmegaConf.to_container(cfg, resolve=True)
    for key in ("tracking", "variant", "seed"):
        out.pop(key)
    out["train"] = {k: v for k, v in out["train"].items() if k not in RUN_NEUTRAL_TRAIN_KEYS}
    return out


def test_the_sensitivity_runs_are_the_published_cpu_runs_but_for_the_learning_rate():
    from hkt.workflow.job_configs import job_configs

    sens = suite_grid("sensitivity")
    cpu = suite_grid("cpu")
    mine = job_configs(sens)
    lrs = {"lr3e4": 3e-4, "lr1e3": 1e-3}
    published = job_configs(cpu, [Job("listops", m, MAIN, s) for m in ("mha", "hkt")
                                  for s in (0, 1, 2)])
    for job, cfg in mine.items():
        ref = _plain(published[Job("listops", job.model, MAIN, job.seed)])
        assert ref["optim"]["lr"] == pytest.approx(1e-4)  # the paper profile's
        assert cfg.optim.lr == pytest.approx(lrs[job.variant])
        assert cfg.variant == job.variant and cfg.model.name == job.model
        got = _plain(cfg)
        got["optim"]["lr"] = ref["optim"]["lr"]
        assert got == ref  # same model, data, budget, warmup, schedule and threads


# ------------------------------------------------------------------------------ the long suite
def test_the_long_suite_is_mha_and_hkt_at_20k_steps_and_at_the_grid_s_edge_five_seeds():
    g = suite_grid("long")
    assert set(g.train_jobs()) == {Job("listops", m, v, s) for m in ("mha", "hkt")
                                   for v in ("lr1e3_steps20k", "lr3e3") for s in range(5)}
    assert g.external_jobs() == [] and g.analysis_jobs() == [] and not g.bench_enabled
    # its tables set the runs beside both publications they extend
    assert g.borrow_args() == ["--borrow", "docs/results/cpu/runs",
                               "--borrow", "docs/results/sensitivity/runs"]
    for borrowed in ("docs/results/cpu/runs", "docs/results/sensitivity/runs"):
        assert (ROOT / borrowed).is_dir()


def test_the_long_runs_are_the_published_sensitivity_runs_but_for_rate_and_steps():
    """lr1e3_steps20k is lr1e3 (published) with twice the steps, the cosine over all of them;
    lr3e3 is lr1e3 with three times the rate: nothing else of model, data or budget differs."""
    from hkt.train.optim import lr_factor
    from hkt.workflow.job_configs import job_configs

    mine = job_configs(suite_grid("long"))
    published = job_configs(suite_grid("sensitivity"))
    for job, cfg in mine.items():
        # the published seeds are 0-2; a job's seed is no key of its config (the job names it)
        ref = _plain(published[Job("listops", job.model, "lr1e3", job.seed if job.seed < 3 else 0)])
        got = _plain(cfg)
        if job.variant == "lr1e3_steps20k":
            assert (cfg.train.max_steps, cfg.optim.lr) == (20_000, pytest.approx(1e-3))
            got["train"]["max_steps"] = ref["train"]["max_steps"]
        else:
            assert (cfg.train.max_steps, cfg.optim.lr) == (10_000, pytest.approx(3e-3))
            got["optim"]["lr"] = ref["optim"]["lr"]
        assert got == ref
    # the schedule is stretched, not cut: half the peak rate at step 10k, zero only at 20k
    cfg = mine[Job("listops", "mha", "lr1e3_steps20k", 0)]
    at = {step: lr_factor(step, warmup=cfg.optim.warmup_steps, total=cfg.train.max_steps,
                          schedule=cfg.optim.schedule, min_ratio=cfg.optim.min_lr_ratio)
          for step in (10_500, 20_000)}
    assert at[10_500] == pytest.approx(0.5, abs=0.05) and at[20_000] == pytest.approx(
        cfg.optim.min_lr_ratio)


def test_a_sweep_borrows_one_path_or_a_list():
    assert sweep_grid(variants=["lr3e4"], borrow="a/runs").borrow_args() == ["--borrow", "a/runs"]
    assert sweep_grid(variants=["lr3e4"], borrow=["a/runs", "b/runs"]).borrow_args() \
        == ["--borrow", "a/runs", "--borrow", "b/runs"]
    assert sweep_grid(variants=["lr3e4"], borrow=None).borrow_args() == []
    with pytest.raises(GridError, match="borrow"):
        sweep_grid(variants=["lr3e4"], borrow=[])


# ------------------------------------------------------------------------- the recipe suites
def test_the_s4_recipe_suite_is_one_s4d_run_in_s4s_listops_experiment_on_our_listops():
    """S4's block, layer and optimiser (config/profile/s4_recipe.yaml and
    config/profile_model/s4_recipe_s4d.yaml; tests/test_s4d.py checks each value)."""
    from hkt.workflow.job_configs import job_configs

    g = suite_grid("s4_recipe")
    assert g.train_jobs() == [Job("listops", "s4d", MAIN, 0)]
    assert g.external_jobs() == [] and g.analysis_jobs() == []
    assert g.config["train_overrides"] == []  # the recipe is in its files, not in overrides
    cfg = job_configs(g)[Job("listops", "s4d", MAIN, 0)]
    assert cfg.task.id == "listops" and cfg.task.max_length == 512  # ours, not LRA's T = 2000
    assert (cfg.model.name, cfg.model.n_layers, cfg.model.d_model, cfg.model.d_ffn) == ("s4d", 6, 256, 0)
    assert (cfg.model.norm, cfg.model.norm_place, cfg.model.positional) == ("batch", "post", "none")
    assert (cfg.train.batch_size, cfg.train.max_steps, cfg.optim.warmup_steps) == (32, 120000, 12000)
    assert cfg.optim.lr == pytest.approx(0.01) and cfg.optim.weight_decay == pytest.approx(0.05)
    assert cfg.model.mixer.ssm_lr == pytest.approx(1e-3) and cfg.model.mixer.dt_lr == pytest.approx(0.01)
    assert cfg.train.checkpoint_every <= cfg.train.max_steps // 40  # resumable in pieces


def test_the_s5_recipe_suite_is_s5s_listops_sizes_in_our_block():
    """The recipe that made docs/results/s5_recipe/'s partial curve (issue 39), renamed: it
    composes that run's config but for the profile's name."""
    from hkt.workflow.job_configs import job_configs

    g = suite_grid("s5_recipe")
    assert g.train_jobs() == [Job("listops", "s4d", MAIN, 0)]
    cfg = job_configs(g)[Job("listops", "s4d", MAIN, 0)]
    assert (cfg.model.name, cfg.model.n_layers, cfg.model.d_model) == ("s4d", 8, 128)
    assert cfg.model.dropout == 0.0
    epochs = cfg.train.max_steps * cfg.train.batch_size / cfg.task.prepare.splits.train
    assert cfg.train.batch_size == 50 and epochs == 40
    assert cfg.optim.warmup_steps * cfg.train.batch_size == cfg.task.prepare.splits.train
    assert cfg.optim.lr == pytest.approx(3e-3) and cfg.model.mixer.ssm_lr == pytest.approx(1e-3)
    assert cfg.optim.weight_decay == pytest.approx(0.04)
    published = yaml.safe_load((ROOT / "docs/results/s5_recipe/runs/listops/s4d/main/seed0/"
                                "config.yaml").read_text())
    assert published["train"].pop("profile") == "s4_recipe" and cfg.train.profile == "s5_recipe"
    from hkt.train.run_config import strip_for_compare

    now = strip_for_compare(cfg)
    now["train"].pop("profile")
    assert strip_for_compare(published) == now


# ------------------------------------------------------------------------------- the table
LR = {"main": 1e-4, "lr1e3": 1e-3, "lr3e4": 3e-4, "levels2": 1e-4}


def _runs(variants: tuple[str, ...]) -> pl.DataFrame:
    return pl.DataFrame([
        {"task": "listops", "length": 512, "model": m, "variant": v, "seed": s, "lr": LR[v],
         "val_accuracy": 0.3 + 0.01 * s, "test_accuracy": 0.3, "n_params": 1, "ms_per_step": 1.0,
         "profile": "paper", "test_examples": 2000, "d_ffn": 128,
         "levels": 3 if m == "hkt" else None, "stride": 2 if m == "hkt" else None,
         "kernel_size": None, "fusion": None, "upsample": None}
        for m in ("mha", "hkt") for v in variants for s in (0, 1)])


def test_the_ablation_table_names_each_row_s_learning_rate():
    from hkt.report.result_tables import setting_notes
    from hkt.report.writers import learning_rate
    from hkt.report.tables import ablation_table

    assert [learning_rate(v) for v in (2.5e-4, 1e-2, 3e-3)] == ["2.5e-4", "1e-2", "3e-3"]
    runs = _runs(("main", "lr1e3", "lr3e4"))
    notes = setting_notes(runs, "listops")
    # each row's own, read from its runs (the records' optim.lr)
    assert notes == {(m, v): lr for m in ("mha", "hkt") for v, lr in
                     (("lr1e3", "lr=1e-3"), ("lr3e4", "lr=3e-4"), ("main", "lr=1e-4"))}
    t = ablation_table(runs, "listops", 512, notes=notes)
    settings = dict(zip(zip(t["model"], t["variant"]), t["setting"]))
    assert settings[("hkt", "lr1e3")] == "HKT L=3, s=2, lr=1e-3"
    assert settings[("mha", "lr3e4")] == "MHA (d_ffn=128), lr=3e-4"
    assert settings[("hkt", "main")] == "HKT L=3, s=2, lr=1e-4"


def test_a_table_without_learning_rate_variants_names_none():
    from hkt.report.result_tables import setting_notes

    assert setting_notes(_runs(("main", "levels2")), "listops") == {}
