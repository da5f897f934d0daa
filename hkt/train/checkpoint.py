"""Checkpoints: files that survive ``kill -9`` and load with ``torch.load(weights_only=True)``;
:class:`TrainState`, the loop's own state that ``last.pt`` carries; and :class:`Checkpoint`,
the object a run holds for its checkpoints (resuming from ``last.pt``, writing ``last.pt`` and
``best.pt``).

Every file is written atomically (:mod:`hkt.fileio`): a reader sees the old file or the new
one, never half of one. Checkpoints hold only tensors and plain Python containers/scalars: RNG
states are converted to tensors/lists here, so that loading needs no pickled objects.
"""

from __future__ import annotations

import io
import pickle
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn, optim

from hkt.errors import TrainingError
from hkt.fileio import atomic_write_bytes
from hkt.predictions import SplitPredictions
from hkt.run_record import HISTORY_NAME, write_history
from hkt.train import rundir
from hkt.train.data import RunData

__all__ = ["CHECKPOINT_FORMAT", "VAL_PREDICTIONS", "TrainState", "save_checkpoint",
           "load_checkpoint", "predictions_state", "predictions_from_state", "rng_state",
           "set_rng_state", "Checkpoint"]

#: Version of the checkpoint layout; a checkpoint of another version is refused on resume.
CHECKPOINT_FORMAT = 1
#: ``best.pt``'s key for the predictions of the validation that made it the best (a best.pt
#: of before issue 58 lacks it: the run's end evaluates the validation split again).
VAL_PREDICTIONS = "val_predictions"


def _no_best() -> dict[str, Any]:
    return {"acc": -1.0, "loss": None, "step": None}


def _empty_window() -> dict[str, Any]:
    return {"loss": 0.0, "correct": 0, "n": 0, "steps": 0, "time": 0.0}


@dataclass
class TrainState:
    """What the training loop itself carries from step to step and across a resume (beside the
    model, optimizer, scheduler, sampler and RNG states). Stored flat in ``last.pt`` under these
    field names."""

    step: int = 0  # optimizer steps taken
    best: dict[str, Any] = field(default_factory=_no_best)  # best validation: acc, loss, step
    history: list[dict[str, Any]] = field(default_factory=list)  # history.csv rows so far
    window: dict[str, Any] = field(default_factory=_empty_window)  # the partial logging window
    train_time_s: float = 0.0  # training time (evaluation excluded), over all sessions
    wall_time_s: float = 0.0  # wall time of the earlier sessions
    mlflow_run_id: str | None = None
    # A sync point a stop cut short while validating: its row so far (step, training metrics)
    # and what was due (log, eval, checkpoint). The resumed run completes it before training on.
    interrupted_sync: dict[str, Any] | None = None

    def to_checkpoint(self) -> dict[str, Any]:
        return asdict(self)  # a deep copy: the checkpoint does not alias the live state

    @classmethod
    def from_checkpoint(cls, ck: dict[str, Any]) -> "TrainState":
        return cls(step=int(ck["step"]), best=dict(ck["best"]), history=list(ck["history"]),
                   window=dict(ck["window"]), train_time_s=float(ck["train_time_s"]),
                   wall_time_s=float(ck["wall_time_s"]), mlflow_run_id=ck.get("mlflow_run_id"),
                   interrupted_sync=ck.get("interrupted_sync"))


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """``torch.save`` ``state`` atomically (see the module docstring)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    atomic_write_bytes(path, data)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``; a clear error if it is corrupt."""
    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:  # torch would say only "EOFError: "
        raise TrainingError(f"cannot load checkpoint {path}: the file is empty (0 bytes); delete "
                            "it (and the run directory's other checkpoints) to start over")
    try:
        ck = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise TrainingError(f"no checkpoint at {path}") from None
    except pickle.UnpicklingError:
        # torch's own message advises weights_only=False, i.e. running the file's code: never that
        raise TrainingError(f"{path} is not a checkpoint this program wrote: it holds Python objects "
                            "that hkt checkpoints never contain (refused, nothing in it was run); "
                            "delete it (and the run directory's other checkpoints) to start over") from None
    except Exception as exc:  # truncated or corrupt files
        raise TrainingError(f"cannot load checkpoint {path}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}; delete it "
                            "(and the run directory's other checkpoints) to start over") from None
    return ck


def predictions_state(p: SplitPredictions) -> dict[str, torch.Tensor]:
    """One split's predictions as the tensors a checkpoint holds."""
    return {"rows": torch.from_numpy(p.rows), "labels": torch.from_numpy(p.labels),
            "preds": torch.from_numpy(p.preds), "probs": torch.from_numpy(p.probs)}


def predictions_from_state(state: dict[str, torch.Tensor]) -> SplitPredictions:
    """The predictions :func:`predictions_state` stored."""
    return SplitPredictions(*(state[k].numpy() for k in ("rows", "labels", "preds", "probs")))


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch CPU (and CUDA) RNG states as tensors and plain values."""
    version, mt, gauss_next = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": int(version), "state": torch.tensor(mt, dtype=torch.int64),
                   "gauss_next": gauss_next},
        "numpy": {"name": str(np_name), "keys": torch.from_numpy(np_keys.astype(np.int64)),
                  "pos": int(np_pos), "has_gauss": int(np_has_gauss),
                  "cached_gaussian": float(np_cached)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss_next"]))
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"],
                         n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


class Checkpoint:
    """A run's checkpoints: ``last.pt`` (everything the next step depends on: the run resumes
    from it) and ``best.pt`` (the best validation's model and predictions), written from the
    training objects it is given, each with the run's config and its data's checksums."""

    def __init__(self, run_dir: Path, cfg: Any, cfg_dict: dict[str, Any], data: RunData,
                 model: nn.Module, opt: optim.Optimizer, sched: Any, batches: Any) -> None:
        self.run_dir, self.cfg, self.cfg_dict, self.data = run_dir, cfg, cfg_dict, data
        self.model, self.opt, self.sched, self.batches = model, opt, sched, batches
        self.last_path = run_dir / "checkpoints" / "last.pt"
        self.best_path = run_dir / "checkpoints" / "best.pt"

    def resume(self) -> TrainState:
        """Load ``last.pt`` into the model, optimizer, scheduler, sampler and RNGs, after
        checking it is this config's and data's; return the loop's state it holds."""
        ck = load_checkpoint(self.last_path)
        if ck.get("format") != CHECKPOINT_FORMAT:
            raise TrainingError(f"{self.last_path} has checkpoint format {ck.get('format')!r}, "
                                f"this version writes {CHECKPOINT_FORMAT}; start a new run")
        rundir.check_same_config(ck["config"], self.cfg, self.last_path)
        rundir.check_same_data(ck, self.data, self.last_path)
        try:
            self.model.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["optimizer"])
            self.sched.load_state_dict(ck["scheduler"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise TrainingError(f"{self.last_path} does not fit this model/optimizer: "
                                f"{str(exc).splitlines()[0]}") from None
        self.batches.load_state_dict(ck["sampler"])
        set_rng_state(ck["rng"])
        return TrainState.from_checkpoint(ck)

    def save_last(self, state: TrainState, wall_time_s: float,
                  rng: dict[str, Any] | None = None) -> None:
        """``last.pt`` of the loop's ``state`` (its wall time so far ``wall_time_s``), and the
        history beside it; ``rng``: the RNG states to store (default: as they are now)."""
        checkpoint = {
            "format": CHECKPOINT_FORMAT,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "rng": rng_state() if rng is None else rng,
            "sampler": self.batches.state_dict(),
            **state.to_checkpoint(),
            "wall_time_s": wall_time_s,
            "config": self.cfg_dict,
            "data_checksums": dict(self.data.checksums),
            "data_content_checksums": dict(self.data.content_checksums),
        }
        save_checkpoint(checkpoint, self.last_path)
        write_history(state.history, self.run_dir / HISTORY_NAME)

    def save_best(self, step: int, metrics: dict[str, Any]) -> None:
        """``best.pt``: the model of ``step`` and its validation ``metrics``, the predictions
        included (what the run's ``predictions.parquet`` holds of the validation split at the
        end)."""
        save_checkpoint({"format": CHECKPOINT_FORMAT, "model": self.model.state_dict(),
                         "config": self.cfg_dict, "step": step,
                         "val_accuracy": metrics["acc"], "val_loss": metrics["loss"],
                         VAL_PREDICTIONS: predictions_state(metrics["predictions"])},
                        self.best_path)

    def kept_step(self) -> int | None:
        """The step ``last.pt`` holds, or None where there is none yet."""
        return load_checkpoint(self.last_path)["step"] if self.last_path.exists() else None
