"""Training runs from Hydra configs, tracked in MLflow, resumable and reproducible.

``hkt train`` (:mod:`hkt.train.cli`) composes ``config/train.yaml`` (:mod:`hkt.train.config`),
trains one model (:mod:`hkt.train.loop`) with atomic, ``weights_only``-safe checkpoints
(:mod:`hkt.train.checkpoint`), logs to MLflow (:mod:`hkt.train.tracking`) and writes the run
record last (:mod:`hkt.train.record`). Submodules import torch/MLflow lazily from here.
"""

from hkt.train.record import load_record, validate_record

__all__ = ["load_record", "validate_record", "train", "load_config"]


def __getattr__(name: str):
    if name == "train":
        from hkt.train.loop import train

        return train
    if name == "load_config":
        from hkt.train.config import load_config

        return load_config
    raise AttributeError(name)
