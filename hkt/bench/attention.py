"""``hkt bench attention``: forward+backward time and peak memory of MHA vs HKT over T.

Variants: ``mha`` (the baseline), ``hkt-fused`` (one fused kernel call; on CPU through the
chunked wrapper of ``hkt/mixers/fused_cpu.py``), ``hkt-fused-plain`` (the same
factorisation through plain autograd SDPA, as on GPU), ``hkt-materialised`` (materialised
scores; stops when over its time or memory budget) and ``hkt-tile`` (the Triton tile kernel of
``hkt/mixers/tile_attention.py``: on a CUDA device only; elsewhere skipped with the reason printed,
and never timed in Triton's CPU interpreter). Timings interleave the variants repetition by
repetition so that machine noise hits them alike; the median is reported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch
import yaml
from omegaconf import OmegaConf

from hkt.mixers import build_mixer, score_cost_ratio, tile_attention
from hkt.bench.common import csv_text, markdown_numbers, write_outputs
from hkt.config_compose import config_dir
from hkt.train.run_config import compose_train
from hkt.device import describe_device, resolve_device
from hkt.train.step_timing import median, peak_memory_bytes, time_call

VARIANTS = ("mha", "hkt-fused", "hkt-fused-plain", "hkt-materialised", "hkt-tile")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None,
                        help="benchmark settings (default: config/bench/attention.yaml)")
    parser.add_argument("--lengths", type=int, nargs="+", help="sequence lengths T")
    parser.add_argument("--batch", type=int, help="batch size")
    parser.add_argument("--repeats", type=int, help="timed repetitions per point")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--out", type=Path, default=Path("results/bench"), help="output directory")


def load_settings(args: argparse.Namespace) -> dict[str, Any]:
    path = args.config or config_dir() / "bench" / "attention.yaml"
    settings = yaml.safe_load(path.read_text())
    for key in ("lengths", "batch", "repeats"):
        if getattr(args, key, None) is not None:
            settings[key] = getattr(args, key)
    model = OmegaConf.to_container(compose_train(["model=hkt"]).model.mixer)  # config/model/hkt.yaml's
    model.pop("impl", None)
    settings["hkt"] = {**model, **(settings.get("hkt") or {})}
    return settings


def build_variant(name: str, settings: dict[str, Any], device: torch.device) -> torch.nn.Module:
    d_model = settings["heads"] * settings["head_dim"]
    if name == "mha":
        module = build_mixer("mha", d_model=d_model, n_heads=settings["heads"])
    else:
        impl = {"hkt-materialised": "materialised", "hkt-fused-plain": "sdpa", "hkt-tile": "tile"}.get(name, "fused")
        module = build_mixer("hkt", d_model=d_model, n_heads=settings["heads"], impl=impl,
                                 **settings["hkt"])
        module.tile = tile_attention.TileSizes(**(settings.get("tile") or {}))
    return module.to(device)


def skip_reason(name: str, settings: dict[str, Any], device: torch.device) -> str | None:
    """Why a variant cannot be timed here (None: it can): the tile kernel needs Triton and a
    CUDA device, and the layer's settings it computes; Triton's interpreter is never timed."""
    if name != "hkt-tile":
        return None
    hkt = settings["hkt"]
    if problem := tile_attention.config_problem(hkt["levels"], hkt["stride"], hkt["upsample"]):
        return f"{problem[0]}={problem[1]!r}: {problem[2]}"
    if reason := tile_attention.unavailable(torch.empty(0, device=device)):
        return reason
    if tile_attention.kernels().INTERPRETED:
        return "Triton's CPU interpreter is on (TRITON_INTERPRET=1); its times mean nothing"
    return None


def step_fn(module: torch.nn.Module, x: torch.Tensor, device: torch.device):
    """One forward+backward, under bf16 autocast on CUDA."""

    def step() -> None:
        x.grad = None
        module.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            y = module(x)
        y.float().sum().backward()

    return step


def run_benchmark(settings: dict[str, Any], variants: list[str], device: torch.device) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    modules = {name: build_variant(name, settings, device) for name in variants}
    d_model = settings["heads"] * settings["head_dim"]
    budget = settings["materialised"]
    ratio = score_cost_ratio(settings["hkt"]["levels"], settings["hkt"]["stride"])
    rows: list[dict[str, Any]] = []
    materialised_on = "hkt-materialised" in variants
    for t in settings["lengths"]:
        x = torch.randn(settings["batch"], t, d_model, device=device, requires_grad=True)
        active = [v for v in variants if v != "hkt-materialised" or materialised_on]
        if "hkt-materialised" in active:
            score_bytes = 4.0 * settings["batch"] * settings["heads"] * t * t * (settings["hkt"]["levels"] + 3)
            if score_bytes > budget["max_gib"] * 2**30:
                active.remove("hkt-materialised")
                materialised_on = False
        steps = {v: step_fn(modules[v], x, device) for v in active}
        for v in active:
            for _ in range(settings["warmup"]):
                steps[v]()
        times: dict[str, list[float]] = {v: [] for v in active}
        for _ in range(settings["repeats"]):
            for v in active:
                times[v].append(time_call(steps[v], device))
        memory = {v: peak_memory_bytes(steps[v], device) for v in active}
        base_time, base_mem = median(times.get("mha", [])), memory.get("mha", float("nan"))
        for v in active:
            ms = 1000 * median(times[v])
            rows.append(dict(
                T=t, variant=v, ms=ms, ms_min=1000 * min(times[v]), peak_mib=memory[v] / 2**20,
                time_ratio=ms / (1000 * base_time) if base_time == base_time else float("nan"),
                memory_ratio=memory[v] / base_mem if base_mem else float("nan"),
                analytic_score_ratio=1.0 if v == "mha" else ratio,
            ))
            print(f"T={t:5d} {v:16s} {ms:9.1f} ms  peak {memory[v] / 2**20:8.1f} MiB", flush=True)
        if materialised_on and median(times.get("hkt-materialised", [0.0])) > budget["max_seconds"]:
            materialised_on = False
    return rows


def report(rows: list[dict[str, Any]], settings: dict[str, Any], device: torch.device,
           skipped: dict[str, str] | None = None) -> str:
    hkt = settings["hkt"]
    header = ["T", "variant", "ms (median)", "peak MiB", "time / MHA", "memory / MHA", "analytic score cost"]
    table = markdown_numbers(header, [
        [r["T"], r["variant"], r["ms"], r["peak_mib"], r["time_ratio"], r["memory_ratio"],
         r["analytic_score_ratio"]] for r in rows
    ])
    growth = []
    fused = {r["T"]: r["peak_mib"] for r in rows if r["variant"] == "hkt-fused"}
    lengths = sorted(fused)
    for a, b in zip(lengths, lengths[1:]):
        growth.append(f"{a}→{b}: ×{fused[b] / fused[a]:.2f} memory for ×{b / a:.0f} length")
    lines = [
        "# Attention benchmark: forward + backward of one layer",
        "",
        f"Device: {describe_device(device)}; torch {torch.__version__}; "
        f"batch {settings['batch']}, {settings['heads']} heads × {settings['head_dim']}, "
        f"{'bf16 autocast' if device.type == 'cuda' else 'fp32'}; median of {settings['repeats']} runs. "
        f"HKT: levels={hkt['levels']}, stride={hkt['stride']}, fusion={hkt['fusion']}, "
        f"upsample={hkt['upsample']}.",
        "",
        table,
        "",
        "HKT-fused memory growth: " + ("; ".join(growth) if growth else "n/a"),
        "",
    ]
    lines += [f"Not run: {name}: {reason}." for name, reason in (skipped or {}).items()]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    device = resolve_device(args.device)
    skipped = {v: why for v in args.variants if (why := skip_reason(v, settings, device))}
    for name, why in skipped.items():
        print(f"{name}: skipped: {why}", flush=True)
    variants = [v for v in args.variants if v not in skipped]
    if not variants:
        print("error: no variant can run here (reasons above)", file=sys.stderr)
        return 2
    rows = run_benchmark(settings, variants, device)
    table = [{**r, "device": describe_device(device)} for r in rows]
    markdown = report(rows, settings, device, skipped)
    csv_path, md_path = write_outputs(args.out, "attention", csv_text(table, table[0]), markdown)
    print()
    print(markdown)
    print(f"wrote {csv_path} and {md_path}")
    return 0
