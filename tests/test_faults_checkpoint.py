"""A malicious checkpoint is refused without advice to unpickle it (issue 11, smaller ones)."""

from __future__ import annotations

import io
import os

import torch

from conftest import write_prepared_data
from hkt.cli.main import main


class _Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_last_checkpoint_is_refused_and_never_run(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    args = ["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha", "profile=smoke",
            "tracking.enabled=false", "--no-progress"]
    assert main(args) == 0
    (run / "record.json").unlink()  # as if killed before the end: the next run resumes from last.pt
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({"model": _Payload(str(marker))}, buf)
    (run / "checkpoints" / "last.pt").write_bytes(buf.getvalue())
    capsys.readouterr()
    assert main(args) == 2
    msg = capsys.readouterr().err.strip().splitlines()[-1]
    assert msg.startswith("hkt: error: ") and "last.pt is not a checkpoint this program wrote" in msg
    assert "delete it" in msg and "weights_only" not in msg
    assert not marker.exists()


def test_a_run_that_fails_before_its_first_write_leaves_nothing(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    for bad in ("train.batch_size=100000", "train.device=cuda:99"):  # no such device anywhere
        run = tmp_path / "runs" / "r"
        capsys.readouterr()
        code = main(["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha",
                     "profile=smoke", "tracking.enabled=false", "--no-progress", bad])
        err = capsys.readouterr().err
        assert code == 2 and "hkt: error:" in err, (bad, err)
        assert not run.exists(), (bad, sorted(p.name for p in run.iterdir()))


def test_an_empty_checkpoint_says_it_is_empty(tmp_path, capsys):
    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    args = ["train", "--data", str(data), "--out", str(run), "task=listops", "model=mha",
            "profile=smoke", "tracking.enabled=false", "--no-progress"]
    assert main(args) == 0
    (run / "record.json").unlink()  # as if killed before the end: the next run resumes
    (run / "checkpoints" / "last.pt").write_bytes(b"")
    capsys.readouterr()
    assert main(args) == 2
    msg = capsys.readouterr().err.strip().splitlines()[-1]
    assert msg == (f"hkt: error: cannot load checkpoint {run / 'checkpoints' / 'last.pt'}: the "
                   "file is empty (0 bytes); delete it (and the run directory's other "
                   "checkpoints) to start over")
