"""The published CPU suite (docs/results/cpu/) can be audited without rerunning it: its tables
come back byte for byte from the committed records, analyses and benchmark, with the code here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hkt.cli import main as hkt_main

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "results" / "cpu"
TABLES = ("main", "gap", "ablation", "kurtosis", "kernel", "truncation", "approximation", "cost")


@pytest.mark.skipif(not (PUBLISHED / "runs").is_dir(), reason="no published CPU suite in docs/results/cpu")
def test_the_published_tables_regenerate_from_the_published_records(tmp_path):
    # A copy: aggregate reads the records where they lie and must not touch docs/.
    runs = shutil.copytree(PUBLISHED / "runs", tmp_path / "runs")
    analyses = sorted(str(p) for p in (PUBLISHED / "analysis").glob("*/*/main/*/analysis.parquet"))
    assert len(list(runs.glob("*/*/*/*/record.json"))) == 33 and len(analyses) == 18
    out = tmp_path / "out"
    assert hkt_main(["aggregate", str(runs), "--out", str(out), "--main-variant", "main",
                     "--ablation-task", "listops", "--derived", "levels1=mha",
                     "--analyses", *analyses,
                     "--bench", str(PUBLISHED / "bench" / "attention.csv")]) == 0
    for name in TABLES:
        ours = (out / "tables" / f"{name}.csv").read_bytes()
        assert ours == (PUBLISHED / "tables" / f"{name}.csv").read_bytes(), f"tables/{name}.csv differs"


# ------------------------------------------------------------------------- no drift (issue 37)
# docs/results/NAME/ is the published run of config/suites/NAME.yaml. A suite edited after its
# run was published fails here until it is republished or given another name.
DOCS = PUBLISHED.parent
CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"


def _suite_config(name: str) -> dict:
    """The workflow config of suite ``name`` as its command resolves it: for ``cpu``, the README's
    main command on a machine without CUDA (``suite: auto``); else ``--configfile``."""
    import yaml

    from hkt.workflow.suites import merge, resolve_suite

    base = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
    if name == "cpu":
        config, _ = resolve_suite(base, CONFIG_DIR, cuda=lambda: False, env={})
        return config
    return merge(base, yaml.safe_load((CONFIG_DIR / "suites" / f"{name}.yaml").read_text()))


def _published_training_runs(root: Path) -> dict:
    """Job -> record of every training run published under ``root/runs`` (baselines aside)."""
    from hkt.record import load_record
    from hkt.workflow.grid import Job

    runs = {}
    for path in sorted((root / "runs").glob("*/*/*/seed*/record.json")):
        record = load_record(path)
        if record.get("external"):
            continue
        task, model, variant, seed = path.parent.relative_to(root / "runs").parts
        runs[Job(task, model, variant, int(seed.removeprefix("seed")))] = record
    return runs


@pytest.mark.parametrize("suite", ["cpu", "quick"])
def test_the_suite_composes_exactly_its_published_training_runs(suite):
    from hkt.workflow.configs import config_digest, train_config_digest
    from hkt.workflow.grid import Grid

    root = DOCS / suite
    if not (root / "runs").is_dir():
        pytest.skip(f"docs/results/{suite}/ holds no published records")
    grid = Grid(_suite_config(suite), CONFIG_DIR)
    published = _published_training_runs(root)
    jobs = grid.train_jobs()
    assert set(jobs) == set(published), (
        f"config/suites/{suite}.yaml trains {sorted(set(jobs) - set(published))} beyond "
        f"docs/results/{suite}/ and not {sorted(set(published) - set(jobs))}: republish the suite "
        "or give the changed one another name")
    changed = [job for job in jobs
               if train_config_digest(grid.train_overrides(job)) != config_digest(published[job]["config"])]
    assert not changed, (f"config/suites/{suite}.yaml now composes other configs than the published "
                         f"runs of {changed}: republish docs/results/{suite}/ or name the suite anew")
    if suite == "cpu":
        assert len(jobs) == 27
