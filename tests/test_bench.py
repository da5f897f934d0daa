"""The attention benchmark runs end to end on tiny shapes and writes its tables."""

from __future__ import annotations

import csv
import importlib.util
import os

import pytest
import torch

from hkt.train.step_timing import peak_memory_bytes
from hkt.cli.main import main


def test_bench_attention_writes_tables(tmp_path, capsys):
    rc = main(["bench", "attention", "--lengths", "32", "64", "--batch", "2", "--repeats", "1",
               "--out", str(tmp_path)])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "attention.csv").open()))
    variants = {r["variant"] for r in rows}
    # the tile kernel runs on CUDA with Triton only (tests/test_tile.py checks its numbers)
    tile_runs = torch.cuda.is_available() and importlib.util.find_spec("triton") is not None
    assert variants == {"mha", "hkt-fused", "hkt-fused-plain", "hkt-materialised"} | (
        {"hkt-tile"} if tile_runs else set())
    assert {int(r["T"]) for r in rows} == {32, 64}
    mha = [r for r in rows if r["variant"] == "mha"]
    assert all(float(r["time_ratio"]) == 1.0 for r in mha)
    hkt = [r for r in rows if r["variant"] == "hkt-fused"]
    assert all(float(r["analytic_score_ratio"]) == 1.3125 for r in hkt)
    md = (tmp_path / "attention.md").read_text()
    assert "| T | variant |" in md and "time / MHA" in md
    out = capsys.readouterr().out
    assert "attention.md" in out
    if not tile_runs:  # skipped, saying why
        assert "hkt-tile: skipped: " in out and "Not run: hkt-tile: " in md


def test_the_layer_under_test_is_the_hkt_model_config(tmp_path, monkeypatch):
    """The benchmark's HKT layer is config/model/hkt.yaml's mixer (an edit there reaches it, as
    the workflow's inputs promise), with config/bench/attention.yaml's `hkt` over it."""
    import argparse
    import shutil

    from hkt.bench.attention import load_settings
    from hkt.config_compose import config_dir

    cdir = tmp_path / "config"
    shutil.copytree(config_dir(), cdir)
    monkeypatch.setenv("HKT_CONFIG_DIR", str(cdir))
    args = argparse.Namespace(config=None, lengths=None, batch=None, repeats=None)
    assert load_settings(args)["hkt"] == {"levels": 3, "stride": 2, "kernel_size": 2,
                                          "fusion": "dynamic", "upsample": "nearest",
                                          "chunk_mib": 32.0}
    with (cdir / "model" / "hkt.yaml").open("a") as f:
        f.write("mixer:\n  levels: 4\n  stride: 3\n")
    bench = cdir / "bench" / "attention.yaml"
    bench.write_text(bench.read_text().replace("hkt: {}", "hkt: {stride: 4}"))
    settings = load_settings(args)["hkt"]
    assert (settings["levels"], settings["stride"]) == (4, 4)


def test_the_tile_kernel_is_not_timed_in_tritons_interpreter(monkeypatch):
    """Where Triton could run the tile kernel (the GPU check's path, faked here on the CPU), its
    CPU interpreter is still refused: its times mean nothing. The line once named the kernel
    module by its old name, an error that only a GPU reached."""
    import types

    from hkt.bench import attention
    from hkt.mixers import tile_attention

    hkt = {"levels": 3, "stride": 2, "upsample": "nearest"}
    cpu = torch.device("cpu")
    assert attention.skip_reason("mha", {"hkt": hkt}, cpu) is None
    assert attention.skip_reason("hkt-tile", {"hkt": hkt}, cpu) is not None  # no CUDA here
    monkeypatch.setattr(tile_attention, "unavailable", lambda x: None)
    for interpreted, reason in ((True, "Triton's CPU interpreter is on"), (False, None)):
        monkeypatch.setattr(tile_attention, "kernels",
                            lambda on=interpreted: types.SimpleNamespace(INTERPRETED=on))
        got = attention.skip_reason("hkt-tile", {"hkt": hkt}, cpu)
        assert (got is None) if reason is None else got.startswith(reason), got


def test_peak_memory_sees_allocations():
    import torch

    small = peak_memory_bytes(lambda: torch.ones(1024, 1024).sum(), torch.device("cpu"))
    large = peak_memory_bytes(lambda: torch.ones(4096, 1024).sum(), torch.device("cpu"))
    if small != small:  # NaN: mallinfo2 unavailable (not glibc)
        pytest.skip("peak CPU memory needs glibc's mallinfo2")
    assert large > 3 * small > 0


def test_device_naming():
    """One description of the device for records and benchmark tables; 'auto' falls back to CPU."""
    import torch

    from hkt.device import describe_device, resolve_device
    from hkt.errors import ConfigError

    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
        with pytest.raises(ConfigError, match="train.device.*no CUDA device"):
            resolve_device("cuda", source="config key 'train.device'")
    else:
        with pytest.raises(ConfigError, match=r"'cuda:99': this machine has \d+ CUDA device"):
            resolve_device("cuda:99")
    with pytest.raises(ConfigError, match="not a device"):
        resolve_device("tpu0")
    text = describe_device(torch.device("cpu"))
    assert text.startswith("cpu (") and f"{torch.get_num_threads()} threads" in text


def test_a_cpu_is_named_by_its_model_where_the_system_names_it(tmp_path, monkeypatch):
    """Two machines' CPU runs are told apart by their records: the device names the model from
    /proc/cpuinfo (x86: 'model name'), and leaves it out, not guessed, where none is given."""
    import platform

    import torch

    from hkt import device

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                    "model name\t: AMD EPYC  7B13 64-Core Processor\nflags\t: fpu\n\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC  7B13 64-Core Processor\n")
    assert device.cpu_model(info) == "AMD EPYC 7B13 64-Core Processor"
    monkeypatch.setattr(platform, "processor", lambda: "")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 243.75\nCPU implementer\t: 0x41\n")
    assert device.cpu_model(arm) is None and device.cpu_model(tmp_path / "absent") is None
    monkeypatch.setattr(device, "cpu_model", lambda: "AMD EPYC 7B13")
    assert device.describe_device(torch.device("cpu")) == (
        f"cpu (AMD EPYC 7B13, {platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} threads)")
    monkeypatch.setattr(device, "cpu_model", lambda: None)
    assert device.describe_device(torch.device("cpu")).startswith(f"cpu ({platform.machine()}, ")
