"""A dependency-free progress bar for training: loss, accuracy, learning rate, throughput, ETA.

(Not tqdm: in a log file tqdm writes carriage-return redraws, or nothing with ``disable=None``;
a job's log needs plain, timed lines. See also ``hkt.data.sources``.)

On a terminal it redraws one line at every update. Elsewhere (a log file under Snakemake, CI) it
prints a line at most every ``every_s`` seconds, and the training loop asks it (:meth:`due`) at
every step, so that ``tail -f`` on a job's log always sees it move, whether a step takes a
millisecond or a minute, and long validations report their batches too.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return "?"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    def __init__(self, total: int, *, initial: int = 0, stream: TextIO | None = None,
                 enabled: bool | None = None, width: int = 24, every_s: float):
        self.total, self.start_step = total, initial
        self.every_s = every_s
        self._last_line: float | None = None  # when the last line was written (perf_counter)
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = True if enabled is None else enabled
        self.width = width
        self.t0 = time.perf_counter()
        self.last: dict[str, Any] = {}
        self._drawn = False

    def due(self) -> bool:
        """Whether a line is owed: none written yet, or the last one is ``every_s`` old."""
        return self.enabled and (self._last_line is None
                                 or time.perf_counter() - self._last_line >= self.every_s)

    def note(self, step: int, what: str) -> None:
        """A line about work between steps (e.g. validation), if one is due."""
        if self.due() and not self.tty:
            self._write(f"step {step}/{self.total} | {what}")

    def pass_note(self, step: int, what: str, batches: int, total: int, examples: int, *,
                  since: float | None = None) -> None:
        """A line about an evaluation pass: its batches done of ``total``, examples so far and,
        given the pass's start ``since`` (perf_counter), its ETA. Only the test pass, the run's
        last work, gives it: `hkt status` reads a log's last ETA as the job's remaining time."""
        line = f"{what}: {batches}/{total} batches, {examples} examples so far"
        if since is not None:
            left = (time.perf_counter() - since) / batches * (total - batches) if batches else None
            line += f" | eta {format_duration(left)}"
        self.note(step, line)

    def update(self, step: int, row: dict[str, Any], *, best: dict[str, Any] | None = None,
               force: bool = False) -> None:
        """Record ``row`` (metrics of ``step``); draw it on a terminal, or write a line to a log
        when one is due or ``force`` (an evaluation)."""
        if not self.enabled:
            return
        self.last.update({k: v for k, v in row.items() if v is not None})
        if not (self.tty or force or self.due()):
            return
        r = self.last
        frac = step / max(1, self.total)
        elapsed = time.perf_counter() - self.t0
        done = step - self.start_step
        eta = elapsed / done * (self.total - step) if done > 0 else None
        parts = [f"{step:>{len(str(self.total))}}/{self.total}"]
        if "train_loss" in r:
            parts.append(f"loss {r['train_loss']:.4f}")
        if "train_acc" in r:
            parts.append(f"acc {r['train_acc']:.3f}")
        if "lr" in r:
            parts.append(f"lr {r['lr']:.2e}")
        if "samples_per_s" in r:
            parts.append(f"{r['samples_per_s']:,.0f} samples/s")
        if "val_acc" in r:
            parts.append(f"val {r['val_acc']:.3f}")
        if best and best.get("step") is not None:
            parts.append(f"best {best['acc']:.3f}@{best['step']}")
        parts.append(f"eta {format_duration(eta)}")
        if self.tty:
            filled = int(self.width * frac)
            bar = "█" * filled + "·" * (self.width - filled)
            self.stream.write(f"\r[{bar}] " + " | ".join(parts) + "\x1b[K")
            self.stream.flush()
            self._drawn = True
            self._last_line = time.perf_counter()
        else:
            self._write("step " + " | ".join(parts))

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self._last_line = time.perf_counter()

    def close(self) -> None:
        if self.enabled and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
