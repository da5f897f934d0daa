"""The tracking server of docs/clusters.md, started as the page says, with MLflow's basic-auth
app (issue 61, item 10): on 127.0.0.1 (a free port, a temporary directory, stopped by PID), a job
with the credentials logs its run, one without them or with a wrong password is refused in one
line before anything is written."""

from __future__ import annotations

import base64
import json
import re
import shlex
import urllib.error
import urllib.request

import pytest

from conftest import free_port, mlflow_server, write_prepared_data
from test_workflow import ROOT

from hkt.cli.main import main

pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs Flask-WTF (the "
                                        "tracking-server extra, and the dev extra, install it)")
pytestmark = pytest.mark.slow

ADMIN_PASSWORD = "admin-password-for-the-test"
JOB_USER, JOB_PASSWORD = "hkt", "job-password-for-the-test"


def documented_server_command() -> list[str]:
    """The `mlflow server` command of docs/clusters.md, "Starting the tracking server", as
    arguments after the executable (the test puts in its own host and port)."""
    page = (ROOT / "docs" / "clusters.md").read_text(encoding="utf-8")
    section = page.split("## Starting the tracking server", 1)[1]
    line = next(ln for ln in section.splitlines() if re.search(r"\bmlflow server\b", ln))
    words = shlex.split(line)
    assert words[0].endswith("/.venv/bin/mlflow") and words[1] == "server"
    assert words[words.index("--app-name") + 1] == "basic-auth"
    assert words[words.index("--host") + 1] == "0.0.0.0"  # reachable by the compute nodes
    return words[1:]


def documented_environment() -> dict[str, str]:
    """The variables the page exports before starting the server, with the test's values."""
    page = (ROOT / "docs" / "clusters.md").read_text(encoding="utf-8")
    section = page.split("## Starting the tracking server", 1)[1].split("```bash", 2)[1]
    names = re.findall(r"^export (\w+)=", section, re.M)
    assert names == ["MLFLOW_FLASK_SERVER_SECRET_KEY", "MLFLOW_AUTH_ADMIN_PASSWORD"]
    return {"MLFLOW_FLASK_SERVER_SECRET_KEY": "test-secret-key-0123456789",
            "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN_PASSWORD}


def create_user(uri: str, username: str, password: str) -> None:
    """The page's `curl -u admin:… …/users/create` call."""
    request = urllib.request.Request(
        f"{uri}/api/2.0/mlflow/users/create", method="POST",
        data=json.dumps({"username": username, "password": password}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(
            f"admin:{ADMIN_PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(request, timeout=30) as r:
        assert r.status == 200


def test_the_documented_server_logs_a_job_with_credentials_and_refuses_one_without(
        tmp_path, capsys, monkeypatch):
    from mlflow.tracking import MlflowClient

    page = (ROOT / "docs" / "clusters.md").read_text(encoding="utf-8")
    assert "curl -u \"admin:$MLFLOW_AUTH_ADMIN_PASSWORD\" -X POST http://tracking-host:5000/api/2.0/mlflow/users/create" in page
    args = documented_server_command()
    port = free_port()
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    args += ["--workers", "1"]  # one worker process: the test shares its cores
    home = tmp_path / "hkt-tracking"
    data = write_prepared_data(tmp_path / "data", "listops")
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.mlflow/credentials of the machine's
    with mlflow_server(home, port=port, args=args, env=documented_environment(),
                       cwd=home) as (uri, proc):
        create_user(uri, JOB_USER, JOB_PASSWORD)
        assert (home / "basic_auth.db").is_file() and (home / "mlflow.db").is_file()
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        base = ["train", "--data", str(data), "task=listops", "model=mha", "profile=smoke",
                "--no-progress"]

        for password, said in ((None, "none was given"),
                               ("wrong-password-1234", "the user name and password given were refused")):
            if password is not None:
                monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", JOB_USER)
                monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
            capsys.readouterr()
            run = tmp_path / f"refused-{password}"
            assert main([*base, "--out", str(run)]) == 2
            out, err = capsys.readouterr()
            assert "Traceback" not in err
            assert err.strip().splitlines() == [
                f"hkt: error: the MLflow tracking server {uri} asks for a user name and password "
                f"({said}): set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or the "
                "[mlflow] section of ~/.mlflow/credentials) to an account of the server; see "
                "docs/clusters.md, \"Starting the tracking server\""]
            assert not run.exists()

        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", JOB_PASSWORD)
        assert main([*base, "--out", str(tmp_path / "run")]) == 0
        record = json.loads((tmp_path / "run" / "record.json").read_text())
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ADMIN_PASSWORD)
        client = MlflowClient(uri)
        run = client.get_run(record["mlflow_run_id"])
        assert run.info.status == "FINISHED"
        assert run.data.metrics["test_accuracy"] == pytest.approx(record["test_accuracy"])
        refused = urllib.request.Request(f"{uri}/api/2.0/mlflow/experiments/search?max_results=1")
        with pytest.raises(urllib.error.HTTPError) as no_auth:
            urllib.request.urlopen(refused, timeout=30)
        assert no_auth.value.code == 401  # the API, and so the UI's deletes, need an account
    assert proc.poll() is not None  # stopped by its PID
