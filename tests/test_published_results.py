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
