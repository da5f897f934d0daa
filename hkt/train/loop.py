"""One training run: periodic validation, the best-validation checkpoint, one final test
evaluation, and the run record, written last.

Resumable and reproducible: a checkpoint (``RUN_DIR/checkpoints/last.pt``) holds everything the
next step depends on (model, optimiser, scheduler, RNG states, sampler position and the loop's
:class:`~hkt.train.checkpoint.TrainState`: the partial logging window, history, best-so-far), so
a run killed at any moment and re-started with the same command continues exactly; on CPU
(deterministic algorithms) it reaches bit-identical metrics. Evaluation happens before the
checkpoint of the same step, so a resumed run never evaluates a step twice; a stop while
validating writes the checkpoint of the step just trained, marked for the resumed run to
validate it again (evaluation changes nothing a checkpoint holds).

The run (:class:`_Run`) holds what it trains with: the model (built from the config's typed
model, :class:`~hkt.train.run_config.RunConfig`), the optimizer, the data stream, its
:class:`~hkt.train.checkpoint.Checkpoint` and its MLflow tracker. The pieces live beside this
file: :mod:`~hkt.train.optim` (AdamW and schedule), :mod:`~hkt.train.step` (the training step
and evaluation, shared with the benchmarks), :mod:`~hkt.train.log_window` (the metrics between
logged steps), :mod:`~hkt.train.rundir` (locking, mismatch checks),
:mod:`~hkt.train.run_conditions` (precision, threads, GPU sharing), :mod:`~hkt.train.tracking`
(MLflow) and :mod:`~hkt.train.run_metadata` (what the MLflow run says of itself),
:mod:`~hkt.train.finish` (the record).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, TextIO

import torch
from omegaconf import DictConfig, OmegaConf

from hkt import environment, signals
from hkt.device import cuda_memory, describe_device, resolve_device
from hkt.errors import RunMismatch, TrainingError
from hkt.figures.training import learning_curve
from hkt.data_layout import SPLITS
from hkt.provenance import code_digest, git_state
from hkt.predictions import (PREDICTIONS_NAME, check_against_record, read_predictions,
                             write_predictions)
from hkt.run_record import (DAMAGED_NAME, HISTORY_NAME, RECORD_NAME, RecordError, load_record,
                            set_aside_if_damaged, write_history, write_record)
from hkt.train import rundir
from hkt.train.checkpoint import (VAL_PREDICTIONS, Checkpoint, TrainState, load_checkpoint,
                                  predictions_from_state, rng_state)
from hkt.models import model_for
from hkt.train.run_config import RunConfig
from hkt.train.data import RunData
from hkt.train.log_window import Window
from hkt.train.finish import GAP_FIELD, complete_tracking, publish, summary_line, training_record
from hkt.train.optim import build_optimizer
from hkt.train.progress import Progress
from hkt.train.run_conditions import execution, execution_tags, out_of_memory, sample_sharing
from hkt.gpu_slots import held
from hkt.train.step import autocast_dtype, evaluate, forward_backward, seed_everything, to_device
from hkt.train.run_metadata import run_params, run_tags
from hkt.train.tracking import NullTracker, make_tracker

__all__ = ["train"]



def train(config: RunConfig | DictConfig, data_dir: str | Path, run_dir: str | Path, *,
          stream: TextIO | None = None, progress: bool | None = None,
          restart_if_changed: bool = False,
          announce: Callable[[], None] | None = None) -> dict[str, Any]:
    """Train (or resume, or just report) the run described by ``config``
    (:func:`hkt.train.run_config.load_run_config`'s, or a composed config, validated here); return
    its record.

    ``announce`` is called once the arguments are checked (the config, the data against the
    task), before anything is created: ``hkt train`` prints the resolved config there, so that a
    wrong ``--data`` is one line, not the config and then the line.

    A run directory holding a run with another config or other data is refused
    (:class:`RunMismatch`), or with ``restart_if_changed`` emptied and started over (what the
    workflow wants when a config file or the data changed). Process-wide torch settings the run
    changes (threads, deterministic algorithms) are restored afterwards, so that in-process
    callers (tests, notebooks) keep theirs.
    """
    threads = torch.get_num_threads()
    det = torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    stream = stream or sys.stderr
    try:
        typed = config if isinstance(config, RunConfig) else RunConfig.of(config)
        cfg = typed.node
        # Wrong or missing data fails here, before anything is created; a finished run (one
        # whose record loads) needs the data only to check it is still the same.
        finished = _record_loads(run_dir)
        data = RunData(data_dir, cfg.task) if restart_if_changed or not finished else None
        if announce is not None:
            announce()

        def attempt() -> dict[str, Any]:
            if (run_dir / RECORD_NAME).exists() and not _set_aside(run_dir, stream):
                return _report_finished(cfg, data, data_dir, run_dir, stream)
            run_data = data or RunData(data_dir, cfg.task)  # the record vanished meanwhile
            return _Run(typed, data_dir, run_data, run_dir, stream, progress).run()

        with rundir.exclusive(run_dir):
            try:
                return attempt()
            except RunMismatch as exc:
                if not restart_if_changed:
                    raise
                print(f"{exc.args[0].split(';')[0]}: starting over", file=stream, flush=True)
                rundir.empty_run_dir(run_dir)
                return attempt()
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(det, warn_only=det_warn)


def _record_loads(run_dir: Path) -> bool:
    """Whether the run's record exists and loads (the run is finished)."""
    try:
        load_record(run_dir / RECORD_NAME)
    except RecordError:
        return False
    return True


def _set_aside(run_dir: Path, stream: TextIO) -> bool:
    """A record that does not load (cut short, edited, non-finite) is set aside, said in one
    line, and the run finished again: from its last checkpoint, which at the end of training
    only tests the best one and writes the record anew. True where it was."""
    problem = set_aside_if_damaged(run_dir / RECORD_NAME)
    if problem is None:
        return False
    last = run_dir / "checkpoints" / "last.pt"
    how = (f"the run is finished again from its last checkpoint ({last})" if last.exists()
           else "the run has no checkpoint left: it is trained again")
    print(f"hkt: warning: {run_dir / RECORD_NAME} does not load ({problem}); it is kept as "
          f"{DAMAGED_NAME}, and {how}", file=stream, flush=True)
    return True


def _report_finished(cfg: DictConfig, data: RunData | None, data_dir: Path, run_dir: Path,
                     stream: TextIO) -> dict[str, Any]:
    """A finished run: check it is this config's (and data's), say so, return its record; one
    whose MLflow run has a gap (its record's ``mlflow_gap``) gets it completed first."""
    path = run_dir / RECORD_NAME
    record = load_record(path)
    rundir.check_same_config(record["config"], cfg, path)
    if data is not None:
        rundir.check_same_data(record, data, path)
    if record.get(GAP_FIELD) and cfg.tracking.enabled:
        return complete_tracking(cfg, record, data or RunData(data_dir, cfg.task),
                                 run_dir, stream)
    print("run already finished; nothing to do.", file=stream, flush=True)
    print(summary_line(record, run_dir), file=stream, flush=True)
    return record


class _Run:
    """One session of a run: built with everything it trains with, then :meth:`run`."""

    def __init__(self, config: RunConfig, data_dir: Path, data: RunData, run_dir: Path,
                 stream: TextIO, progress: bool | None):
        """Builds the model (from the config's typed model), optimizer and data stream, and
        applies the process-wide torch settings the config asks for."""
        cfg = config.node
        self.session_start = time.perf_counter()
        self.session_epoch = time.time()  # the same instant, as MLflow's run start
        self.cfg, self.data_dir, self.data, self.run_dir = cfg, data_dir, data, run_dir
        self.stream, self.show_progress = stream, progress
        self.git = git_state()  # the code this session runs, for tags and the record
        code_digest()  # read (and kept) now, as the commit is: the code may change meanwhile
        tc = cfg.train
        self.device = resolve_device(tc.device, source="config key 'train.device'")
        if tc.num_threads:
            torch.set_num_threads(int(tc.num_threads))
        self.amp = autocast_dtype(str(tc.precision), self.device)
        self.execution = execution(self.device.type, self.amp, torch.get_num_threads(), held())
        if self.device.type == "cpu" and tc.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        seed_everything(int(cfg.seed))
        self.model = model_for(config.model, data, int(cfg.task.max_length))
        self.model.to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.forward = self.model
        if tc.compile and self.device.type == "cuda":
            self.forward = torch.compile(self.model)
        self.opt, self.sched = build_optimizer(self.model, cfg.optim, int(tc.max_steps),
                                               self.device)
        self.batches = data.train_stream(int(tc.batch_size), int(cfg.seed),
                                         bucket=bool(tc.bucket), num_workers=int(tc.num_workers),
                                         pin_memory=self.device.type == "cuda")
        self.cfg_dict = OmegaConf.to_container(cfg, resolve=True)
        self.checkpoint = Checkpoint(run_dir, cfg, self.cfg_dict, data, self.model, self.opt,
                                     self.sched, self.batches)
        self.state = TrainState()
        self.tracker: NullTracker = NullTracker()  # the MLflow run, once started
        self.during = ""  # what a stop interrupts, for its line (" (while testing)")

    def say(self, msg: str) -> None:
        print(msg, file=self.stream, flush=True)

    def run(self) -> dict[str, Any]:
        """Resume or start, train to the end, write the record; the MLflow run ends as FAILED
        or KILLED if training does not get there."""
        # a broken store stops here, before any write
        self.tracker = make_tracker(self.cfg, say=self.say)
        if self.checkpoint.last_path.exists():
            self.state = self.checkpoint.resume()
            self.say(f"resuming from {self.checkpoint.last_path} at step {self.state.step}/"
                     f"{self.cfg.train.max_steps}")
        else:
            self.state.mlflow_run_id = rundir.claim(self.run_dir, self.cfg)
        self._start_tracking()
        try:
            with signals.deferred(float(self.cfg.train.stop_grace_s)):
                self._loop()
            return self._finish()
        except signals.Stopped as exc:
            self.tracker.finish("KILLED")
            raise exc if exc.message else exc.with_message(
                self._stopped(exc.signum, saved=False, during=self.during)) from None
        except Exception as exc:  # noqa: BLE001 - any crash ends the MLflow run, then propagates
            self.tracker.set_tags({"hkt.error": f"{type(exc).__name__}: {exc}"[:5000]})
            self.tracker.finish("FAILED")
            if isinstance(exc, torch.cuda.OutOfMemoryError):  # one line; the slot goes with us
                raise TrainingError(out_of_memory(
                    describe_device(self.device), cuda_memory(self.device), held(),
                    int(self.cfg.train.batch_size), self._then())) from None
            raise

    def _start_tracking(self) -> None:
        if not self.tracker.enabled:
            return
        meta = self.data.meta["train"]
        tags = run_tags(self.cfg, device=describe_device(self.device), git=self.git,
                        run_dir=self.run_dir, data_dir=self.data_dir,
                        checksums=self.data.checksums, data_meta=meta,
                        execution=execution_tags(self.execution))
        params = run_params(self.cfg_dict, self.n_params, meta.get("params"))
        self.state.mlflow_run_id = self.tracker.start(
            self.state.mlflow_run_id, params=params, tags=tags, start_time=self.session_epoch)
        self.tracker.log_dataset(self.cfg.task.family, self.data_dir, self.data.checksums,
                                 {s: self.data.size(s) for s in SPLITS})
        self.tracker.backfill(self.state.history)  # what a gap in an earlier session kept from it
        rundir.write_mlflow_info(self.run_dir, self.state.mlflow_run_id, self.tracker.uri,
                                 self.tracker.experiment)

    # -- training ------------------------------------------------------------------------------
    def _loop(self) -> None:
        """Train from ``state.step`` to ``train.max_steps``: a step, then, where one is due, a
        sync point (log, validate, checkpoint, progress line); a signal stops it at a step
        boundary with a checkpoint of that step."""
        tc, st = self.cfg.train, self.state
        max_steps = int(tc.max_steps)
        self.say(f"run {self.cfg.tracking.run_name}: {self.n_params:,} parameters, "
                 f"{describe_device(self.device)}, precision {self.execution['precision']}, "
                 f"data {self.data_dir} ({self.data.size('train')} train examples)")
        if self.tracker.enabled:
            self.say(f"MLflow: run {st.mlflow_run_id} in experiment '{self.tracker.experiment}' "
                     f"at {self.tracker.uri}")
        bar = Progress(max_steps, initial=st.step, stream=self.stream, enabled=self.show_progress,
                       every_s=float(tc.progress_every_s))
        window = Window(st.window, self.device)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.model.train()
        if st.interrupted_sync is not None:  # stopped while validating: validate that step again
            cut, st.interrupted_sync = st.interrupted_sync, None
            self._complete_sync(window, bar, dict(cut["row"]), tuple(cut["due"]))
        t_mark = time.perf_counter()
        while st.step < max_steps:
            if signals.pending() is not None:  # a step boundary: stop with a checkpoint of it
                self._stop_here(window, t_mark)
            lr = self._train_step(window, params)
            step = st.step
            due = (step % int(tc.log_every) == 0 or step == max_steps,
                   step % int(tc.eval_every) == 0 or step == max_steps,
                   step % int(tc.checkpoint_every) == 0 or step == max_steps)
            beat = bar.due()  # a progress line is owed (slow steps): a clock read, no sync
            if any(due) or beat:
                self._sync_point(window, bar, step, due, beat, lr, t_mark)
                t_mark = time.perf_counter()
        bar.close()
        st.window = window.state()

    def _train_step(self, window: Window, params: list[torch.Tensor]) -> float:
        """One optimizer step on the next batch; returns the learning rate it used."""
        tokens, mask, labels = to_device(self.batches.next(), self.device)
        loss, logits, gnorm = forward_backward(self.forward, self.opt, params, tokens, mask,
                                               labels, amp=self.amp,
                                               grad_clip=self.cfg.optim.grad_clip)
        bad = ~(torch.isfinite(loss) & torch.isfinite(gnorm))
        if self.device.type == "cpu" and bool(bad):  # on CPU a check per step costs nothing
            raise self._diverged(f"at step {self.state.step + 1} (loss={loss.item()})")
        lr = self.opt.param_groups[0]["lr"]
        self.opt.step()
        self.sched.step()
        self.state.step += 1
        window.add(loss, logits, labels, bad)
        return lr

    def _account(self, window: Window, t_mark: float) -> None:
        """A sync point: add the time since ``t_mark``, check the window for divergence."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - t_mark
        window.time += elapsed
        self.state.train_time_s += elapsed
        sample_sharing(held())  # after the clock: how many jobs share the GPU now
        if bool(window.bad):
            step = self.state.step
            raise self._diverged(f"between steps {step - window.steps + 1} and {step}")

    def _sync_point(self, window: Window, bar: Progress, step: int,
                    due: tuple[bool, bool, bool], beat: bool, lr: float, t_mark: float) -> None:
        """What is due at ``step``: the logged row (train window, validation), the checkpoint,
        the progress line."""
        bs, st = int(self.cfg.train.batch_size), self.state
        self._account(window, t_mark)
        if not any(due):  # only the progress line
            bar.update(step, {"samples_per_s": window.samples_per_s(bs)}, best=st.best)
            return
        row: dict[str, Any] = {"step": step}
        if due[0]:
            row.update(window.take(lr, bs))
        self._complete_sync(window, bar, row, due, beat)

    def _complete_sync(self, window: Window, bar: Progress, row: dict[str, Any],
                       due: tuple[bool, bool, bool], beat: bool = False) -> None:
        """The rest of the sync point at ``row["step"]``, its training metrics taken: validation,
        the history row, the checkpoint, the progress line. A stop while validating leaves it
        to the resumed run (:meth:`_stop_validating`), which calls this again."""
        do_log, do_eval, do_ckpt = due
        step, st = int(row["step"]), self.state
        if do_eval:
            row.update(self._validate(bar, window, row, due))
        if do_log or do_eval:
            st.history.append(row)
            self.tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step)
        if do_ckpt:
            st.window = window.state()
            self.tracker.flush()
            self.checkpoint.save_last(st, self._wall())
        if do_log or do_eval:
            bar.update(step, row, best=st.best, force=do_eval)
        elif beat:
            bar.update(step, {}, best=st.best)

    def _validate(self, bar: Progress, window: Window, row: dict[str, Any],
                  due: tuple[bool, bool, bool]) -> dict[str, float]:
        """Validation at ``row["step"]`` (a new best is saved). A signal meanwhile stops the run
        at the next batch (or when the grace runs out) with a checkpoint of this step, whose
        validation the resumed run does again (:meth:`_stop_validating`)."""
        tc, st, step = self.cfg.train, self.state, int(row["step"])
        n_val = self.data.eval_batch_count("val", int(tc.batch_size), tc.eval_batches)
        rng = rng_state()  # as the step left it: the resumed run validates from the same state

        def validating(batches: int, examples: int) -> None:
            if signals.pending() is not None:
                raise signals.Stopped(signals.pending())
            bar.pass_note(step, "validating", batches, n_val, examples)

        try:
            val = evaluate(self.forward, self.model, self.data.eval_batches(
                "val", int(tc.batch_size), tc.eval_batches), self.device, self.amp,
                on_batch=validating, keep=True)  # a new best keeps its predictions (best.pt)
        except signals.Stopped as exc:
            raise self._stop_validating(exc.signum, window, row, due, rng) from None
        if val["acc"] > st.best["acc"]:
            st.best = {"acc": val["acc"], "loss": val["loss"], "step": step}
            self.checkpoint.save_best(step, val)
        return {"val_loss": val["loss"], "val_acc": val["acc"]}

    def _stop_validating(self, signum: int, window: Window, row: dict[str, Any],
                         due: tuple[bool, bool, bool], rng: dict[str, Any]) -> signals.Stopped:
        """A stop while validating: evaluation changes nothing a checkpoint holds, so write the
        checkpoint of the step just trained, with this sync point marked for the resumed run to
        complete (validation included) and the RNG state it had before validating."""
        signals.take()  # acted on: no second stop from the grace timer while writing
        st, step = self.state, int(row["step"])
        st.window = window.state()
        st.interrupted_sync = {"row": dict(row), "due": list(due)}
        self.tracker.flush()
        self.checkpoint.save_last(st, self._wall(), rng)
        st.interrupted_sync = None
        return signals.Stopped(signum, self._stopped(signum, saved=True, during=" (while validating)")
                               + f", validating step {step} again")

    def _stop_here(self, window: Window, t_mark: float) -> None:
        """Stop at this step boundary: a checkpoint of it, then :class:`~hkt.signals.Stopped`."""
        signum = signals.take()
        self._account(window, t_mark)
        self.state.window = window.state()
        self.tracker.flush()
        self.checkpoint.save_last(self.state, self._wall())
        raise signals.Stopped(signum, self._stopped(signum, saved=True))

    # -- the lines a run that ends early gives ---------------------------------------------
    def _wall(self) -> float:
        """Wall time of the run so far: earlier sessions plus this one."""
        return self.state.wall_time_s + (time.perf_counter() - self.session_start)

    def _stopped(self, signum: int, *, saved: bool, during: str = "") -> str:
        """The one line a stopped run prints: where it stopped, what it kept, how to go on."""
        name = signals.Stopped(signum).name
        at = f"stopped by {name} at step {self.state.step}/{self.cfg.train.max_steps}{during}"
        if saved:
            return (f"{at}: checkpoint written at step {self.state.step} "
                    f"({self.checkpoint.last_path}); the same command resumes it")
        return f"{at}: {self._then()}"

    def _then(self) -> str:
        """What the same command does after a run that stopped without a checkpoint of its step."""
        kept = self.checkpoint.kept_step()
        if kept is not None:
            return (f"kept the checkpoint of step {kept} ({self.checkpoint.last_path}); the same "
                    "command resumes from there")
        return "no checkpoint yet; the same command starts the run again"

    def _diverged(self, at: str) -> TrainingError:
        kept = self.checkpoint.kept_step()
        last = (f"{self.checkpoint.last_path} (step {kept})" if kept is not None else "none yet")
        return TrainingError(f"training diverged: non-finite loss or gradient norm {at}. "
                             f"The last good checkpoint is kept: {last}. Lower optim.lr, "
                             f"set optim.grad_clip, or use train.precision=fp32.")

    # -- the end ---------------------------------------------------------------------------
    def _predictions(self, best: dict[str, Any], test: dict[str, Any]) -> dict[str, str]:
        """Write ``predictions.parquet``: the validation that made ``best`` the best (kept in
        ``best.pt``) and ``test``, the test of the same model; the record's field for it. A
        ``best.pt`` of before issue 58 holds no predictions: its validation is made again."""
        if VAL_PREDICTIONS in best:
            val = predictions_from_state(best[VAL_PREDICTIONS])
        else:
            self.say(f"{self.checkpoint.best_path} holds no validation predictions (written before they were "
                     "kept): validating the best checkpoint again for them")
            tc = self.cfg.train
            val = evaluate(self.forward, self.model, self.data.eval_batches(
                "val", int(tc.batch_size), tc.eval_batches), self.device, self.amp,
                keep=True)["predictions"]
        return write_predictions({"val": val, "test": test["predictions"]}, self.run_dir,
                                 self.data.num_classes)

    def _finish(self) -> dict[str, Any]:
        """Test the best checkpoint; write the curve, history and record (last); close MLflow."""
        cfg = self.cfg
        best = load_checkpoint(self.checkpoint.best_path)
        self.model.load_state_dict(best["model"])
        self.say(f"testing the best checkpoint (step {best['step']}) on {self.data.paths['test']}")
        beat = Progress(int(cfg.train.max_steps), stream=self.stream, enabled=self.show_progress,
                        every_s=float(cfg.train.progress_every_s))
        bs, limit = int(cfg.train.batch_size), cfg.train.test_batches
        n_test, since = self.data.eval_batch_count("test", bs, limit), time.perf_counter()
        # a stop here stops at once: the checkpoint of the last step is on disk (written at
        # train.max_steps), and the resumed run tests again
        self.during = " (while testing)"
        test = evaluate(self.forward, self.model, self.data.eval_batches("test", bs, limit),
                        self.device, self.amp, on_batch=lambda b, n: beat.pass_note(
                            self.state.step, "testing", b, n_test, n, since=since), keep=True)
        self.during = ""
        predictions = self._predictions(best, test)
        # the budget in the title: a curve read alone says what the run trained for
        title = (f"{cfg.task.id} / {cfg.tracking.model} / {cfg.variant} / seed {cfg.seed}\n"
                 f"budget: {cfg.train.profile}, {int(cfg.train.max_steps):,} steps of batch {bs}")
        learning_curve(self.state.history, self.run_dir / "learning_curve.png", title)
        write_history(self.state.history, self.run_dir / HISTORY_NAME)
        record = training_record(
            cfg, self.cfg_dict, self.state, best, test, n_params=self.n_params,
            wall_time_s=self._wall(), device=describe_device(self.device), git=self.git,
            data_dir=self.data_dir, checksums=self.data.checksums,
            content_checksums=self.data.content_checksums, tracker=self.tracker,
            env_digest=environment.save(self.run_dir),  # writes RUN_DIR/environment.json
            train_examples=self.data.size("train"),  # the sharing as it ends: its most seen
            execution=execution(self.device.type, self.amp, self.execution["threads"], held()),
            predictions=predictions)
        check_against_record(read_predictions(self.run_dir), record,
                             self.run_dir / PREDICTIONS_NAME)  # never a file the record belies
        record = publish(self.tracker, record, self.run_dir, model=self.model,  # the best, loaded above
                         data=self.data, cfg=cfg)
        write_record(record, self.run_dir / RECORD_NAME)  # last: its presence means "done"
        self.say(summary_line(record, self.run_dir))
        return record

