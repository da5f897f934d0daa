"""One training run: AdamW, warmup + cosine/linear decay, clipping, periodic validation, the
best-validation checkpoint, one final test evaluation, and the run record, written last.

Resumable and reproducible: a checkpoint (``RUN_DIR/checkpoints/last.pt``) holds everything the
next step depends on (model, optimiser, scheduler, RNG states, sampler position, the partial
logging window, history, best-so-far), so a run killed at any moment and re-started with the
same command continues exactly; on CPU (deterministic algorithms) it reaches bit-identical
metrics. Evaluation happens before the checkpoint of the same step, so a resumed run never
evaluates a step twice.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import random
import socket
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf
from torch import nn

import hkt
from hkt import environment
from hkt.config import flatten
from hkt.device import describe_device, resolve_device
from hkt.provenance import git_state
from hkt.models import build_model
from hkt.errors import ConfigError, RunMismatch, TrainingError
from hkt.fileio import atomic_write_bytes, atomic_write_text
from hkt.train.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from hkt.train.config import model_error, strip_for_compare, validate
from hkt.train.data import RunData
from hkt.train.progress import Progress, format_duration
from hkt.train.record import RECORD_NAME, SCHEMA_VERSION, load_record, write_record
from hkt.train.tracking import STEP_METRICS, make_tracker

__all__ = ["train", "lr_factor", "build_optimizer", "summary_line"]

CHECKPOINT_FORMAT = 1
HISTORY_COLUMNS = ("step", *STEP_METRICS)


# ---------------------------------------------------------------------------------------------
# pieces


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


def build_optimizer(model: nn.Module, optim_cfg: Any, total_steps: int, device: torch.device):
    """AdamW (no weight decay on biases, norms, embeddings, positions) + LambdaLR schedule."""
    no_decay: set[int] = set()
    for module in model.modules():
        if isinstance(module, (nn.Embedding, nn.LayerNorm)):
            no_decay.update(id(p) for p in module.parameters(recurse=False))
    decay, other = [], []
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (other if p.ndim < 2 or id(p) in no_decay else decay).append(p)
    groups = [{"params": decay, "weight_decay": float(optim_cfg.weight_decay)},
              {"params": other, "weight_decay": 0.0}]
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


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def _to_device(batch: dict[str, Any], device: torch.device) -> tuple[torch.Tensor, ...]:
    nb = device.type == "cuda"
    return (batch["tokens"].to(device, non_blocking=nb), batch["mask"].to(device, non_blocking=nb),
            batch["labels"].to(device, non_blocking=nb))


@torch.no_grad()
def evaluate(forward, model: nn.Module, batches, device: torch.device,
             amp: torch.dtype | None) -> dict[str, float]:
    """Mean loss and accuracy over ``batches`` (model in eval mode, restored afterwards)."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    n = 0
    for batch in batches:
        tokens, mask, labels = _to_device(batch, device)
        with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
            logits = forward(tokens, mask)
        logits = logits.float()
        loss_sum += F.cross_entropy(logits, labels, reduction="sum").double()
        correct += (logits.argmax(-1) == labels).sum()
        n += labels.numel()
    model.train(was_training)
    if n == 0:
        raise TrainingError("evaluation saw no examples (empty split?)")
    return {"loss": loss_sum.item() / n, "acc": correct.item() / n, "n": n}


def summary_line(record: dict[str, Any], run_dir: Path | str) -> str:
    ms = record.get("ms_per_step")
    sps = record.get("samples_per_s")
    speed = f", {ms:.1f} ms/step, {sps:,.0f} samples/s" if ms and sps else ""
    return (f"{record['task']}/{record['model']}/{record['variant']} seed {record['seed']} "
            f"[{record['profile']}]: val {record['val_accuracy']:.4f} (step {record['best_step']}), "
            f"test {record['test_accuracy']:.4f}; {record['n_params']:,} params, "
            f"{record['steps']} steps in {format_duration(record['wall_time_s'])}{speed} "
            f"on {record['device']} -> {Path(run_dir) / RECORD_NAME}")


def write_history(rows: list[dict[str, Any]], path: Path) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=HISTORY_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if row.get(k) is None else row[k]) for k in HISTORY_COLUMNS})
    atomic_write_text(path, buf.getvalue())


def plot_learning_curve(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tr = [(r["step"], r["train_loss"], r.get("train_acc")) for r in rows
          if r.get("train_loss") is not None]
    va = [(r["step"], r["val_loss"], r["val_acc"]) for r in rows if r.get("val_acc") is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    if tr:
        ax1.plot([t[0] for t in tr], [t[1] for t in tr], label="train", lw=1)
        ax2.plot([t[0] for t in tr], [t[2] for t in tr], label="train", lw=1, alpha=0.7)
    if va:
        ax1.plot([v[0] for v in va], [v[1] for v in va], "o-", label="validation", ms=3)
        ax2.plot([v[0] for v in va], [v[2] for v in va], "o-", label="validation", ms=3)
    ax1.set(xlabel="step", ylabel="cross-entropy loss", title="loss")
    ax2.set(xlabel="step", ylabel="accuracy", title="accuracy")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


# ---------------------------------------------------------------------------------------------
# the run


def _config_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    fa, fb = flatten(a), flatten(b)
    return sorted(k for k in set(fa) | set(fb) if fa.get(k, "<absent>") != fb.get(k, "<absent>"))


def _check_same_config(saved: dict[str, Any], cfg: DictConfig, where: Path) -> None:
    diff = _config_diff(strip_for_compare(saved), strip_for_compare(cfg))
    if diff:
        shown = ", ".join(diff[:6]) + (" …" if len(diff) > 6 else "")
        raise RunMismatch(f"{where} belongs to a run with a different config (differs in: "
                          f"{shown}); use another --out, delete {where.parent if where.is_file() else where} "
                          "or pass --restart-if-changed to start over")


def _check_same_data(saved: dict[str, str] | None, data: RunData, where: Path) -> None:
    if saved and saved != data.checksums:
        raise RunMismatch(f"the data in {data.dir} differ from the data of the run in {where} "
                          "(sha256 mismatch); use the same data, another --out, or pass "
                          "--restart-if-changed to start over")


def _empty(run_dir: Path) -> None:
    """Remove everything in a run directory but its lock (held by this process)."""
    for p in run_dir.iterdir():
        if p.name == ".lock":
            continue
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


@contextmanager
def _exclusive(run_dir: Path):
    """One process per run directory (an OS lock: released even by kill -9)."""
    from filelock import FileLock, Timeout

    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(run_dir / ".lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise TrainingError(f"another process is already training in {run_dir}") from None
    try:
        yield
    finally:
        lock.release()


def train(cfg: DictConfig, data_dir: str | Path, run_dir: str | Path, *,
          stream: TextIO | None = None, progress: bool | None = None,
          restart_if_changed: bool = False) -> dict[str, Any]:
    """Train (or resume, or just report) the run described by ``cfg``; return its record.

    A run directory holding a run with another config or other data is refused
    (:class:`RunMismatch`), or with ``restart_if_changed`` emptied and started over (what the
    workflow wants when a config file or the data changed). Process-wide torch settings the run
    changes (threads, deterministic algorithms) are restored afterwards, so that in-process
    callers (tests, notebooks) keep theirs.
    """
    threads = torch.get_num_threads()
    det = torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        run_dir = Path(run_dir)
        validate(cfg)
        stream = stream or sys.stderr
        # Wrong or missing data fails here, before anything is created; a finished run needs
        # the data only to check it is still the same.
        finished = (run_dir / RECORD_NAME).exists()
        data = RunData(data_dir, cfg.task) if restart_if_changed or not finished else None
        with _exclusive(run_dir):
            try:
                return _Run(cfg, Path(data_dir), data, run_dir, stream, progress).run()
            except RunMismatch as exc:
                if not restart_if_changed:
                    raise
                print(f"{exc.args[0].split(';')[0]}: starting over", file=stream, flush=True)
                _empty(run_dir)
                return _Run(cfg, Path(data_dir), data, run_dir, stream, progress).run()
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(det, warn_only=det_warn)


class _Run:
    def __init__(self, cfg: DictConfig, data_dir: Path, data: RunData | None, run_dir: Path,
                 stream: TextIO, progress: bool | None):
        """``cfg`` is validated by ``train``; ``data`` is None only when the run is finished."""
        self.cfg, self.data_dir, self.run_dir, self.stream = cfg, data_dir, run_dir, stream
        self.data = data
        self.show_progress = progress
        self.ckpt_dir = run_dir / "checkpoints"
        self.last_path, self.best_path = self.ckpt_dir / "last.pt", self.ckpt_dir / "best.pt"
        self.record_path = run_dir / RECORD_NAME

    def say(self, msg: str) -> None:
        print(msg, file=self.stream, flush=True)

    # -- setup -------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        if self.record_path.exists():
            record = load_record(self.record_path)
            _check_same_config(record["config"], cfg, self.record_path)
            if self.data is not None:
                _check_same_data(record.get("data_checksums"), self.data, self.record_path)
            self.say("run already finished; nothing to do.")
            self.say(summary_line(record, self.run_dir))
            return record
        t_session = time.perf_counter()
        if self.data is None:  # the record vanished after train() looked
            self.data = RunData(self.data_dir, cfg.task)
        self.git = git_state()  # the code this session runs, for tags and the record
        self.device = resolve_device(cfg.train.device, source="config key 'train.device'")
        if cfg.train.num_threads:
            torch.set_num_threads(int(cfg.train.num_threads))
        self.amp = autocast_dtype(str(cfg.train.precision), self.device)
        if self.device.type == "cpu" and cfg.train.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        seed_everything(int(cfg.seed))
        try:
            self.model = build_model(
                OmegaConf.to_container(cfg.model, resolve=True), vocab_size=self.data.vocab_size,
                num_classes=self.data.num_classes, max_length=int(cfg.task.max_length))
        except ValueError as exc:
            raise model_error(exc, cfg) from None
        self.model.to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.forward = self.model
        if cfg.train.compile and self.device.type == "cuda":
            self.forward = torch.compile(self.model)
        self.opt, self.sched = build_optimizer(self.model, cfg.optim, int(cfg.train.max_steps),
                                               self.device)
        self.stream_data = self.data.train_stream(int(cfg.train.batch_size), int(cfg.seed),
                                                  bucket=bool(cfg.train.bucket),
                                                  num_workers=int(cfg.train.num_workers))
        self.cfg_dict = OmegaConf.to_container(cfg, resolve=True)

        # state that a checkpoint carries
        self.step = 0
        self.best = {"acc": -1.0, "loss": None, "step": None}
        self.history: list[dict[str, Any]] = []
        self.window = {"loss": 0.0, "correct": 0, "n": 0, "steps": 0, "time": 0.0}
        self.train_time = 0.0
        self.prior_wall = 0.0
        self.run_id: str | None = None
        if self.last_path.exists():
            self._resume()
        else:
            if any(p.name != ".lock" for p in self.run_dir.iterdir()) and not (
                    self.run_dir / "config.yaml").exists() and not (self.run_dir / "mlflow_run.json").exists():
                raise TrainingError(f"{self.run_dir} is not empty and holds no run; "
                                    "choose an empty or new --out directory")
            self.run_dir.mkdir(parents=True, exist_ok=True)
            saved = self.run_dir / "config.yaml"
            if saved.exists():
                _check_same_config(OmegaConf.to_container(OmegaConf.load(saved)), cfg, saved)
            atomic_write_text(saved, OmegaConf.to_yaml(cfg))
            info = self.run_dir / "mlflow_run.json"
            if info.exists():
                self.run_id = json.loads(info.read_text()).get("run_id")
        self.session_start = t_session
        self.tracker = self._start_tracking()
        try:
            record = self._loop()
        except TrainingError as exc:
            self.tracker.set_tags({"hkt.error": str(exc)[:5000]})
            self.tracker.finish("FAILED")
            raise
        except KeyboardInterrupt:
            self.tracker.finish("KILLED")
            raise
        return record

    def _resume(self) -> None:
        ck = load_checkpoint(self.last_path)
        if ck.get("format") != CHECKPOINT_FORMAT:
            raise TrainingError(f"{self.last_path} has checkpoint format {ck.get('format')!r}, "
                                f"this version writes {CHECKPOINT_FORMAT}; start a new run")
        _check_same_config(ck["config"], self.cfg, self.last_path)
        _check_same_data(ck.get("data_checksums"), self.data, self.last_path)
        try:
            self.model.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["optimizer"])
            self.sched.load_state_dict(ck["scheduler"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise TrainingError(f"{self.last_path} does not fit this model/optimizer: "
                                f"{str(exc).splitlines()[0]}") from None
        self.stream_data.load_state_dict(ck["sampler"])
        set_rng_state(ck["rng"])
        self.step = int(ck["step"])
        self.best = dict(ck["best"])
        self.history = list(ck["history"])
        self.window = dict(ck["window"])
        self.train_time = float(ck["train_time_s"])
        self.prior_wall = float(ck["wall_time_s"])
        self.run_id = ck.get("mlflow_run_id")
        self.say(f"resuming from {self.last_path} at step {self.step}/{self.cfg.train.max_steps}")

    def _start_tracking(self):
        tracker = make_tracker(self.cfg)
        if not tracker.enabled:
            return tracker
        git_commit, git_dirty = self.git
        tags = {
            "task": self.cfg.task.name, "model": self.cfg.model.name, "variant": self.cfg.variant,
            "seed": str(self.cfg.seed), "profile": self.cfg.train.profile,
            "device": describe_device(self.device), "hostname": socket.gethostname(),
            "torch_version": torch.__version__, "cuda_version": str(torch.version.cuda),
            "hkt_version": hkt.__version__, "git_commit": str(git_commit),
            "git_dirty": str(git_dirty), "run_dir": str(self.run_dir.resolve()),
            "data_dir": str(self.data_dir.resolve()),
            **{f"data_sha256.{s}": h for s, h in self.data.checksums.items()},
        }
        params = {k: v for k, v in flatten(self.cfg_dict).items() if not k.startswith("tracking.")}
        params["n_params"] = self.n_params
        self.run_id = tracker.start(self.run_id, params=params, tags=tags)
        atomic_write_text(self.run_dir / "mlflow_run.json", json.dumps(
            {"run_id": self.run_id, "tracking_uri": tracker.uri,
             "experiment": tracker.experiment}, indent=2) + "\n")
        return tracker

    # -- checkpoints ---------------------------------------------------------------------------
    def _save_last(self, wall_now: float) -> None:
        state = {
            "format": CHECKPOINT_FORMAT,
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "rng": rng_state(),
            "sampler": self.stream_data.state_dict(),
            "best": dict(self.best),
            "history": list(self.history),
            "window": dict(self.window),
            "train_time_s": self.train_time,
            "wall_time_s": wall_now,
            "mlflow_run_id": self.run_id,
            "config": self.cfg_dict,
            "data_checksums": dict(self.data.checksums),
        }
        save_checkpoint(state, self.last_path)
        write_history(self.history, self.run_dir / "history.csv")

    def _save_best(self, metrics: dict[str, float]) -> None:
        save_checkpoint({"format": CHECKPOINT_FORMAT, "model": self.model.state_dict(),
                         "config": self.cfg_dict, "step": self.step,
                         "val_accuracy": metrics["acc"], "val_loss": metrics["loss"]},
                        self.best_path)

    # -- training ------------------------------------------------------------------------------
    def _wall(self) -> float:
        return self.prior_wall + (time.perf_counter() - self.session_start)

    def _loop(self) -> dict[str, Any]:
        cfg, tc = self.cfg, self.cfg.train
        max_steps, bs = int(tc.max_steps), int(tc.batch_size)
        eval_every, ckpt_every, log_every = int(tc.eval_every), int(tc.checkpoint_every), int(tc.log_every)
        grad_clip = cfg.optim.grad_clip
        device, amp = self.device, self.amp
        model, opt, sched, tracker = self.model, self.opt, self.sched, self.tracker
        params = [p for p in model.parameters() if p.requires_grad]

        self.say(f"run {cfg.tracking.run_name}: {self.n_params:,} parameters, "
                 f"{describe_device(device)}, precision {'bf16' if amp else 'fp32'}, "
                 f"data {self.data_dir} ({self.data.size('train')} train examples)")
        if tracker.enabled:
            self.say(f"MLflow: run {self.run_id} in experiment '{tracker.experiment}' at {tracker.uri}")
        bar = Progress(max_steps, initial=self.step, stream=self.stream, enabled=self.show_progress)

        # window accumulators live on the device (no sync per step on CUDA)
        w_loss = torch.tensor(self.window["loss"], dtype=torch.float64, device=device)
        w_correct = torch.tensor(self.window["correct"], dtype=torch.int64, device=device)
        w_bad = torch.zeros((), dtype=torch.bool, device=device)
        w_n, w_steps, w_time = int(self.window["n"]), int(self.window["steps"]), float(self.window["time"])
        per_step_check = device.type == "cpu"
        model.train()
        t_mark = time.perf_counter()

        def sync_window() -> None:
            self.window = {"loss": w_loss.item(), "correct": int(w_correct.item()), "n": w_n,
                           "steps": w_steps, "time": w_time}

        def diverged(at: str) -> TrainingError:
            last = (f"{self.last_path} (step {load_checkpoint(self.last_path)['step']})"
                    if self.last_path.exists() else "none yet")
            return TrainingError(f"training diverged: non-finite loss or gradient norm {at}. "
                                 f"The last good checkpoint is kept: {last}. Lower optim.lr, "
                                 f"set optim.grad_clip, or use train.precision=fp32.")

        while self.step < max_steps:
            batch = self.stream_data.next()
            tokens, mask, labels = _to_device(batch, device)
            loss, logits, gnorm = forward_backward(self.forward, opt, params, tokens, mask, labels,
                                                   amp=amp, grad_clip=grad_clip)
            bad = ~(torch.isfinite(loss) & torch.isfinite(gnorm))
            if per_step_check and bool(bad):
                raise diverged(f"at step {self.step + 1} (loss={loss.item()})")
            w_bad |= bad
            lr_used = opt.param_groups[0]["lr"]
            opt.step()
            sched.step()
            self.step += 1
            w_loss += loss.detach().double() * labels.numel()
            w_correct += (logits.detach().argmax(-1) == labels).sum()
            w_n += labels.numel()
            w_steps += 1

            step = self.step
            do_log = step % log_every == 0 or step == max_steps
            do_eval = step % eval_every == 0 or step == max_steps
            do_ckpt = step % ckpt_every == 0 or step == max_steps
            if not (do_log or do_eval or do_ckpt):
                continue
            # a sync point: account time, check the window for divergence
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            now = time.perf_counter()
            w_time += now - t_mark
            self.train_time += now - t_mark
            if bool(w_bad):
                raise diverged(f"between steps {step - w_steps + 1} and {step}")
            row: dict[str, Any] = {"step": step}
            if do_log:
                row.update(train_loss=w_loss.item() / max(1, w_n),
                           train_acc=w_correct.item() / max(1, w_n), lr=lr_used,
                           samples_per_s=(w_steps * bs / w_time) if w_time > 0 else None)
                w_loss.zero_(), w_correct.zero_()
                w_n = w_steps = 0
                w_time = 0.0
            if do_eval:
                val = evaluate(self.forward, model, self.data.eval_batches(
                    "val", bs, tc.eval_batches), device, amp)
                row.update(val_loss=val["loss"], val_acc=val["acc"])
                if val["acc"] > self.best["acc"]:
                    self.best = {"acc": val["acc"], "loss": val["loss"], "step": step}
                    self._save_best(val)
            if do_log or do_eval:
                self.history.append(row)
            tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step)
            if do_ckpt:
                sync_window()
                tracker.flush()
                self._save_last(self._wall())
            if do_log or do_eval:
                bar.update(step, row, best=self.best)
            t_mark = time.perf_counter()
        bar.close()
        sync_window()
        return self._finish()

    # -- the end ---------------------------------------------------------------------------
    def _finish(self) -> dict[str, Any]:
        cfg, tc = self.cfg, self.cfg.train
        best = load_checkpoint(self.best_path)
        self.model.load_state_dict(best["model"])
        test = evaluate(self.forward, self.model, self.data.eval_batches(
            "test", int(tc.batch_size), tc.test_batches), self.device, self.amp)
        title = f"{cfg.task.name} / {cfg.model.name} / {cfg.variant} / seed {cfg.seed}"
        curve = self.run_dir / "learning_curve.png"
        plot_learning_curve(self.history, curve, title)
        write_history(self.history, self.run_dir / "history.csv")
        git_commit, git_dirty = self.git
        steps = self.step
        ms_per_step = 1000 * self.train_time / steps if steps and self.train_time > 0 else None
        sps = steps * int(tc.batch_size) / self.train_time if self.train_time > 0 else None
        record = {
            "schema_version": SCHEMA_VERSION,
            "task": str(cfg.task.name), "model": str(cfg.model.name), "variant": str(cfg.variant),
            "seed": int(cfg.seed), "profile": str(tc.profile), "config": self.cfg_dict,
            "n_params": int(self.n_params), "steps": steps, "best_step": best["step"],
            "val_accuracy": float(best["val_accuracy"]), "test_accuracy": float(test["acc"]),
            "val_loss": float(best["val_loss"]), "test_loss": float(test["loss"]),
            "test_examples": int(test["n"]),
            "wall_time_s": round(self._wall(), 3),
            "ms_per_step": None if ms_per_step is None else round(ms_per_step, 3),
            "samples_per_s": None if sps is None else round(sps, 2),
            "device": describe_device(self.device),
            "git_commit": git_commit, "git_dirty": git_dirty,
            "data_dir": str(self.data_dir.resolve()), "data_checksums": dict(self.data.checksums),
            "mlflow_run_id": self.run_id if self.tracker.enabled else None,
            "mlflow_tracking_uri": self.tracker.uri if self.tracker.enabled else None,
            "mlflow_experiment": self.tracker.experiment if self.tracker.enabled else None,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "hkt_version": hkt.__version__,
            "env_digest": environment.save(self.run_dir),  # writes RUN_DIR/environment.json
        }
        if self.tracker.enabled:
            self.tracker.log_final({
                "val_accuracy": record["val_accuracy"], "test_accuracy": record["test_accuracy"],
                "test_loss": record["test_loss"], "best_step": record["best_step"],
                "n_params": record["n_params"], "wall_time_s": record["wall_time_s"],
                "ms_per_step": record["ms_per_step"],
                "throughput_samples_per_s": record["samples_per_s"],
            }, steps)
            with tempfile.TemporaryDirectory() as tmp:
                staged = write_record(record, Path(tmp) / RECORD_NAME)
                for path in (self.run_dir / "config.yaml", curve, self.run_dir / "history.csv",
                             staged):
                    self.tracker.log_artifact(path)
            self.tracker.finish("FINISHED")
        write_record(record, self.record_path)  # last: its presence means "done"
        self.say(summary_line(record, self.run_dir))
        return record
