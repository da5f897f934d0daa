"""Progress lines in a job's log: at least every train.progress_every_s, whatever the step count."""

from __future__ import annotations

import io
import re

from conftest import write_prepared_data
from hkt.cli.main import main
from hkt.train import progress as progress_module
from hkt.train.progress import Progress


def test_a_line_is_due_only_after_every_s(monkeypatch):
    now = {"t": 0.0}
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now["t"])
    log = io.StringIO()  # not a terminal: one line per write
    bar = Progress(100, stream=log, every_s=30.0)
    written = []
    for step in range(1, 101):
        now["t"] += 7.0  # a 7-second step
        if bar.due():
            bar.update(step, {"train_loss": 1.0 / step})
            written.append(now["t"])
    assert written[0] == 7.0  # the first step already shows the speed
    gaps = [b - a for a, b in zip(written, written[1:])]
    assert gaps and all(30.0 <= g < 37.0 for g in gaps)  # never silent for a step longer than due
    assert log.getvalue().count("\n") == len(written)
    bar.update(100, {"val_acc": 0.5}, force=True)  # evaluations are always written
    assert "val 0.500" in log.getvalue().splitlines()[-1]


def test_hkt_train_writes_progress_between_log_steps(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    code = main(["train", "--data", str(data), "--out", str(tmp_path / "run"), "task=listops",
                 "model=mha", "profile=smoke", "tracking.enabled=false", "train.log_every=1000",
                 "train.eval_every=1000", "train.progress_every_s=1e-9"])
    err = capsys.readouterr().err
    assert code == 0, err
    steps = [int(m) for m in re.findall(r"^step +(\d+)/12", err, flags=re.M)]
    assert set(range(1, 13)) <= set(steps), err  # every step, though none is a log step but the last
    assert re.search(r"samples/s .*eta", err)
    assert "testing the best checkpoint" in err
    # the passes say how far they are; the test pass (the run's last work) says its ETA too
    assert re.search(r"^step +\d+/12 \| validating: 2/2 batches, 16 examples so far$", err, flags=re.M), err
    assert re.search(r"^step 12/12 \| testing: 4/4 batches, 32 examples so far \| eta 0s$", err,
                     flags=re.M), err
