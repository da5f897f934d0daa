"""HKT with one level (the `levels1` ablation: no hierarchy) is MHA at the suites' settings:
the same parameters and initial weights, and the same training up to float rounding. What
lets a suite derive the L = 1 row from its MHA runs instead of training the same model three
more times (issue 21).

It is not MHA bit for bit at any size: the fused path's CPU kernel (query/key width L*d, V
padded) rounds differently from MHA's plain SDPA call. Measured here: the training loss differs
in the 8th digit by step 20 (2.2124273777 vs 2.2124274373, seed 1, 2 x 64), and even the smoke
model (d = 16, one layer), whose histories once matched for seed 0, differs in the 7th digit by
step 5 for seeds 1-3. Over thousands of steps such differences can grow, so a derived row says
what it is ("derived: the MHA runs, not trained again") and the documentation says "the same
training up to float rounding", never "bit for bit"."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import write_prepared_data
from hkt.cli.main import main


def history(run):
    with open(run / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k != "samples_per_s"} for row in csv.DictReader(fh)]


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
def test_levels1_is_mha_up_to_rounding(profile, tmp_path):
    data = write_prepared_data(tmp_path / "data", "listops", n_train=256, n_eval=64)
    budget = ["train.max_steps=24", "train.eval_every=8", "train.checkpoint_every=8",
              "train.log_every=4", "optim.warmup_steps=4", "train.num_threads=1"]
    runs = {}
    for name, model in (("mha", ["model=mha", "variant=main"]),
                        ("levels1", ["model=hkt", "variant=levels1"])):
        runs[name] = tmp_path / name
        assert main(["train", "--data", str(data), "--out", str(runs[name]), "task=listops",
                     f"profile={profile}", *model, *budget, "seed=1", "tracking.enabled=false",
                     "--no-progress"]) == 0
    mha, l1 = (json.loads((runs[n] / "record.json").read_text()) for n in ("mha", "levels1"))
    assert mha["config"]["model"]["d_model"] == l1["config"]["model"]["d_model"] == (
        16 if profile == "smoke" else 64)
    assert l1["config"]["model"]["mixer"]["levels"] == 1
    assert mha["n_params"] == l1["n_params"]
    h1, hm = history(runs["levels1"]), history(runs["mha"])
    assert [r["step"] for r in h1] == [r["step"] for r in hm]
    for a, b in zip(h1, hm):
        for key in ("train_loss", "val_loss"):
            if b[key]:
                assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-5), (a["step"], key)
        for key in ("train_acc", "val_acc", "lr"):
            assert a[key] == b[key], (a["step"], key)
    for key in ("val_accuracy", "test_accuracy", "best_step"):
        assert l1[key] == mha[key], key
    assert l1["test_loss"] == pytest.approx(mha["test_loss"], rel=1e-5)

