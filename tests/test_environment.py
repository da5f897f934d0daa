"""hkt.environment (installed versions and their digest) and how runs and `hkt aggregate` use it."""

from __future__ import annotations

import json
import platform
import re
from importlib import metadata
from types import SimpleNamespace

import polars as pl

from hkt import environment
from hkt.cli.main import main as hkt_main
from hkt.report.mlflow_runs import mlflow_row
from hkt.runs_frame import RUN_COLUMNS
from hkt.report import environments
from test_report_aggregate import make_record, write_records


def test_environment_lists_installed_versions_python_and_platform():
    env = environment.environment()
    assert env["packages"]["pytest"] == metadata.version("pytest")
    assert env["packages"]["pyyaml"] == metadata.version("PyYAML")  # canonical names
    assert list(env["packages"]) == sorted(env["packages"])
    assert env["python_version"] == platform.python_version()
    assert env["machine"] == platform.machine() and env["platform"] == platform.platform()
    assert re.fullmatch(r"[0-9a-f]{12}", env["digest"])
    assert environment.digest() == env["digest"] == environment.digest(env)


def test_digest_names_the_versions_not_the_kernel():
    env = environment.environment()
    other_kernel = dict(env, platform="Linux-9.9.9-other-kernel", executable="/elsewhere/python")
    assert environment.digest(other_kernel) == env["digest"]
    bumped = dict(env, packages=dict(env["packages"], pytest="0.0.1"))
    assert environment.digest(bumped) != env["digest"]
    assert environment.digest(dict(env, python_version="3.99.0")) != env["digest"]


def test_save_and_load_round_trip(tmp_path):
    digest = environment.save(tmp_path / "run")
    saved = environment.load(tmp_path / "run")
    assert saved == environment.environment() and saved["digest"] == digest
    assert environment.load(tmp_path / "nowhere") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert environment.load(tmp_path / "bad.json") is None


def test_package_differences():
    a = {"python_version": "3.11.7", "system": "Linux", "machine": "x86_64",
         "packages": {"numpy": "2.4.6", "polars": "2.1.0", "only-a": "1.0"}}
    b = {"python_version": "3.12.1", "system": "Linux", "machine": "x86_64",
         "packages": {"numpy": "2.4.6", "polars": "2.2.0", "only-b": "3.0"}}
    assert environment.package_differences({"a": a, "b": b}) == [
        ("(python)", ["3.11.7", "3.12.1"]), ("only-a", ["1.0", None]),
        ("only-b", [None, "3.0"]), ("polars", ["2.1.0", "2.2.0"])]


def test_tracker_logs_environment_artifact_and_digest_tag(tmp_path):
    from mlflow.tracking import MlflowClient

    from hkt.train.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "env", "run")
    run_id = tracker.start(tags={"task": "listops"})
    tracker.finish()
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(run_id).data.tags["env_digest"] == environment.digest()
    path = client.download_artifacts(run_id, "environment.json", str(tmp_path))
    assert json.loads(open(path).read())["packages"] == environment.environment()["packages"]


def _two_environments(tmp_path):
    """Runs of one suite from two environments (polars differs) and two commits."""
    env = environment.environment()
    old = dict(env, packages=dict(env["packages"], polars="0.20.0", **{"only-old": "1.0"}))
    old["digest"] = environment.digest(old)
    records = []
    for seed in range(2):
        records.append(make_record(model="hkt", seed=seed, env_digest=env["digest"],
                                   git_commit="a" * 40))
        records.append(make_record(model="mha", seed=seed, env_digest=old["digest"],
                                   git_commit="b" * 40))
    root = write_records(tmp_path / "runs", records)
    for path in root.rglob("record.json"):
        rec = json.loads(path.read_text())
        chosen = env if rec["env_digest"] == env["digest"] else old
        (path.parent / "environment.json").write_text(json.dumps(chosen))
    return root, env, old


def test_aggregate_warns_about_mixed_environments_and_lists_packages(tmp_path, capsys):
    root, env, old = _two_environments(tmp_path)
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(root), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "hkt: warning:" in err and "2 different software environments" in err
    assert "2 different git commits" in err
    summary = (out / "summary.md").read_text()
    section = summary.split("## Environment", 1)[1].split("## Files", 1)[0]
    assert "**Warning:**" in section
    versions = {env["digest"]: (env["packages"]["polars"], "—"), old["digest"]: ("0.20.0", "1.0")}
    columns = sorted(versions)  # one column per environment, by digest
    assert f"| package | `{columns[0]}` | `{columns[1]}` |" in section
    assert f"| polars | {versions[columns[0]][0]} | {versions[columns[1]][0]} |" in section
    assert f"| only-old | {versions[columns[0]][1]} | {versions[columns[1]][1]} |" in section
    assert "| pytest |" not in section  # the same in both: not listed
    runs = pl.read_csv(out / "tables" / "runs.csv")
    assert set(runs["env_digest"]) == {env["digest"], old["digest"]}


def test_aggregate_is_quiet_for_one_environment(tmp_path, capsys):
    digest = environment.digest()
    records = [make_record(model=m, seed=s, env_digest=digest, git_commit="c" * 40)
               for m in ("hkt", "mha") for s in range(2)]
    records.append(make_record(model="majority", external="other-tool"))  # no digest recorded
    out = tmp_path / "results"
    assert hkt_main(["aggregate", str(write_records(tmp_path / "runs", records)),
                     "--out", str(out)]) == 0
    assert "warning" not in capsys.readouterr().err
    summary = (out / "summary.md").read_text()
    assert f"All runs: software environment `{digest}`, commit `{'c' * 12}`." in summary
    assert "1 run(s) record no environment digest" in summary


def test_mlflow_runs_carry_the_digest_tag():
    run = SimpleNamespace(
        data=SimpleNamespace(tags={"task": "listops", "model": "mha", "env_digest": "abc",
                                   "git_commit": "d" * 40},
                             params={}, metrics={"test_accuracy": 0.5}),
        info=SimpleNamespace(run_id="r1", start_time=None))
    row = mlflow_row(run, "sqlite:///x.db", "hkt-listops")
    assert row["env_digest"] == "abc" and row["git_commit"] == "d" * 40
    runs = pl.DataFrame([row, dict(row, env_digest="xyz", source="mlflow:r2")],
                        schema=RUN_COLUMNS, orient="row")
    assert any("2 different software environments" in w
               for w in environments.mixed_warnings(runs))
