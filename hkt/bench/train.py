"""``hkt bench train``: training throughput of our models (MHA, HKT, S4D by default; any registered
mixer by ``--models``) beside ``nn.TransformerEncoder``.

One training step = forward, cross-entropy, backward, gradient clipping, AdamW step, on random
tokens of the benchmark shape (by default the ``cpu`` profile's: ListOps T=512, batch 32,
width 64, 2 layers, 2 heads, FFN 128). The baseline is what a user would write with PyTorch's
own layers: the same embedding, positions, pre-norm blocks, final norm, mean pooling and head,
with ``nn.TransformerEncoder`` (``norm_first=True``, GELU) in the middle. All models get the
same padding mask, as in training. Prints a Markdown table and writes
``train_throughput.{csv,md}`` under ``--out`` (default ``results/bench``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import nn

from hkt.mixers import MIXERS
from hkt.bench.common import add_run_arguments, csv_text, torch_threads, write_outputs
from hkt.train.run_config import compose_train
from hkt.device import describe_device, resolve_device
from hkt.errors import ConfigError
from hkt.models import build_model
from hkt.report.writers import markdown
from hkt.train.step_timing import TrainStep

COLUMNS = ("model", "seq_len", "batch_size", "d_model", "n_layers", "n_heads", "d_ffn",
           "n_params", "ms_per_step", "ms_per_step_min", "samples_per_s", "speedup_vs_torch",
           "steps", "threads", "device", "torch_version")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="cpu",
                        help="take the default shapes from this profile (default: cpu)")
    parser.add_argument("--task", default="listops", help="task config for T and classes (default: listops)")
    parser.add_argument("--seq-len", type=int, help="sequence length T (default: the task's max_length)")
    parser.add_argument("--batch-size", type=int, help="batch size (default: the profile's)")
    parser.add_argument("--d-model", type=int)
    parser.add_argument("--n-layers", type=int)
    parser.add_argument("--n-heads", type=int)
    parser.add_argument("--d-ffn", type=int)
    parser.add_argument("--models", default="mha,hkt,s4d,torch,torch_fused",
                        help="comma-separated: mha, hkt, s4d, conv (our models: any registered "
                             "mixer), hkt_tile (HKT through the Triton tile kernel, impl=tile: "
                             "CUDA only), torch (nn.TransformerEncoder as a user writes it: "
                             "`dropout` also drops attention probabilities), torch_fused (the "
                             "same with attention dropout off)")
    add_run_arguments(parser, steps=10, warmup=3)


def torch_encoder_classifier(vocab_size: int, num_classes: int, max_length: int, model_cfg: dict[str, Any]):
    """The ``nn.TransformerEncoder`` baseline, as a user would write it with PyTorch's layers."""
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = model_cfg["d_model"]
            self.embed = nn.Embedding(vocab_size, d, padding_idx=0)
            self.pos = nn.Parameter(torch.randn(max_length, d) * 0.02)
            self.emb_dropout = nn.Dropout(model_cfg.get("emb_dropout", 0.0))
            layer = nn.TransformerEncoderLayer(
                d, model_cfg["n_heads"], dim_feedforward=model_cfg["d_ffn"],
                dropout=model_cfg.get("dropout", 0.0), activation="gelu", batch_first=True,
                norm_first=True, layer_norm_eps=model_cfg.get("norm_eps", 1e-5))
            self.encoder = nn.TransformerEncoder(layer, model_cfg["n_layers"],
                                                 enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d, eps=model_cfg.get("norm_eps", 1e-5))
            self.head = nn.Linear(d, num_classes)

        def forward(self, tokens, mask):
            x = self.emb_dropout(self.embed(tokens) + self.pos[: tokens.shape[1]])
            x = self.encoder(x, src_key_padding_mask=~mask)
            x = self.norm(x)
            w = mask.to(x.dtype).unsqueeze(-1)
            return self.head((x * w).sum(1) / w.sum(1).clamp_min(1.0))

    return Model()


SIZES = ("d_model", "n_layers", "n_heads", "d_ffn")


def _shapes(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """The benchmark shape, the model sizes, and the composed training config (optimizer,
    precision, clipping) every model's step runs under."""
    cfg = compose_train([f"profile={args.profile}", f"task={args.task}", "model=mha",
                         "tracking.enabled=false"])
    model = OmegaConf.to_container(cfg.model, resolve=True)
    for key in SIZES:
        if getattr(args, key) is not None:
            model[key] = getattr(args, key)
    shape = {"seq_len": args.seq_len or int(cfg.task.max_length),
             "batch_size": args.batch_size or int(cfg.train.batch_size),
             "num_classes": int(cfg.task.num_classes), "vocab_size": 32}
    return shape, model, cfg


# benchmark names for one of our models with overrides: (model config, overrides)
VARIANTS_OF_OURS = {"hkt_tile": ("hkt", ["model.mixer.impl=tile"])}


def _build(name: str, shape: dict[str, Any], model_cfg: dict[str, Any], device):
    kw = dict(vocab_size=shape["vocab_size"], num_classes=shape["num_classes"],
              max_length=shape["seq_len"])
    if name in ("torch", "torch_fused"):
        model = torch_encoder_classifier(model_cfg=model_cfg, **kw).to(device)
        if name == "torch_fused":  # attention-probability dropout off: SDPA's fused kernel
            for layer in model.encoder.layers:
                layer.self_attn.dropout = 0.0
        return model
    name, extra = VARIANTS_OF_OURS.get(name, (name, []))
    if name not in MIXERS:  # our models: every registered mixer (config/model/NAME.yaml)
        raise ConfigError(f"--models: unknown model {name!r} "
                          f"({', '.join([*MIXERS, *VARIANTS_OF_OURS, 'torch', 'torch_fused'])})")
    cfg = compose_train([f"model={name}", *(f"model.{k}={model_cfg[k]}" for k in SIZES), *extra])
    return build_model(OmegaConf.to_container(cfg.model, resolve=True), **kw).to(device)


class _Trainer:
    """One model's training step on fixed random inputs of the benchmark shape."""

    def __init__(self, model, shape: dict[str, Any], train_cfg: Any, device, seed: int, total_steps: int):
        g = torch.Generator().manual_seed(seed)
        b, t = shape["batch_size"], shape["seq_len"]
        self.tokens = torch.randint(1, shape["vocab_size"], (b, t), generator=g).to(device)
        self.mask = torch.ones(b, t, dtype=torch.bool, device=device)
        self.labels = torch.randint(0, shape["num_classes"], (b,), generator=g).to(device)
        self.train_step = TrainStep(model, train_cfg, device, total_steps)

    def step(self) -> float:
        """Seconds for forward, loss, backward, clipping and the optimizer step."""
        return self.train_step.time(self.tokens, self.mask, self.labels)


def time_models(trainers: dict[str, _Trainer], *, steps: int, warmup: int) -> dict[str, list[float]]:
    """Warm every model up, then time them round-robin, one step each per round, so that a
    machine whose load drifts (shared CPUs) slows every model alike."""
    for tr in trainers.values():
        for _ in range(warmup):
            tr.step()
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(steps):
        for name, tr in trainers.items():
            times[name].append(tr.step())
    return times


def report(rows: list[dict[str, Any]]) -> str:
    """The benchmark's Markdown: a heading with the shape and device, then one row per model."""
    r0 = rows[0]
    head = (f"Training throughput, T={r0['seq_len']}, batch {r0['batch_size']}, width "
            f"{r0['d_model']}, {r0['n_layers']} layers, {r0['n_heads']} heads, FFN {r0['d_ffn']} "
            f"({r0['device']}, torch {r0['torch_version']}; median of "
            f"{r0['steps']} steps)")
    label = {"mha": "ours: MHA", "hkt": "ours: HKT", "hkt_tile": "ours: HKT, tile kernel",
             "s4d": "ours: S4D", "conv": "ours: conv",
             "torch": "nn.TransformerEncoder",
             "torch_fused": "nn.TransformerEncoder, no attention dropout"}
    table = markdown(
        ["model", "params", "ms/step", "samples/s", "speed-up vs nn.TransformerEncoder"],
        [[label.get(r["model"], r["model"]), f"{r['n_params']:,}", f"{r['ms_per_step']:.1f}",
          f"{r['samples_per_s']:,.1f}",
          "" if r["speedup_vs_torch"] is None else f"{r['speedup_vs_torch']:.2f}x"] for r in rows],
        align="lrrrr")
    return f"{head}\n\n{table}"


def run(args: argparse.Namespace) -> int:
    with torch_threads(args.threads):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    shape, model_cfg, train_cfg = _shapes(args)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    trainers, n_params = {}, {}
    for name in names:
        torch.manual_seed(args.seed)
        model = _build(name, shape, model_cfg, device)
        n_params[name] = sum(p.numel() for p in model.parameters())
        trainers[name] = _Trainer(model, shape, train_cfg, device, args.seed, args.steps + args.warmup)
    times = time_models(trainers, steps=args.steps, warmup=args.warmup)
    rows = []
    for name in names:
        med = statistics.median(times[name])
        rows.append({
            "model": name, "seq_len": shape["seq_len"], "batch_size": shape["batch_size"],
            **{k: model_cfg[k] for k in SIZES},
            "n_params": n_params[name],
            "ms_per_step": 1000 * med, "ms_per_step_min": 1000 * min(times[name]),
            "samples_per_s": shape["batch_size"] / med, "speedup_vs_torch": None,
            "steps": args.steps, "threads": torch.get_num_threads(),
            "device": describe_device(device), "torch_version": torch.__version__,
        })
    ref = next((r for r in rows if r["model"] == "torch"), None)
    if ref is not None:
        for r in rows:
            r["speedup_vs_torch"] = round(ref["ms_per_step"] / r["ms_per_step"], 3)
    md = report(rows)
    write_outputs(Path(args.out), "train_throughput", csv_text(rows, COLUMNS), md)
    print(md, end="")
    return 0
