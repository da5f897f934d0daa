"""Aggregates and publications that no second process, kill or bad record makes wrong (issue 74,
items 3, 4 and two of 7; docs/faults.md, "Run records and publications"): real processes, each
stopped or killed at a chosen point by a few lines run before the real command (``_harness``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import load_script

from hkt.cli.main import main as hkt_main
from test_report_aggregate import make_record, suite_records, write_records
from test_scripts_results import quick_without_s4d, results_dir

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "docs" / "results" / "quick"

#: Runs the real command (``hkt …``, or ``publish_results.py …`` after ``publish``) in this
#: process after ``FAULT`` (code given per test) has patched one function: to stop there until a
#: file appears (``wait``), or to SIGKILL the process (``kill``).
_HARNESS = """
import os, signal, sys, time
from pathlib import Path

def wait(ready, go):
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.02)

def kill():
    os.kill(os.getpid(), signal.SIGKILL)

FAULT
args = sys.argv[1:]
if args[0] == "publish":
    import importlib.util
    spec = importlib.util.spec_from_file_location("publish_results", "scripts/publish_results.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script
    spec.loader.exec_module(script)
    sys.exit(script.main(args[1:]))
from hkt.cli.main import main
sys.exit(main(args))
"""


def _harness(fault: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _HARNESS.replace("FAULT", fault), *map(str, args)],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _until(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait for ``path`` to appear (the process reached its point), or fail with its output."""
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the process never reached its point (rc {proc.returncode}): {err[-2000:]}")
        time.sleep(0.05)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _other_records() -> list[dict]:
    """Another record set than :func:`suite_records`: two seeds a side, other accuracies."""
    return [make_record(model=m, seed=s, val=v + 0.01, test=v, test_examples=2000)
            for s in (0, 1) for m, v in (("hkt", 0.7 - s / 100), ("mha", 0.4 + s / 100))]


# ------------------------------------------------------------------ hkt aggregate


def test_two_aggregates_on_one_out_never_mix(tmp_path, capsys):
    """Issue 74 item 3: two `hkt aggregate` on one --out both used OUT/.aggregate.partial, each
    deleting it at its start, and one exited 0 with tables of one record set and a summary of
    the other. The second is now refused in one line naming the first while it writes; the
    first finishes with its own set throughout."""
    first = write_records(tmp_path / "a" / "runs", suite_records())
    second = write_records(tmp_path / "b" / "runs", _other_records())
    out, ready, go = tmp_path / "out", tmp_path / "ready", tmp_path / "go"
    proc = _harness("from hkt.report import build\nreal = build.write_summary\n"
                    f"def paused(*a, **k):\n    wait({str(ready)!r}, {str(go)!r})\n"
                    "    return real(*a, **k)\nbuild.write_summary = paused",
                    "aggregate", first, "--out", out)
    try:
        _until(ready, proc)  # the first holds --out, its tables staged, its summary not yet
        rc = hkt_main(["aggregate", str(second), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert err[0].startswith(f"hkt: error: {out} is being written by another process "
                                 f"(hkt aggregate: pid {proc.pid} on host ")
        assert "wait for it to finish" in err[0]
    finally:
        go.touch()
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    alone = tmp_path / "alone"  # the first set aggregated with no one beside it
    assert hkt_main(["aggregate", str(first), "--out", str(alone)]) == 0
    for name in ("tables/main.md", "tables/gap.md", "tables/runs.csv"):
        assert (out / name).read_bytes() == (alone / name).read_bytes(), name
    n = len(suite_records())
    assert f"\n{n} runs from {n} run records;" in (out / "summary.md").read_text()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_an_aggregate_killed_while_moving_is_finished_by_the_next(tmp_path, capsys, monkeypatch):
    """An aggregate SIGKILLed after its outputs were complete, while moving them into --out,
    left a mix of two aggregates' tables. The next aggregate first finishes those moves, so
    --out holds one aggregate's set even where that next one then fails."""
    from hkt.figures import suite as figures

    first = write_records(tmp_path / "a" / "runs", suite_records())
    second = write_records(tmp_path / "b" / "runs", _other_records())
    out, alone = tmp_path / "out", tmp_path / "alone"
    assert hkt_main(["aggregate", str(first), "--out", str(out)]) == 0
    assert hkt_main(["aggregate", str(second), "--out", str(alone)]) == 0
    tables = str(out / "tables") + "/"
    proc = _harness("import os\nreal, n = os.replace, [0]\n"
                    "def replace(src, dst, *a, **k):\n"
                    f"    if str(dst).startswith({tables!r}):\n"
                    "        n[0] += 1\n        if n[0] == 3: kill()\n"
                    "    return real(src, dst, *a, **k)\nos.replace = replace",
                    "aggregate", second, "--out", out)
    proc.communicate(timeout=120)
    assert proc.returncode == -9
    capsys.readouterr()

    def broken(*args, **kwargs):
        raise ValueError("a figure that cannot be drawn")

    monkeypatch.setattr(figures, "main_bar", broken)
    with pytest.raises(ValueError, match="cannot be drawn"):
        hkt_main(["aggregate", str(first), "--out", str(out)])
    for name in ("tables/main.md", "tables/gap.md", "tables/runs.csv", "tables/controls.md"):
        assert (out / name).read_bytes() == (alone / name).read_bytes(), name
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_aggregate_refuses_an_out_inside_a_sealed_publication(tmp_path, capsys):
    """Issue 74 item 7: `hkt aggregate --out docs/results/quick` overwrote a sealed publication,
    which only the drift test noticed. Refused in one line pointing at --retable; nothing written."""
    pub = tmp_path / "quick"
    shutil.copytree(QUICK, pub)
    before = _files(pub)
    records = write_records(tmp_path / "runs", suite_records())
    for out in (pub, pub / "tables"):
        rc = hkt_main(["aggregate", str(records), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert err[0] == (f"hkt: error: --out {out} is inside the sealed publication {pub} (it has "
                          "its SHA256SUMS): its tables are rebuilt from its own records with "
                          f"`python scripts/publish_results.py --retable {pub}`; aggregate into "
                          "another --out")
    assert _files(pub) == before


# ------------------------------------------------------------------ hkt train in a publication


def test_a_refused_train_into_a_published_run_leaves_its_seal_whole(tmp_path, capsys):
    """Issue 74 item 7: `hkt train --out` a published run was refused (another config) but
    left its `.lock` there (filelock never removes its file), and the seal then failed on it. It
    is refused before anything is made in the run directory."""
    pub = tmp_path / "quick"
    shutil.copytree(QUICK, pub)
    run = pub / "runs" / "listops" / "hkt" / "main" / "seed0"
    rc = hkt_main(["train", "--data", str(tmp_path / "data"), "--out", str(run), "task=listops",
                   "model=mha", "profile=smoke", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1] == (
        f"hkt: error: {run} is inside the sealed publication {pub} (it has its SHA256SUMS): a "
        "published run is not trained or changed in place; copy it into a results directory "
        "and give that as --out")
    assert not (run / ".lock").exists()
    load_script("publish_results").verify(pub)


# ------------------------------------------------------------------ publish_results.py


def test_a_publication_killed_between_its_swaps_renames_is_put_back(tmp_path):
    """`publish_results.py RESULTS DEST --replace` removed DEST before renaming the new copy in:
    a kill between lost the publication. Now DEST is renamed aside (.DEST.old) first, and the
    next run on DEST puts it back before anything else (here: refusing to publish over it)."""
    publish = load_script("publish_results")
    dest = tmp_path / "docs" / "quick"
    publish.publish(results_dir(tmp_path / "r1"), dest)
    before = _files(dest)
    newer = results_dir(tmp_path / "r2", val=0.4)
    proc = _harness("import os\nreal = os.rename\n"
                    f"def rename(src, dst):\n    if str(dst) == {str(dest)!r}: kill()\n"
                    "    return real(src, dst)\nos.rename = rename",
                    "publish", newer, dest, "--replace")
    proc.communicate(timeout=120)
    assert proc.returncode == -9 and not dest.exists()  # killed between the two renames
    with pytest.raises(SystemExit, match="already holds files; pass --replace"):
        publish.main([str(newer), str(dest)])
    assert _files(dest) == before
    assert sorted(p.name for p in dest.parent.iterdir()) == ["quick"]  # nothing left beside it


def test_add_is_locked_atomic_and_checks_before_copying(tmp_path):
    """Issue 74 item 4: `--add` copied into DEST before checking, without a lock. Now: a second
    `--add` while one copies is refused in one line; a SIGKILL while copying leaves DEST as it
    was (sealed); the next `--add` removes what the killed one staged; a record that
    disagrees with its history.csv, or fails the schema, is refused in one line before
    anything is copied."""
    published, dest, results, added = quick_without_s4d(tmp_path)
    publish = load_script("publish_results")
    publish.write_manifest(dest)
    before = _files(dest)
    ready, go = tmp_path / "ready", tmp_path / "go"
    first = _harness("import shutil\nreal = shutil.copy2\n"
                     f"def copy2(src, dst, *a, **k):\n    if str(src).startswith({str(results)!r}):\n"
                     f"        wait({str(ready)!r}, {str(go)!r})\n"
                     "    return real(src, dst, *a, **k)\nshutil.copy2 = copy2",
                     "publish", "--add", results, dest)
    try:
        _until(ready, first)  # it holds DEST and copies its first run
        with pytest.raises(SystemExit) as exc:
            publish.add_runs(results, dest)
        assert str(exc.value).startswith(f"{dest} is being written by another process "
                                         f"(publish_results.py: pid {first.pid} on host ")
        assert "nothing was written" in str(exc.value) and "\n" not in str(exc.value)
    finally:
        first.kill()  # SIGKILL, mid-copy
        first.communicate()
    assert _files(dest) == before
    publish.verify(dest)
    assert (dest.parent / ".quick.staging").exists()  # what the killed one left

    run = results / "runs" / added[0]
    history = (run / "history.csv").read_text().splitlines()
    *head, last = history
    (run / "history.csv").write_text("\n".join([*head, ",".join(last.split(",")[:-1] + ["0.999"])]) + "\n")
    with pytest.raises(SystemExit) as exc:
        publish.add_runs(results, dest)
    assert str(exc.value).startswith(f"{run / 'record.json'} disagrees with its run's history.csv (")
    assert "nothing was copied" in str(exc.value) and "\n" not in str(exc.value)
    assert _files(dest) == before
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".quick.")]  # staging gone

    (run / "history.csv").write_text("\n".join(history) + "\n")
    record = json.loads((run / "record.json").read_text())
    (run / "record.json").write_text(json.dumps({**record, "test_accuracy": "high"}))
    with pytest.raises(SystemExit) as exc:
        publish.add_runs(results, dest)
    assert str(run / "record.json") in str(exc.value) and "nothing was copied" in str(exc.value)
    assert "\n" not in str(exc.value)
    assert _files(dest) == before
