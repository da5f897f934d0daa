"""The partial logging window of a training run: the loss and correct answers since the last
logged step, accumulated on the device (no sync per step on CUDA), and the throughput of its
steps. The loop (:mod:`hkt.train.loop`) adds each step to it and takes a history row from it at
each logged step; a checkpoint carries its :meth:`Window.state`, so that a resumed run logs the
same rows."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["Window"]


class Window:
    """The partial logging window (loss and correct answers since the last logged step),
    accumulated on the device: no sync per step on CUDA. A checkpoint carries its
    :meth:`state`, so that a resumed run logs the same rows."""

    def __init__(self, saved: dict[str, Any], device: torch.device) -> None:
        self.loss = torch.tensor(saved["loss"], dtype=torch.float64, device=device)
        self.correct = torch.tensor(saved["correct"], dtype=torch.int64, device=device)
        self.bad = torch.zeros((), dtype=torch.bool, device=device)  # a non-finite step
        self.n, self.steps, self.time = int(saved["n"]), int(saved["steps"]), float(saved["time"])

    def add(self, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor,
            bad: torch.Tensor) -> None:
        self.bad |= bad
        self.loss += loss.detach().double() * labels.numel()
        self.correct += (logits.detach().argmax(-1) == labels).sum()
        self.n += labels.numel()
        self.steps += 1

    def samples_per_s(self, batch_size: int) -> float | None:
        return self.steps * batch_size / self.time if self.time > 0 else None

    def take(self, lr: float, batch_size: int) -> dict[str, Any]:
        """The logged row's training metrics; the window starts afresh."""
        row = {"train_loss": self.loss.item() / max(1, self.n),
               "train_acc": self.correct.item() / max(1, self.n), "lr": lr,
               "samples_per_s": self.samples_per_s(batch_size)}
        self.loss.zero_()
        self.correct.zero_()
        self.n = self.steps = 0
        self.time = 0.0
        return row

    def state(self) -> dict[str, Any]:
        return {"loss": self.loss.item(), "correct": int(self.correct.item()), "n": self.n,
                "steps": self.steps, "time": self.time}
