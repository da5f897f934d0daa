"""Checkpoints: files that survive ``kill -9`` and load with ``torch.load(weights_only=True)``;
:class:`TrainState`, the loop's own state that ``last.pt`` carries; and :class:`Checkpointing`,
a run's use of them (resuming from ``last.pt``, writing ``last.pt`` and ``best.pt``, the lines a
stopped or diverged run gives).

Every file is written atomically (:mod:`hkt.fileio`): a reader sees the old file or the new
one, never half of one. Checkpoints hold only tensors and plain Python containers/scalars: RNG
states are converted to tensors/lists here, so that loading needs no pickled objects.
"""

from __future__ import annotations

import io
import pickle
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn, optim

from hkt.errors import TrainingError
from hkt.fileio import atomic_write_bytes
from hkt import signals
from hkt.predictions import SplitPredictions
from hkt.run_record import HISTORY_NAME, write_history
from hkt.train import rundir
from hkt.train.data import RunData

__all__ = ["CHECKPOINT_FORMAT", "VAL_PREDICTIONS", "TrainState", "save_checkpoint",
           "load_checkpoint", "predictions_state", "predictions_from_state", "rng_state",
           "set_rng_state", "Checkpointing"]

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


class Checkpointing:
    """Checkpoints and stop lines of one session of a run: a base of
    :class:`hkt.train.loop._Run`, kept apart so the loop reads as the loop; the methods use the
    run's attributes, which ``_Run.__init__`` sets (declared below)."""

    cfg: Any
    data: RunData
    run_dir: Path
    last_path: Path
    best_path: Path
    model: nn.Module
    opt: optim.Optimizer
    sched: Any
    batches: Any
    cfg_dict: Any
    state: TrainState
    session_start: float

    def say(self, msg: str) -> None:  # pragma: no cover - the run's own
        raise NotImplementedError

    def _resume(self) -> None:
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
        self.state = TrainState.from_checkpoint(ck)
        self.say(f"resuming from {self.last_path} at step {self.state.step}/{self.cfg.train.max_steps}")

    def _save_last(self, rng: dict[str, Any] | None = None) -> None:
        """``last.pt``: everything the next step depends on; ``rng``: the RNG states to store
        (default: as they are now)."""
        state = {
            "format": CHECKPOINT_FORMAT,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "rng": rng_state() if rng is None else rng,
            "sampler": self.batches.state_dict(),
            **self.state.to_checkpoint(),
            "wall_time_s": self._wall(),
            "config": self.cfg_dict,
            "data_checksums": dict(self.data.checksums),
            "data_content_checksums": dict(self.data.content_checksums),
        }
        save_checkpoint(state, self.last_path)
        write_history(self.state.history, self.run_dir / HISTORY_NAME)

    def _save_best(self, metrics: dict[str, Any]) -> None:
        """``best.pt``: the model of this step and its validation, the predictions included
        (what the run's ``predictions.parquet`` holds of the validation split at the end)."""
        save_checkpoint({"format": CHECKPOINT_FORMAT, "model": self.model.state_dict(),
                         "config": self.cfg_dict, "step": self.state.step,
                         "val_accuracy": metrics["acc"], "val_loss": metrics["loss"],
                         VAL_PREDICTIONS: predictions_state(metrics["predictions"])},
                        self.best_path)

    def _stopped(self, signum: int, *, saved: bool, during: str = "") -> str:
        """The one line a stopped run prints: where it stopped, what it kept, how to go on."""
        name = signals.Stopped(signum).name
        at = f"stopped by {name} at step {self.state.step}/{self.cfg.train.max_steps}{during}"
        if saved:
            return (f"{at}: checkpoint written at step {self.state.step} ({self.last_path}); "
                    "the same command resumes it")
        return f"{at}: {self._then()}"

    def _then(self) -> str:
        """What the same command does after a run that stopped without a checkpoint of its step."""
        if self.last_path.exists():
            kept = load_checkpoint(self.last_path)["step"]
            return (f"kept the checkpoint of step {kept} ({self.last_path}); the same "
                    "command resumes from there")
        return "no checkpoint yet; the same command starts the run again"

    def _wall(self) -> float:
        """Wall time of the run so far: earlier sessions plus this one."""
        return self.state.wall_time_s + (time.perf_counter() - self.session_start)

    def _diverged(self, at: str) -> TrainingError:
        last = (f"{self.last_path} (step {load_checkpoint(self.last_path)['step']})"
                if self.last_path.exists() else "none yet")
        return TrainingError(f"training diverged: non-finite loss or gradient norm {at}. "
                             f"The last good checkpoint is kept: {last}. Lower optim.lr, "
                             f"set optim.grad_clip, or use train.precision=fp32.")
