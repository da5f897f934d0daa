"""The forward passes of training: one training step (shared with ``hkt bench``, so that the
benchmarks time what ``hkt train`` runs) and one evaluation pass, under the same precision."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hkt.errors import ConfigError, TrainingError
from hkt.predictions import PROB_DTYPE, SplitPredictions

#: The probabilities' dtype as torch names it (the file's: hkt.predictions.PROB_DTYPE)
PROB_TORCH = {np.float16: torch.float16, np.float32: torch.float32}[PROB_DTYPE]

__all__ = ["autocast_dtype", "seed_everything", "to_device", "forward_backward", "evaluate"]


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``train.precision`` (auto | fp32 | bf16) on ``device``; None = fp32."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            if precision == "bf16":
                raise ConfigError("config key 'train.precision' = 'bf16': this GPU does not "
                                  "support bfloat16; use train.precision=fp32")
            return None
        return torch.bfloat16
    return None


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (what model init and dropout use)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def to_device(batch: dict[str, Any], device: torch.device) -> tuple[torch.Tensor, ...]:
    """(tokens, mask, labels) of a loader batch on ``device`` (asynchronous copies on CUDA)."""
    nb = device.type == "cuda"
    return (batch["tokens"].to(device, non_blocking=nb), batch["mask"].to(device, non_blocking=nb),
            batch["labels"].to(device, non_blocking=nb))


def forward_backward(forward: Any, opt: torch.optim.Optimizer, params: list[nn.Parameter],
                     tokens: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor, *,
                     amp: torch.dtype | None, grad_clip: float | None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One training step up to the optimizer: forward under autocast, cross-entropy, backward,
    gradient clipping. Returns (loss, float logits, gradient norm; 0 without clipping) so the
    caller can check them before ``opt.step()``. The one step both training and the benchmarks
    run."""
    with torch.autocast(tokens.device.type, dtype=amp or torch.float32, enabled=amp is not None):
        logits = forward(tokens, mask)
    logits = logits.float()
    loss = F.cross_entropy(logits, labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        gnorm = torch.nn.utils.clip_grad_norm_(params, float(grad_clip))
    else:
        gnorm = torch.zeros((), device=tokens.device)
    return loss, logits, gnorm


@torch.no_grad()
def evaluate(forward, model: nn.Module, batches, device: torch.device,
             amp: torch.dtype | None, on_batch: Callable[[int, int], None] | None = None,
             *, keep: bool = False) -> dict[str, Any]:
    """Mean loss, accuracy and example count ``n`` over ``batches`` (model in eval mode,
    restored afterwards). ``on_batch(batches_done, examples_done)`` is called after each batch
    (progress lines during a long validation). ``keep``: also ``predictions``, every example's
    row in its split's file (the batch's ``index``), label, predicted class and probabilities
    (:class:`hkt.predictions.SplitPredictions`), from this same pass, whose accuracy is
    ``acc``."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    n = 0
    kept: list[tuple[torch.Tensor, ...]] = []
    for i, batch in enumerate(batches):
        tokens, mask, labels = to_device(batch, device)
        with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
            logits = forward(tokens, mask)
        logits = logits.float()
        loss_sum += F.cross_entropy(logits, labels, reduction="sum").double()
        pred = logits.argmax(-1)
        correct += (pred == labels).sum()
        n += labels.numel()
        if keep:  # on the device until the pass ends: no copy (and sync) per batch
            kept.append((batch["index"], labels, pred, logits.softmax(-1).to(PROB_TORCH)))
        if on_batch is not None:
            on_batch(i + 1, n)
    model.train(was_training)
    if n == 0:
        raise TrainingError("evaluation saw no examples (empty split?)")
    out: dict[str, Any] = {"loss": loss_sum.item() / n, "acc": correct.item() / n, "n": n}
    if keep:
        rows, labels, preds, probs = (torch.cat([k[j].cpu() for k in kept]).numpy()
                                      for j in range(4))
        out["predictions"] = SplitPredictions(rows, labels, preds, probs)
    return out
