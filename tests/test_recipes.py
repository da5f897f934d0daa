"""The recipes of docs/extending.md ("Adding a mixer, a baseline or a task"), followed as written in a
temporary copy of the repository: a throwaway mixer, baseline of ours and task, each added by
the files and config lines its recipe names and nothing more, reach the CPU suite. Its dry run
trains the mixer on every task and every model on the task, and runs the baseline on every
task; `hkt baseline --help` lists the baseline, `hkt baseline NAME` runs it; the mixer builds by
name and takes a forward and backward step; `hkt train --print-config` composes both.

Recipe (a′), a new model as a copy of ``config/model/mha.yaml`` in ``main.models``, as a new
user follows it: every suite's grid gains exactly that model's jobs, and a run of it is
labelled with the file's name while it builds (and digests as) the original."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import write_prepared_data
from test_workflow import ROOT, suite

from hkt.workflow.grid import MAIN, Job

BIN = Path(sys.executable).parent  # the environment's `snakemake` and `hkt`, as in CI's .venv
COPIED = ("hkt", "config", "workflow", "pyproject.toml", "environment.yml")
# what the shell of the test run may hold that would point a command away from the copy
UNSET = ("HKT_CONFIG_DIR", "HKT_SUITE", "HKT_RESULTS_DIR", "MLFLOW_TRACKING_URI")

MIXER, BASELINE, TASK = "meanmix", "firstlabel", "listops_short"

# recipe (a), step 1: hkt/mixers/NAME.py
MIXER_SOURCE = '''"""Each position plus the mean of the positions it sees: a throwaway mixer."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hkt.value_checks import number
from hkt.mixers.base import TokenMixer
from hkt.mixers.catalog import register


@dataclass
class MeanMixConfig:
    """meanmix's own settings: ``scale`` weighs the mean against the position itself."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        number(self.scale, "scale", 0.0)


@register("meanmix")
class MeanMixer(TokenMixer):
    config_class = MeanMixConfig
    supports_internals = False

    def build(self, config: MeanMixConfig) -> None:
        self.value = nn.Linear(self.d_model, self.d_model)
        self.out = nn.Linear(self.d_model, self.d_model)
        self.drop = nn.Dropout(self.dropout)

    def forward(self, x: Tensor, key_mask: Tensor | None = None, *,
                return_internals: bool = False) -> Tensor:
        if return_internals:
            raise NotImplementedError("meanmix has no queries, keys or scores")
        real = torch.ones_like(x[..., 0]) if key_mask is None else key_mask.to(x.dtype)
        v = self.value(x) * real.unsqueeze(-1)  # padded positions add nothing
        if self.causal:  # the mean of the positions up to each
            total, count = v.cumsum(1), real.cumsum(1)
        else:
            total, count = v.sum(1, keepdim=True), real.sum(1, keepdim=True)
        mean = total / count.clamp(min=1).unsqueeze(-1)
        return self.out(self.drop(v + self.config.scale * mean))
'''

# recipe (a), step 2: config/model/NAME.yaml
MODEL_YAML = f"""defaults:
  - /schema/model/{MIXER}@_here_
  - _self_
mixer: {{scale: 0.5}}
"""

# recipe (b), "a baseline of ours", step 1: hkt/baselines/NAME.py
BASELINE_SOURCE = '''"""First label: the label of the first training example, always (a throwaway baseline).

It scores the share of that label in each split.
"""

from __future__ import annotations

import argparse

import numpy as np

from hkt.baselines import register
from hkt.baselines.run import Fit, Splits, add_run_arguments, answers, run_command


@register("firstlabel")
def fit(data: Splits, *, seed: int = 0) -> Fit:
    label = int(data.train.labels[0])
    return Fit(predictions={s: answers(split, np.full(len(split), label), data.num_classes)
                            for s, split in (("val", data.val), ("test", data.test))},
               extra={"first_label": label})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_command("firstlabel", args)
'''
BASELINE_SUMMARY = "First label: the label of the first training example, always (a throwaway baseline)."

# recipe (c), step 1: config/task/NAME.yaml, a new length of an existing family
TASK_YAML = f"""defaults:
  - listops
  - _self_

id: {TASK}
max_length: 256
prepare:
  min_length: 64
"""

# In the copy, with its hkt imported: the mixer by name, one forward and backward, and what
# `hkt train --print-config` prints for it on the new task. Prints one JSON object.
PROBE = f"""
import contextlib, io, json
import torch, yaml
import hkt
from hkt.cli.main import main
from hkt.mixers import build_mixer

torch.manual_seed(0)
mixer = build_mixer({MIXER!r}, d_model=8, n_heads=2, causal=True)
x = torch.randn(2, 5, 8, requires_grad=True)
key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
y = mixer(x, key_mask=key_mask)
y[key_mask].square().sum().backward()
(seen,) = torch.autograd.grad(mixer(x, key_mask=key_mask)[0, 2].sum(), x)
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    code = main(["train", "--print-config", "model={MIXER}", "task={TASK}", "profile=cpu"])
cfg = yaml.safe_load(printed.getvalue())
print(json.dumps({{
    "hkt": hkt.__file__, "shape": list(y.shape), "finite": bool(torch.isfinite(y).all()),
    "param_grads": {{n: p.grad.norm().item() for n, p in mixer.named_parameters()}},
    "padded_grad": x.grad[1, 3:].abs().max().item(),
    "past_grad": seen[0, :3].abs().min().item(), "future_grad": seen[0, 3:].abs().max().item(),
    "print_config": code, "model": cfg["model"], "task": cfg["task"]}}))
"""


def copy_env(copy: Path) -> dict[str, str]:
    """The environment of a command run in the copy: its hkt first on the import path, the
    environment's commands on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["PYTHONPATH"] = str(copy)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def run_in(copy: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    r = subprocess.run(args, cwd=copy, env=copy_env(copy), capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{' '.join(args)}:\n{(r.stdout + r.stderr)[-4000:]}"
    return r


def follow_recipes(copy: Path) -> None:
    """The three recipes, step by step, as docs/extending.md gives them."""
    (copy / "hkt" / "mixers" / f"{MIXER}.py").write_text(MIXER_SOURCE)  # (a) 1
    (copy / "config" / "model" / f"{MIXER}.yaml").write_text(MODEL_YAML)  # (a) 2
    (copy / "hkt" / "baselines" / f"{BASELINE}.py").write_text(BASELINE_SOURCE)  # (b) 1
    (copy / "config" / "task" / f"{TASK}.yaml").write_text(TASK_YAML)  # (c) 1
    path = copy / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["main"]["models"].append(MIXER)  # (a) 5
    config["external"][BASELINE] = {"enabled": True, "tasks": None, "seeds": [0]}  # (b) 2
    config["tasks"][TASK] = {"config": TASK, "prepare": [], "source": None}  # (c) 3
    config["main"]["tasks"].append(TASK)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def planned(output: str) -> dict[str, dict[str, str]]:
    """A dry run's jobs (-p): rule -> {output file: its shell command}."""
    jobs: dict[str, dict[str, str]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", output):
        rule = re.match(r"(?:local)?rule (\w+):\n", block)
        out = re.search(r"^\s+output: (.*)$", block, re.M)
        if rule and out:
            shell = re.search(r"^Shell command: (.*)$", block, re.M)
            for path in out.group(1).split(", "):
                jobs.setdefault(rule.group(1), {})[path] = shell.group(1) if shell else ""
    return jobs


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """A copy of the repository with the three recipes followed."""
    repo = tmp_path_factory.mktemp("recipes") / "repo"
    for part in COPIED:
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / part, repo / part)
    follow_recipes(repo)
    return repo


@pytest.fixture(scope="module")
def dry_run(copy: Path) -> tuple[Path, str]:
    """The CPU suite's dry run in the copy, as docs/extending.md runs it (-p: the jobs' commands)."""
    results = copy.parent / "results"
    r = run_in(copy, str(BIN / "snakemake"), "-n", "-p", "--configfile", "config/suites/cpu.yaml",
               "--config", f"results_dir={results}")
    return results, r.stdout + r.stderr


def test_the_dry_run_is_the_cpu_suite(dry_run):
    assert "hkt: suite cpu (config/suites/cpu.yaml)" in dry_run[1]


def check_jobs(jobs: dict[str, str], expected: dict[str, str]) -> None:
    """Every expected output is a job's, whose command holds its expected text."""
    missing = sorted(set(expected) - set(jobs))
    assert not missing, f"{len(missing)} jobs missing: {missing}"
    wrong = {path: jobs[path] for path, text in expected.items() if text not in jobs[path]}
    assert not wrong, f"commands without their expected arguments: {wrong}"


def test_the_new_mixer_trains_on_every_task_and_every_model_on_the_new_task(dry_run):
    results, output = dry_run
    cpu = suite("cpu")  # the suite as published, before the recipes
    check_jobs(planned(output)["train"], {
        f"{results}/runs/{task}/{model}/main/seed{seed}/record.json":
            f" task={task} model={model} profile="
        for task in [*cpu["main"]["tasks"], TASK] for model in [*cpu["main"]["models"], MIXER]
        for seed in cpu["seeds"]})


def test_the_new_baseline_runs_on_every_task(dry_run):
    results, output = dry_run
    run = f"{results}/runs/{{}}/{BASELINE}/main/seed0"
    check_jobs(planned(output)["external"], {
        f"{run.format(task)}/record.json":
            f" baseline {BASELINE} --data {results}/data/{task} --out {run.format(task)} "
        for task in [*suite("cpu")["main"]["tasks"], TASK]})


def test_hkt_baseline_lists_and_runs_the_new_baseline(copy, tmp_path):
    listed = " ".join(run_in(copy, str(BIN / "hkt"), "baseline", "--help").stdout.split())
    assert f"{BASELINE} {BASELINE_SUMMARY}" in listed, listed  # its name and first paragraph
    data = write_prepared_data(tmp_path / "data", "listops")
    run_in(copy, str(BIN / "hkt"), "baseline", BASELINE, "--data", str(data), "--out",
           str(tmp_path / "run"))
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    first = pq.read_table(data / "train.parquet").column("label")[0].as_py()
    test = pq.read_table(data / "test.parquet").column("label").to_pylist()
    assert (record["model"], record["first_label"]) == (BASELINE, first)
    assert record["test_accuracy"] == pytest.approx(test.count(first) / len(test))


def test_the_new_mixer_builds_by_name_and_composes_with_the_new_task(copy):
    probe = json.loads(run_in(copy, sys.executable, "-c", PROBE).stdout.splitlines()[-1])
    assert Path(probe["hkt"]).is_relative_to(copy)  # the copy's hkt, not the checkout's
    assert probe["shape"] == [2, 5, 8] and probe["finite"]
    assert all(0 < g < float("inf") for g in probe["param_grads"].values()), probe["param_grads"]
    assert probe["padded_grad"] == 0 and probe["future_grad"] == 0 and probe["past_grad"] > 0
    assert probe["print_config"] == 0
    assert (probe["model"]["name"], probe["model"]["mixer"]) == (MIXER, {"scale": 0.5})
    assert (probe["task"]["id"], probe["task"]["family"], probe["task"]["max_length"]) \
        == (TASK, "listops", 256)



# recipe (a′): a copy of config/model/mha.yaml as a new model
COPIED_MODEL = "mha_copy"
CONFIG_MAIN_MODELS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["main"]["models"]


def copy_model(tmp_path: Path) -> Path:
    """A copy of ``config/`` with recipe (a′) followed: ``config/model/mha.yaml`` copied to
    ``config/model/COPIED_MODEL.yaml``, that name added to ``main.models``."""
    cdir = tmp_path / "config"
    shutil.copytree(ROOT / "config", cdir)
    shutil.copy(cdir / "model" / "mha.yaml", cdir / "model" / f"{COPIED_MODEL}.yaml")
    path = cdir / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["main"]["models"].append(COPIED_MODEL)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return cdir


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "config" / "suites").glob("*.yaml")))
def test_a_copied_model_adds_exactly_its_own_jobs_to_each_suite(tmp_path, name):
    from hkt.workflow.suites import load_suite

    before = load_suite(name, config_dir=ROOT / "config")
    after = load_suite(name, config_dir=copy_model(tmp_path))
    # a suite that takes config.yaml's main.models takes the new model; one with its own does not
    inherits = before.config["main"]["models"] == CONFIG_MAIN_MODELS
    assert (COPIED_MODEL in after.config["main"]["models"]) == inherits
    gained = {Job(task, COPIED_MODEL, MAIN, seed) for task in after.config["main"]["tasks"]
              for seed in after.grid.seeds} if inherits else set()
    old, new = before.grid.train_jobs(), after.grid.train_jobs()
    assert len(new) == len(set(new)) and set(new) == set(old) | gained and gained.isdisjoint(old)
    assert set(after.grid.records()) == set(before.grid.records()) | {after.grid.record(j)
                                                                      for j in gained}
    for jobs in ("external_jobs", "analysis_jobs"):
        assert getattr(after.grid, jobs)() == getattr(before.grid, jobs)(), jobs


def test_a_copied_model_trains_under_its_own_name(tmp_path, monkeypatch, prepared_data):
    import io

    from hkt.train.run_config import load_config
    from hkt.train.loop import train
    from hkt.train.run_metadata import run_tags
    from hkt.workflow.job_configs import check_analysable, config_digest

    monkeypatch.setenv("HKT_CONFIG_DIR", str(copy_model(tmp_path)))
    overrides = ["task=listops", "profile=smoke", "tracking.enabled=false"]
    cfg = load_config([f"model={COPIED_MODEL}", *overrides])
    record = train(cfg, prepared_data("listops"), tmp_path / "run", stream=io.StringIO(),
                   progress=False)
    assert record["model"] == COPIED_MODEL and record["variant"] == MAIN
    assert record["config"]["tracking"]["run_name"] == f"listops-{COPIED_MODEL}-main-s0"
    assert record["config"]["model"]["name"] == "mha"  # the mixer it builds
    tags = run_tags(cfg, device="cpu", git=(None, None), run_dir=tmp_path, data_dir=tmp_path,
                    checksums={})
    assert tags["model"] == COPIED_MODEL  # MLflow's model tag, as the record's
    # the same computation as mha's: the label is in no config digest
    assert config_digest(cfg) == config_digest(load_config(["model=mha", *overrides]))
    # analyze.models may name it: its mixer is the one its file builds (mha, which has internals)
    check_analysable([COPIED_MODEL])
