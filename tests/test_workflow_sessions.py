"""A suite's wall time over its interruptions (hkt/workflow/sessions.py): each run of the
workflow is a session in plan/sessions.json, with a heartbeat so that a killed one still has an
end; `hkt status` sums them and sets the total beside the plan's estimate."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from hkt.workflow import sessions as S

HOST = socket.gethostname()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_session_is_recorded_kept_alive_and_ended(tmp_path):
    from hkt.provenance import git_state

    heartbeat = S.start_session(tmp_path, estimate_s=3600.0, heartbeat_s=0.05)
    (first,) = S.load_sessions(tmp_path)
    assert first["pid"] == os.getpid() and first["host"] == HOST
    assert first["estimate_s"] == 3600.0 and "ended" not in first
    assert (first["commit"], first["dirty"]) == git_state()
    deadline = time.time() + 10
    while S.load_sessions(tmp_path)[0]["last_seen"] == first["last_seen"]:
        assert time.time() < deadline, "the heartbeat never wrote last_seen"
        time.sleep(0.05)
    S.end_session(tmp_path, ok=False)
    heartbeat.join(timeout=5)
    assert not heartbeat.is_alive()  # the end stops the heartbeat
    (ended,) = S.load_sessions(tmp_path)
    assert ended["ok"] is False and ended["ended"] == ended["last_seen"]


def test_a_session_lasts_to_its_end_its_last_sign_of_life_or_now(tmp_path):
    ended = {"started": 100.0, "last_seen": 150.0, "ended": 160.0, "host": HOST, "pid": os.getpid()}
    killed = {"started": 100.0, "last_seen": 130.0, "host": HOST, "pid": dead_pid()}
    running = {"started": 100.0, "last_seen": 130.0, "host": HOST, "pid": os.getpid()}
    elsewhere = {**running, "host": "node17"}  # its process is not visible here: its heartbeat
    no_pid = {"started": 100.0, "last_seen": 130.0, "host": HOST}  # kill(0) would say "alive"
    assert [S.session_seconds(x, now=1000.0, host=HOST)
            for x in (ended, killed, running, elsewhere, no_pid)] == [60.0, 30.0, 900.0, 30.0, 30.0]


def test_the_wall_line_sums_the_sessions_against_the_first_estimate():
    sessions = [{"started": 0.0, "estimate_s": 10 * 3600.0, "commit": "4de72a8aaaa", "dirty": False},
                {"started": 1.0, "estimate_s": 7 * 3600.0, "commit": "4de72a8aaaa", "dirty": False}]
    assert S.wall_line(sessions, 12 * 3600.0) == ("wall time: 12.0 h over 2 runs of the workflow, "
                                                  "against 10.0 h planned at its first start "
                                                  "(+20%); commit 4de72a8")
    sessions[1].update(commit="e45d85bbbb", dirty=True)
    assert S.wall_line(sessions, 1800.0, 5 * 3600.0) == (
        "wall time so far: 30 min over 2 runs of the workflow; with the remaining, about 5.5 h, "
        "against 10.0 h planned at its first start (-45%); from 2 commits: 4de72a8, e45d85b+dirty")


def test_an_unreadable_sessions_file_is_moved_aside_not_written_over(tmp_path, capsys):
    path = tmp_path / S.SESSIONS_FILE
    path.parent.mkdir(parents=True)
    path.write_text("{half a file")
    assert S.load_sessions(tmp_path) == []  # status reads on
    S.end_session(tmp_path, ok=True)  # not ours: left alone
    assert path.read_text() == "{half a file"
    S.start_session(tmp_path, estimate_s=1.0, heartbeat_s=3600)
    S.end_session(tmp_path, ok=True)
    (aside,) = path.parent.glob("sessions.json.unreadable-*")
    assert aside.read_text() == "{half a file"
    assert len(S.load_sessions(tmp_path)) == 1
    assert f"{path} is not a sessions file; moved to {aside.name}" in capsys.readouterr().err


def test_another_processs_session_is_not_touched(tmp_path):
    path = tmp_path / S.SESSIONS_FILE
    path.parent.mkdir(parents=True)
    other = {"started": 1.0, "last_seen": 2.0, "host": HOST, "pid": dead_pid()}
    path.write_text(json.dumps({"sessions": [other]}))
    S.end_session(tmp_path, ok=True)
    assert S.load_sessions(tmp_path) == [other]


@pytest.mark.parametrize("seconds, said", [(30, "30 s"), (1800, "30 min"), (5 * 3600, "5.0 h"),
                                           (4 * 86400, "4.0 days")])
def test_durations(seconds, said):
    assert S.duration(seconds) == said


def test_a_session_starts_where_the_workflow_says_and_is_estimated_over_that_span(tmp_path):
    """Issue 64: the workflow records Snakemake's start, not the first job's, so that `hkt
    status` measures the span of Snakemake's `Elapsed time`, against an estimate of that span."""
    began = time.time() - 42.0
    S.start_session(tmp_path, estimate_s=100.0, heartbeat_s=3600, started=began)
    S.end_session(tmp_path, ok=True)
    (session,) = S.load_sessions(tmp_path)
    assert session["started"] == began
    assert S.session_seconds(session, now=time.time(), host=HOST) >= 42.0
