"""A dependency-free progress bar for training: loss, accuracy, learning rate, throughput, ETA.

On a terminal it redraws one line; elsewhere (logs, CI, Snakemake) it prints one line per
update, so log files stay readable.
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
                 enabled: bool | None = None, width: int = 24):
        self.total, self.start_step = total, initial
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = True if enabled is None else enabled
        self.width = width
        self.t0 = time.perf_counter()
        self.last: dict[str, Any] = {}
        self._drawn = False

    def update(self, step: int, row: dict[str, Any], *, best: dict[str, Any] | None = None) -> None:
        if not self.enabled:
            return
        self.last.update({k: v for k, v in row.items() if v is not None})
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
            self._drawn = True
        else:
            self.stream.write("step " + " | ".join(parts) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
