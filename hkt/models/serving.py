"""A trained classifier as MLflow stores it (``mlflow.pytorch``): one tensor in, logits out.

MLflow's pyfunc calls a model with one tensor, and CIFAR-10 uses every id (pixel 0 is id 0),
so the padding cannot be read from the ids themselves: the served model takes token ids
right-padded with -1 (:data:`PAD`), and the mask is where the ids are not negative. With the
mask the loader gives (``hkt.data.load``) it computes exactly what the trained model computes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PAD", "TokenClassifier", "served_tokens"]

PAD = -1  # padding of the served model's input


class TokenClassifier(nn.Module):
    """``model(tokens, mask)`` as ``classifier(tokens)`` with padding ``PAD``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor) -> Tensor:
        mask = tokens != PAD
        return self.model(tokens.clamp(min=0), mask)


def served_tokens(tokens: Tensor, mask: Tensor) -> Tensor:
    """A loader batch's ``tokens`` and ``mask`` as the served model's one input."""
    return torch.where(mask, tokens, torch.full_like(tokens, PAD))
