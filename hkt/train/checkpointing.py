"""A training run's checkpoint bookkeeping: resuming from ``last.pt``, writing ``last.pt`` and
``best.pt``, and the lines a stopped or diverged run gives. A base of
:class:`hkt.train.loop._Run`, kept apart so the loop reads as the loop; the methods use the
run's attributes, which ``_Run.__init__`` sets (declared below)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from torch import nn, optim

from hkt import signals
from hkt.errors import TrainingError
from hkt.record import HISTORY_NAME, write_history
from hkt.train import rundir
from hkt.train.checkpoint import (CHECKPOINT_FORMAT, TrainState, load_checkpoint, rng_state,
                                  save_checkpoint, set_rng_state)
from hkt.train.data import RunData

__all__ = ["Checkpointing"]


class Checkpointing:
    """Checkpoints and stop lines of one session of a run (see :mod:`hkt.train.loop`)."""

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
        rundir.check_same_data(ck.get("data_checksums"), self.data, self.last_path)
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
        }
        save_checkpoint(state, self.last_path)
        write_history(self.state.history, self.run_dir / HISTORY_NAME)

    def _save_best(self, metrics: dict[str, float]) -> None:
        save_checkpoint({"format": CHECKPOINT_FORMAT, "model": self.model.state_dict(),
                         "config": self.cfg_dict, "step": self.state.step,
                         "val_accuracy": metrics["acc"], "val_loss": metrics["loss"]},
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
