"""One reading of the workflow (hkt/workflow/invocation.py) without Snakemake: reading makes a
frozen object and changes nothing (no file, no environment variable); starting the jobs
(hkt/workflow/handlers.py) does what it must, in order (the environment, the lock, the store,
the plan, the session)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import yaml

from hkt.provenance import SUITE_ENV
from hkt.workflow.handlers import start
from hkt.report.aggregate import REPORT_COMMAND_ENV
from hkt.workflow.invocation import (ENV_PASSED, apply_env, damage_warning, damaged_records,
                                     read_invocation)

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
#: start()'s description of the plan and heartbeat, for a start that must stop before the plan
UNPLANNED = dict(describe=lambda suite, plan: pytest.fail("described"),
                 heartbeat_s=lambda: pytest.fail("heartbeat read"))


@pytest.fixture
def environ():
    """This process's environment, as it was after the test (applying a workflow's changes it)."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def read(results: Path, main: bool = True):
    """The invocation of `snakemake --config suite=smoke results_dir=RESULTS`."""
    given = {"suite": "smoke", "results_dir": str(results)}
    return read_invocation({**CONFIG, **given}, CONFIG_DIR, main=main, overrides=given,
                           command_line=given, cuda=lambda: False)


@pytest.fixture(scope="module")
def reading(tmp_path_factory):
    """One reading (it composes every training config of the suite), and this process's
    environment before and after it."""
    results = tmp_path_factory.mktemp("reading") / "res"
    before = dict(os.environ)
    inv = read(results)
    return inv, before, dict(os.environ)


def test_reading_writes_nothing_and_sets_no_environment(reading):
    inv, before, after = reading
    assert after == before
    res = Path(inv.results)
    assert not res.exists() and list(res.parent.iterdir()) == []
    assert inv.suite.name == "smoke" and len(inv.digests) > 0 and inv.damaged == ()
    assert inv.report_command and inv.local_gpu_slots
    with pytest.raises(dataclasses.FrozenInstanceError):
        inv.damaged = ()  # type: ignore[misc]


def test_the_jobs_environment_is_applied_only_when_asked(reading, environ):
    inv = reading[0]
    env = inv.env
    res = Path(inv.results).resolve()
    assert env[SUITE_ENV] == "smoke" and env["HKT_CONFIG_DIR"] == str(CONFIG_DIR.resolve())
    assert env["HKT_RESULTS_DIR"] == str(res)
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{res}/mlflow.db"
    assert set(ENV_PASSED) <= set(env)
    apply_env(inv)
    assert {k: os.environ[k] for k in env} == env


def test_the_report_command_the_jobs_inherit_names_no_venv_outside_the_repository(reading):
    """hkt aggregate writes $HKT_REPORT_COMMAND into summary.md, which may be published (issue 73)."""
    inv = dataclasses.replace(reading[0], report_command="/elsewhere/.venv/bin/snakemake --report "
                                                         "r/report.html --config suite=smoke")
    assert inv.env[REPORT_COMMAND_ENV] == "snakemake --report r/report.html --config suite=smoke"


def test_a_cluster_nodes_job_composes_only_its_own_config(reading):
    inv = reading[0]
    node = read(Path(inv.results), main=False)
    assert node.digests == {} and node.report_command is None and not node.local_gpu_slots
    job = node.grid.train_jobs()[0]
    assert node.train_digest(job) == inv.train_digest(job)


def test_priorities_are_the_plans_and_nothing_without_one(reading):
    inv = reading[0]
    job = inv.grid.train_jobs()[0]
    assert inv.train_priority(job, None) == 0 and inv.prepare_priority(job.task, None) == 0

    class Plan:
        def priority(self, record):
            return 7 if record == inv.grid.record(job) else 1

        def data_priority(self, records):
            return len(records)

    assert inv.train_priority(job, Plan()) == 7
    assert inv.prepare_priority(job.task, Plan()) == sum(
        j.task == job.task for j in inv.grid.train_jobs())


def test_a_record_that_does_not_load_is_found_and_left_where_it_is(tmp_path):
    from test_report_aggregate import make_record

    whole, cut = tmp_path / "a" / "record.json", tmp_path / "b" / "record.json"
    for path in (whole, cut):
        path.parent.mkdir()
    whole.write_text(json.dumps(make_record()))
    cut.write_text('{"task": ')
    found = damaged_records([str(whole), str(cut), str(tmp_path / "absent" / "record.json")])
    assert [r for r, _ in found] == [str(cut)] and "not valid JSON" in found[0][1]
    assert cut.read_text() == '{"task": ' and not cut.with_name("record.json.damaged").exists()
    assert damage_warning(*found[0]).startswith(f"hkt: warning: {cut} does not load (not valid")


def test_starting_claims_and_opens_before_timing_anything_then_records_the_session(
        reading, environ):
    inv = reading[0]
    done: list[str] = []

    class Plan:
        wall_seconds = 60.0

    said: list[str] = []
    plan = start(inv, claim=lambda: done.append(f"claim {os.environ[SUITE_ENV]}"),
                 open_store=lambda: done.append("store"),
                 plan=lambda suite: done.append("plan") or Plan(),
                 describe=lambda suite, plan: "the plan", heartbeat_s=lambda: 30.0,
                 say=said.append)
    assert isinstance(plan, Plan) and done == ["claim smoke", "store", "plan"]
    assert said[0] == "the plan" and said[-1].startswith("hkt: from Snakemake's start")
    sessions = json.loads((Path(inv.results) / "plan" / "sessions.json").read_text())["sessions"]
    assert len(sessions) == 1 and sessions[0]["estimate_s"] >= 60.0 and not sessions[0]["cluster"]
    from hkt.workflow.sessions import end_session

    end_session(inv.results, ok=True)  # stops its heartbeat


def test_a_refused_claim_times_nothing(reading, environ):
    from hkt.errors import HKTError

    def refuse():
        raise HKTError("in use")

    with pytest.raises(HKTError, match="in use"):
        start(reading[0], claim=refuse, open_store=lambda: pytest.fail("opened"),
              plan=lambda suite: pytest.fail("timed"), **UNPLANNED,
              say=lambda line: pytest.fail(f"said {line}"))


def test_a_cluster_run_whose_rules_ask_for_gpus_none_in_view_is_refused_before_any_claim(
        tmp_path, monkeypatch, environ):
    """Snakemake reads the workflow before it has an executor, so the cluster's check runs when
    the jobs start: GPU rules, no GPU on the submitting machine, ``node.gpus`` unset: refused,
    nothing claimed (a login node would otherwise turn every GPU job into a CPU job)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    given = {"suite": "smoke", "results_dir": str(tmp_path / "res"),
             "resources": {"train": {"gpu": 1}}}
    inv = read_invocation({**CONFIG, **given}, CONFIG_DIR, main=False, overrides=given,
                          command_line=given, cuda=lambda: False)
    from hkt.errors import ConfigError

    with pytest.raises(ConfigError, match=r"workflow config: resources\.\{train\}\.gpu ask for "
                                          r"GPUs, this machine has none and config `node\.gpus`"):
        start(inv, cluster=True, claim=lambda: pytest.fail("claimed"),
              open_store=lambda: pytest.fail("opened"), plan=lambda suite: pytest.fail("timed"),
              **UNPLANNED, say=lambda line: None)
    assert not (tmp_path / "res").exists()
    given["node"] = {"gpus": 0}  # said explicitly: CPU jobs; the check lets it through
    inv = read_invocation({**CONFIG, **given}, CONFIG_DIR, main=False, overrides=given,
                          command_line=given, cuda=lambda: False)
    with pytest.raises(RuntimeError, match="claimed"):
        start(inv, cluster=True, claim=lambda: (_ for _ in ()).throw(RuntimeError("claimed")),
              open_store=lambda: None, plan=lambda suite: pytest.fail("timed"), **UNPLANNED,
              say=lambda line: None)


def test_a_run_sets_damaged_records_aside_once_and_a_dry_run_never(tmp_path):
    """The rules' input function (hkt.workflow.handlers.Handlers.run_inputs): a damaged record is
    set aside the first time a run that executes jobs asks for a job's inputs, never in a dry
    run (Snakemake's workflow object stands in: the three things the handler reads of it)."""
    from types import SimpleNamespace

    from hkt.workflow.handlers import Handlers, SuiteParts

    results = tmp_path / "res"
    inv = read(results)
    record = Path(inv.grid.records()[0])
    record.parent.mkdir(parents=True)
    record.write_text('{"task": ')
    inv = read(results)
    assert [r for r, _ in inv.damaged] == [str(record)]
    parts = SuiteParts(plan=pytest.fail, describe=pytest.fail, heartbeat_s=pytest.fail,
                       resumable_line=pytest.fail)
    dry = SimpleNamespace(is_main_process=True, dryrun=True, executor_plugin=object())
    handlers = Handlers(inv, dry, repo=ROOT, suite=parts)
    assert handlers.run_inputs("listops") == inv.grid.data_files("listops") and record.exists()
    handlers.workflow = SimpleNamespace(is_main_process=True, dryrun=False, executor_plugin=object())
    handlers.run_inputs("listops")
    assert not record.exists() and record.with_name("record.json.damaged").exists()
    record.write_text('{"task": ')  # written again after the run set it aside: left alone
    handlers.run_inputs("imdb")
    assert record.exists()
