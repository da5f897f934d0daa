"""The two scripts that publish results and check them: scripts/publish_results.py (what goes to
docs/results/) and scripts/identity_check.py (two results directories, the same numbers)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def script(name: str):
    spec = importlib.util.spec_from_file_location(f"hkt_script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def results_dir(root: Path, *, val: float = 0.35, env: str = '{"torch": "2.13.0"}') -> Path:
    """A finished suite's results directory in miniature: two runs, one analysis, tables."""
    for run in ("listops/hkt/main/seed0", "listops/majority/main/seed0"):
        d = root / "runs" / run
        (d / "checkpoints").mkdir(parents=True)
        (d / "checkpoints" / "last.pt").write_bytes(b"\0" * 64)
        (d / "record.json").write_text(json.dumps({"test_accuracy": 0.3}))
        (d / "config.yaml").write_text("seed: 0\n")
        (d / "environment.json").write_text(env)
    (root / "runs/listops/hkt/main/seed0/history.csv").write_text(
        f"step,train_loss,samples_per_s,val_acc\n10,2.3,40.1,\n20,2.2,39.0,{val}\n")
    a = root / "analysis/listops/hkt/main/seed0"
    a.mkdir(parents=True)
    for name in ("summary.md", "settings.json", "analysis.parquet"):
        (a / name).write_text("x")
    (root / "tables").mkdir()
    (root / "tables/main.csv").write_text(f"task,model,val\nlistops,hkt,{val}\n")
    (root / "figures").mkdir()
    (root / "figures/val_curves.png").write_bytes(b"png")
    (root / "bench").mkdir()
    (root / "bench/attention.csv").write_text("T,ratio\n256,2.5\n")
    (root / "data").mkdir()
    (root / "data/train.parquet").write_bytes(b"data")
    (root / "plan").mkdir()
    for name in ("suite.json", "sessions.json", "calibration.json"):  # the cache stays behind
        (root / "plan" / name).write_text("{}")
    (root / "summary.md").write_text("# summary\n")
    return root


def test_publish_copies_every_record_and_history_and_nothing_large(tmp_path):
    publish = script("publish_results")
    res = results_dir(tmp_path / "res")
    dest = tmp_path / "docs" / "cpu"
    assert publish.main([str(res), str(dest)]) == 0
    files = sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file())
    assert files == sorted([
        "summary.md", "tables/main.csv", "figures/val_curves.png", "bench/attention.csv", "environment.json",
        "plan/suite.json", "plan/sessions.json",
        "runs/listops/hkt/main/seed0/record.json", "runs/listops/hkt/main/seed0/history.csv",
        "runs/listops/hkt/main/seed0/config.yaml", "runs/listops/majority/main/seed0/record.json",
        "runs/listops/majority/main/seed0/config.yaml",
        "analysis/listops/hkt/main/seed0/summary.md", "analysis/listops/hkt/main/seed0/settings.json"])
    assert json.loads((dest / "environment.json").read_text()) == {"torch": "2.13.0"}
    # a second publication over the first needs --replace, and then holds only the new copy
    with pytest.raises(SystemExit, match="already holds files; pass --replace"):
        publish.main([str(res), str(dest)])
    (dest / "stale.md").write_text("old")
    publish.main([str(res), str(dest), "--replace"])
    assert not (dest / "stale.md").exists() and (dest / "summary.md").exists()


def test_publish_refuses_an_unfinished_suite_and_mixed_environments(tmp_path):
    publish = script("publish_results")
    res = results_dir(tmp_path / "res")
    (res / "summary.md").unlink()
    with pytest.raises(SystemExit, match="no summary.md: the suite has not finished"):
        publish.main([str(res), str(tmp_path / "d1")])
    res2 = results_dir(tmp_path / "res2")
    (res2 / "runs/listops/majority/main/seed0/environment.json").write_text('{"torch": "2.12"}')
    with pytest.raises(SystemExit, match="2 different environments"):
        publish.main([str(res2), str(tmp_path / "d2")])
    assert not (tmp_path / "d2").exists()


def test_identity_check_sees_one_changed_step_and_ignores_timings(tmp_path, capsys):
    check = script("identity_check")
    a = results_dir(tmp_path / "a")
    b = results_dir(tmp_path / "b")
    hist = b / "runs/listops/hkt/main/seed0/history.csv"
    hist.write_text(hist.read_text().replace("40.1", "55.5"))  # a timing: differs by nature
    assert check.main(a, b) == 0
    assert "identical" in capsys.readouterr().out
    c = results_dir(tmp_path / "c")
    h = c / "runs/listops/hkt/main/seed0/history.csv"
    h.write_text(h.read_text().replace("10,2.3", "10,2.4"))  # one training loss
    assert check.main(a, c) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT  runs/listops/hkt/main/seed0/history.csv" in out and "same  main.csv" in out
    d = results_dir(tmp_path / "d", val=0.36)
    assert check.main(a, d) == 1
    assert "DIFFERENT  main.csv" in capsys.readouterr().out
