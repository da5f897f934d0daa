"""How a run executed (hkt/train/run_conditions.py): the record and the MLflow tags say the
precision, the threads and, on a GPU shared through the workflow's slots, which slot of which
GPU the job
held and how many of that GPU's slots were held as it got its own. CUDA is simulated (no GPU
here): a real slot claim, with the device type said to be cuda."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from hkt.run_record import RecordError, make_record, validate_record
from hkt.train import loop
from hkt.train.run_config import load_config
from hkt.train.run_conditions import execution, execution_tags, precision_label
from hkt.gpu_slots import Slots, claim, claimed, held


def test_each_claim_counts_the_slots_of_its_gpu_held_with_its_own(tmp_path):
    slots = Slots(tmp_path, gpus=1, per_gpu=4)
    first, second, third = (claim(slots) for _ in range(3))
    assert [c.held_at_start for c in (first, second, third)] == [1, 2, 3]
    first.release()
    again = claim(slots)  # takes the freed slot 0, beside the two still held
    assert (again.slots, again.held_at_start) == ([0], 3)


def test_the_count_is_per_gpu(tmp_path):
    slots = Slots(tmp_path, gpus=2, per_gpu=3)
    claims = [claim(slots) for _ in range(3)]  # GPU 0, GPU 1, GPU 0
    assert [(c.gpu, c.held_at_start) for c in claims] == [(0, 1), (1, 1), (0, 2)]


def test_the_most_held_counts_jobs_that_came_later_and_skips_a_claimers_turn(tmp_path):
    from hkt.gpu_slots import _TURN, _lock

    slots = Slots(tmp_path, gpus=1, per_gpu=4)
    first = claim(slots)  # the first of a batch started together sees itself alone
    later = [claim(slots), claim(slots)]
    assert (first.held_at_start, first.held_most) == (1, 1)
    first.sample()
    assert (first.held_now(), first.held_most) == (3, 3)
    later[0].release()
    first.sample()
    assert first.held_most == 3  # the most, not the last
    turn = _lock(tmp_path / _TURN, wait=True)  # a claimer's turn: not probed, not counted
    try:
        assert first.held_now() is None
    finally:
        turn.close()


def test_the_held_claim_is_known_only_while_held(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert held() is None
    with claimed(Slots(tmp_path, 2, 3), say=lambda s: None) as c:
        assert held() is c
    assert held() is None
    with claimed(None) as c:
        assert c is None and held() is None


def test_precision_is_what_autocast_resolved():
    assert precision_label(None) == "fp32"
    assert precision_label(torch.bfloat16) == "bf16 autocast"
    assert precision_label(torch.float16) == "fp16 autocast"


def test_a_shared_gpu_says_its_slot_capacity_and_company(tmp_path):
    slots = Slots(tmp_path, gpus=2, per_gpu=9)
    others = [claim(slots), claim(slots)]  # other jobs, on GPU 0 and GPU 1 (kept: held)
    mine = claim(slots)  # GPU 0 again, its second slot
    assert [c.gpu for c in others] == [0, 1]
    fields = execution("cuda", torch.bfloat16, 1, mine)
    assert fields == {"precision": "bf16 autocast", "threads": 1,
                      "gpu_sharing": {"gpu": 0, "gpus": 2, "slot": 2, "jobs_per_gpu": 9,
                                      "held_at_start": 2, "held_most": 2}}
    assert execution_tags(fields) == {
        "precision": "bf16 autocast", "threads": "1", "gpu_sharing.gpu": "0",
        "gpu_sharing.gpus": "2", "gpu_sharing.slot": "2", "gpu_sharing.jobs_per_gpu": "9",
        "gpu_sharing.held_at_start": "2", "gpu_sharing.held_most": "2"}


def test_no_sharing_is_claimed_on_a_cpu_or_without_a_slot(tmp_path):
    c = claim(Slots(tmp_path, 1, 9))
    assert execution("cpu", None, 4, c) == {"precision": "fp32", "threads": 4}
    assert execution("cuda", torch.bfloat16, 1, None) == {"precision": "bf16 autocast", "threads": 1}
    assert execution_tags({"precision": "fp32", "threads": 4}) == {"precision": "fp32", "threads": "4"}


def _record(tmp_path: Path, **over):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    return make_record(task="listops", model="mha", variant="main", seed=0, profile="cpu",
                       config={}, n_params=1, steps=1, best_step=1, val_accuracy=0.5,
                       test_accuracy=0.5, data_dir=data,
                       data_checksums={s: "0" * 64 for s in ("train", "val", "test")},
                       git=(None, None), **over)


def test_the_record_holds_them_and_leaves_out_what_it_cannot_say(tmp_path):
    sharing = {"gpu": 0, "gpus": 1, "slot": 3, "jobs_per_gpu": 9, "held_at_start": 3,
               "held_most": 9}
    rec = _record(tmp_path, precision="bf16 autocast", threads=1, gpu_sharing=sharing)
    assert (rec["precision"], rec["threads"], rec["gpu_sharing"]) == ("bf16 autocast", 1, sharing)
    plain = _record(tmp_path)  # an external baseline's: none of them
    assert not {"precision", "threads", "gpu_sharing"} & set(plain)


@pytest.mark.parametrize("bad", [
    {"precision": "bf16"},  # not fp32, nor "<dtype> autocast"
    {"threads": 0},
    {"gpu_sharing": {"gpu": 0, "gpus": 1, "slot": 0, "jobs_per_gpu": 9, "held_at_start": 1,
                     "held_most": 1}},
    {"gpu_sharing": {"gpu": 0, "gpus": 1, "slot": 1, "jobs_per_gpu": 9, "held_at_start": 1}},
])
def test_the_schema_refuses_what_is_not_so(tmp_path, bad):
    with pytest.raises(RecordError):
        _record(tmp_path, **bad)


def test_a_record_written_before_them_is_still_valid(tmp_path):
    published = Path(__file__).resolve().parents[1] / "docs/results/gpu/runs/listops/mha/main/seed0"
    rec = json.loads((published / "record.json").read_text())
    assert "precision" not in rec
    validate_record(rec)


def test_a_training_run_on_a_shared_gpu_records_its_slot(prepared_data, tmp_path, monkeypatch):
    """The loop reads the claim the process holds (``hkt train`` under $HKT_GPU_SLOTS) and puts
    it in the record; CUDA simulated by saying the device's type is cuda."""
    monkeypatch.setattr(loop, "execution",
                        lambda kind, amp, threads, c: execution("cuda", amp, threads, c))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    slots = Slots(tmp_path / "slots", 1, 3)
    cfg = load_config(["profile=smoke", "task=listops", "model=mha", "tracking.enabled=false",
                       "train.num_threads=1"])
    with claimed(slots, say=lambda s: None):
        later = claim(slots)  # a job that joins the GPU after this one got its slot
        rec = loop.train(cfg, prepared_data("listops"), tmp_path / "run", stream=io.StringIO(),
                         progress=False)
    later.release()
    assert rec["precision"] == "fp32" and rec["threads"] == 1
    # alone when it started; the other job seen at its sync points
    assert rec["gpu_sharing"] == {"gpu": 0, "gpus": 1, "slot": 1, "jobs_per_gpu": 3,
                                  "held_at_start": 1, "held_most": 2}


def test_a_training_run_on_a_cpu_claims_no_sharing(prepared_data, tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = load_config(["profile=smoke", "task=listops", "model=mha", "tracking.enabled=false",
                       "train.num_threads=2"])
    with claimed(Slots(tmp_path / "slots", 1, 3), say=lambda s: None):  # a slot, but on the CPU
        rec = loop.train(cfg, prepared_data("listops"), tmp_path / "run", stream=io.StringIO(),
                         progress=False)
    assert (rec["precision"], rec["threads"]) == ("fp32", 2) and "gpu_sharing" not in rec
