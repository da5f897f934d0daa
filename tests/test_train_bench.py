"""`hkt bench train` on tiny shapes: the table, CSV and Markdown are written."""

from __future__ import annotations

import csv

import pytest

from hkt.cli.main import main


def test_bench_train_writes_table(tmp_path, capsys):
    code = main(["bench", "train", "--seq-len", "32", "--batch-size", "4", "--d-model", "16",
                 "--n-heads", "2", "--d-ffn", "32", "--n-layers", "1", "--steps", "2",
                 "--warmup", "1", "--threads", "1", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "nn.TransformerEncoder" in out and "ours: HKT" in out and "ours: S4D" in out
    rows = list(csv.DictReader(open(tmp_path / "train_throughput.csv")))
    assert [r["model"] for r in rows] == ["mha", "hkt", "s4d", "torch", "torch_fused"]
    for r in rows:
        assert float(r["ms_per_step"]) > 0 and float(r["samples_per_s"]) > 0
        assert r["seq_len"] == "32" and r["d_model"] == "16"
    # the speedup column is the PyTorch encoder's time over each model's (rounded to 3 places)
    torch_ms = float(rows[3]["ms_per_step"])
    for r in rows:
        assert float(r["speedup_vs_torch"]) == pytest.approx(torch_ms / float(r["ms_per_step"]),
                                                             abs=1e-3)
    # same widths and depth: MHA and the PyTorch encoder have the same parameter count
    assert rows[0]["n_params"] == rows[3]["n_params"]
    assert (tmp_path / "train_throughput.md").read_text().startswith("Training throughput")


def test_bench_train_builds_hkt_with_the_tile_kernel(capsys):
    """`hkt_tile` is our HKT model with impl=tile; where the kernel cannot run (no CUDA, or no
    Triton) the benchmark stops with the tile path's clear error, not a traceback."""
    import torch

    from hkt.bench.train import _build

    model = _build("hkt_tile", {"vocab_size": 8, "num_classes": 2, "seq_len": 16},
                   {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ffn": 32}, "cpu")
    assert {m.impl for m in model.modules() if hasattr(m, "impl")} == {"tile"}
    if torch.cuda.is_available():
        return
    code = main(["bench", "train", "--models", "hkt_tile", "--seq-len", "16", "--batch-size", "2",
                 "--d-model", "16", "--n-heads", "2", "--d-ffn", "32", "--n-layers", "1",
                 "--steps", "1", "--warmup", "0", "--threads", "1"])
    assert code != 0
    assert "impl='tile'" in capsys.readouterr().err
