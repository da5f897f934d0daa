"""The optimizer and its schedule: AdamW without decay on biases, norms and embeddings; linear
warmup, then cosine, linear or constant learning rate (``config/optim``)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

__all__ = ["lr_factor", "build_optimizer"]


def lr_factor(step: int, *, warmup: int, total: int, schedule: str, min_ratio: float) -> float:
    """Learning-rate multiplier for update ``step`` (0-based): linear warmup, then decay."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "cosine":
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return min_ratio + (1 - min_ratio) * (1 - progress)  # linear


def build_optimizer(model: nn.Module, optim_cfg: Any, total_steps: int, device: torch.device):
    """AdamW (no weight decay on biases, norms, embeddings, positions) + LambdaLR schedule."""
    no_decay: set[int] = set()
    for module in model.modules():
        if isinstance(module, (nn.Embedding, nn.LayerNorm)):
            no_decay.update(id(p) for p in module.parameters(recurse=False))
    decay, other = [], []
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (other if p.ndim < 2 or id(p) in no_decay else decay).append(p)
    groups = [{"params": decay, "weight_decay": float(optim_cfg.weight_decay)},
              {"params": other, "weight_decay": 0.0}]
    kwargs: dict[str, Any] = {}
    if device.type == "cuda":
        kwargs["fused"] = True
    opt = torch.optim.AdamW(groups, lr=float(optim_cfg.lr), betas=tuple(optim_cfg.betas),
                            eps=float(optim_cfg.eps), **kwargs)
    warmup, schedule = int(optim_cfg.warmup_steps), str(optim_cfg.schedule)
    min_ratio = float(optim_cfg.min_lr_ratio)

    def factor(step: int) -> float:
        return lr_factor(step, warmup=warmup, total=total_steps, schedule=schedule,
                         min_ratio=min_ratio)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    return opt, sched
