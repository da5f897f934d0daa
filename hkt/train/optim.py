"""The optimizer and its schedule: AdamW without decay on biases, norms and embeddings; linear
warmup, then cosine, linear or constant learning rate (``config/optim``).

Parameter groups. Every parameter goes to one of two groups, in ``named_parameters`` order:
weight decay ``optim.weight_decay`` (matrices) or none (biases, norms, embeddings, vectors),
both at ``optim.lr``. A module may give some of its own parameters other AdamW settings (what
S4 does with a ``_optim`` attribute on the tensor, declared here per module, which survives
copies): an attribute ``optimizer_settings`` mapping a parameter's attribute name to
``{"lr": …, "weight_decay": …}`` (both keys; a value None is the optimiser's own,
``optim.lr`` or ``optim.weight_decay``, as a key S4 leaves out of ``_optim``). Such parameters
leave the two default groups and form one more group per distinct setting, appended after
them in order of first appearance; the values come from the module's config (S4D's:
``model.mixer.ssm_lr``, ``ssm_weight_decay``, ``dt_lr``, ``D_weight_decay``). The schedule scales every group's peak learning rate alike. A model
that declares none (MHA, HKT, conv) gets exactly the two groups it always had, so its runs are
unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

__all__ = ["lr_factor", "build_optimizer", "parameter_groups", "declared_settings"]


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


SETTINGS = ("lr", "weight_decay")  # what a module's ``optimizer_settings`` sets per parameter


def declared_settings(model: nn.Module, optim_cfg: Any) -> dict[int, dict[str, float]]:
    """id(parameter) -> the AdamW settings its module declares for it (``optimizer_settings``),
    a None there read as ``optim_cfg``'s."""
    out: dict[int, dict[str, float]] = {}
    for module_name, module in model.named_modules():
        for name, settings in getattr(module, "optimizer_settings", {}).items():
            where = f"{type(module).__name__} ({module_name or 'the model'})"
            param = module._parameters.get(name)
            if param is None:
                raise ValueError(f"{where}.optimizer_settings names {name!r}, which is not one "
                                 "of its own parameters")
            if sorted(settings) != sorted(SETTINGS):
                raise ValueError(f"{where}.optimizer_settings[{name!r}] sets "
                                 f"{', '.join(sorted(settings)) or 'nothing'}; it must set exactly "
                                 f"{', '.join(SETTINGS)}")
            out[id(param)] = {k: float(optim_cfg[k] if v is None else v)
                              for k, v in settings.items()}
    return out


def parameter_groups(model: nn.Module, optim_cfg: Any) -> list[dict[str, Any]]:
    """AdamW's parameter groups: decay, no decay, then one per declared setting (module doc)."""
    no_decay: set[int] = set()
    for module in model.modules():
        if isinstance(module, (nn.Embedding, nn.LayerNorm)):
            no_decay.update(id(p) for p in module.parameters(recurse=False))
    declared = declared_settings(model, optim_cfg)
    decay, other = [], []
    extra: dict[tuple[tuple[str, float], ...], list[nn.Parameter]] = {}
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if id(p) in declared:
            extra.setdefault(tuple(sorted(declared[id(p)].items())), []).append(p)
            continue
        (other if p.ndim < 2 or id(p) in no_decay else decay).append(p)
    groups = [{"params": decay, "weight_decay": float(optim_cfg.weight_decay)},
              {"params": other, "weight_decay": 0.0}]
    for settings, params in extra.items():
        groups.append({"params": params, **dict(settings)})
    return groups


def build_optimizer(model: nn.Module, optim_cfg: Any, total_steps: int, device: torch.device):
    """AdamW (no weight decay on biases, norms, embeddings, positions; declared parameters with
    their own settings) + LambdaLR schedule."""
    groups = parameter_groups(model, optim_cfg)
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
