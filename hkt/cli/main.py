"""The ``hkt`` command line.

Each subcommand lives in the module that owns its logic; this file only maps names to
modules, imported lazily so that ``hkt --help`` stays fast. A command module exposes
``add_arguments(parser)`` and ``run(args) -> int``. ``hkt bench`` and ``hkt baseline`` have one
level more: ``hkt bench NAME`` maps to the modules in ``BENCHMARKS``, ``hkt baseline NAME`` to
the baselines registered in ``hkt/baselines/`` (:data:`hkt.baselines.BASELINES`: a module there
is the whole registration). A group's command module is given the name it was called by
(``args.name``): one module may register several (``hkt/baselines/depth_rule.py``).

``hkt --log FILE COMMAND …`` appends the command's output (Python's and the libraries', at the
file descriptor level) to FILE under a header naming the attempt (command, time, host, pid) and,
if it fails, prints that attempt's last lines on the terminal: the one statement of what every
workflow rule wants from its log. Appending keeps the evidence of earlier attempts, and of a
run that another process (a second workflow on the same results) was refused to disturb.
Snakemake deletes a job's declared log before each attempt; a hidden second name of the same
file (a hard link, ``.NAME.attempts`` beside it, given before the command runs) keeps it, and
the next attempt puts it back.

SIGINT and SIGTERM stop any command with one line and exit 130 or 143 (:mod:`hkt.signals`).
Output piped into a reader that leaves early (``hkt status | head -1``) ends the command quietly
with exit 0: the reader asked for no more (:func:`reader_gone`).

A local workflow's GPU jobs (``hkt train``, ``analyze``, ``bench``) first claim a slot of one
GPU where ``$HKT_GPU_SLOTS`` says so (:mod:`hkt.gpu_slots`), before anything starts CUDA.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import socket
import traceback
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone

from hkt import signals
from hkt.errors import HKTError, did_you_mean

COMMANDS: dict[str, tuple[str, str]] = {
    "prepare": ("hkt.cli.prepare", "Prepare a task's data as Parquet (download/verify or generate)."),
    "train": ("hkt.train.command", "Train one model on prepared data; writes a run record."),
    "predict": ("hkt.train.predict", "Remake a finished run's predictions.parquet from its best checkpoint."),
    "analyze": ("hkt.analysis.analyze", "Analyse a trained run (kurtosis, kernel, fusion, truncation, approximation)."),
    "aggregate": ("hkt.report.aggregate", "Build tables and figures from run records or MLflow."),
    "plan": ("hkt.suite.plan", "A suite's jobs per rule and estimated wall time on this machine (config/plan.yaml)."),
    "doctor": ("hkt.suite.doctor", "Check this machine against a suite before running it (config/doctor.yaml)."),
    "status": ("hkt.suite.status", "Where a suite stands: jobs by state, remaining wall time, expected finish."),
    "stop": ("hkt.suite.stop", "Stop the workflow running on a results directory, and only it; every "
                         "training job checkpoints, and the same command resumes."),
}

BENCHMARKS: dict[str, tuple[str, str]] = {
    "attention": ("hkt.bench.attention", "Time and memory of MHA vs HKT attention over sequence length."),
    "loader": ("hkt.bench.loader", "Data-loader throughput beside a training step's consumption."),
    "train": ("hkt.bench.train", "Training throughput of MHA/HKT/S4D models vs nn.TransformerEncoder."),
}

Table = dict[str, tuple[str, str]]  # name -> (its command module, help)


def baseline_commands() -> Table:
    """``hkt baseline NAME``: every baseline registered in ``hkt/baselines/``."""
    # imports every baseline module (no torch): only for `hkt baseline …`
    from hkt.baselines import BASELINES, baseline_module, summary

    return {name: (baseline_module(name).__name__, summary(name)) for name in BASELINES.names()}


# group command -> (its table, or the function that makes it when the group is used; help)
GROUPS: dict[str, tuple[Table | Callable[[], Table], str]] = {
    "bench": (BENCHMARKS, "Benchmarks that print numbers and write results/bench/."),
    "baseline": (baseline_commands, "External baselines of ours: each fits on a task's prepared "
                                    "data and writes a run record."),
}
LOG_TAIL_LINES = 20  # lines of a failed command's log shown on the terminal


def group_table(group: str) -> Table:
    """The commands of a group (``hkt bench NAME``, ``hkt baseline NAME``)."""
    table = GROUPS[group][0]
    return table() if callable(table) else table


def _add_group(sub: argparse._SubParsersAction, table: Table) -> None:
    for name, (module, help_text) in table.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        # Arguments are added lazily in main() once the command is known.


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of help and usage errors; a group's names are listed only when ``argv``
    names the group (listing the baselines imports their modules)."""
    parser = argparse.ArgumentParser(prog="hkt", description=__doc__.splitlines()[0])
    parser.add_argument("--log", metavar="FILE",
                        help="write the command's output to FILE; on failure show its last "
                             f"{LOG_TAIL_LINES} lines (what the workflow's rules use)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_group(sub, COMMANDS)
    for group, (_, help_text) in GROUPS.items():
        p = sub.add_parser(group, help=help_text, description=help_text)
        names = p.add_subparsers(dest="name", metavar="NAME", required=True)
        if argv and argv[0] == group:
            _add_group(names, group_table(group))
    return parser


def _command_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str] | None:
    """Return the sub-parser and module for the command named in argv, with its arguments."""
    if not argv or argv[0].startswith("-"):
        return None
    table, prog, rest = COMMANDS, "hkt", argv
    if argv[0] in GROUPS:
        if len(argv) < 2 or argv[1].startswith("-"):
            return None
        table, prog, rest = group_table(argv[0]), f"hkt {argv[0]}", argv[1:]
    name = rest[0]
    if name not in table:
        return None
    module_name, help_text = table[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"{prog} {name}", description=help_text)
    module.add_arguments(parser)
    if table is not COMMANDS:  # a group's command is told its name: one module may serve several
        parser.set_defaults(name=name)
    return parser, module_name


def _split_log(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--log FILE`` / ``--log=FILE`` before the command, and the remaining arguments."""
    if argv and argv[0].startswith("--log="):
        return argv[0][len("--log="):], argv[1:]
    if len(argv) >= 2 and argv[0] == "--log":
        return argv[1], argv[2:]
    return None, argv


def attempt_header(argv: list[str]) -> str:
    """The line that opens one attempt's output in a log: what ran, when, where."""
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return (f"===== hkt {' '.join(argv)} | {when} | host {socket.gethostname()} "
            f"pid {os.getpid()} =====\n")


def _attempts_name(log: str) -> str:
    path = os.path.abspath(log)
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.attempts")


def restore_attempts(log: str) -> None:
    """Where ``log`` is gone, empty or another file than its second name ``.NAME.attempts``
    (Snakemake deletes a job's log before each attempt), put the earlier attempts back at its
    head; the second name is then given anew by :func:`second_name`."""
    keep = _attempts_name(log)
    if not os.path.exists(keep) or (os.path.exists(log) and os.path.samefile(log, keep)):
        return
    with open(keep, "rb") as fh:
        earlier = fh.read()
    now = b""
    if os.path.exists(log):
        with open(log, "rb") as fh:
            now = fh.read()
    if not now.startswith(earlier):  # a copy that holds them already is left as it is
        with open(log, "wb") as fh:
            fh.write(earlier + now)
    os.unlink(keep)


def second_name(log: str) -> None:
    """Give ``log`` its second name: a hard link, or, where links cannot be made (some network
    file systems), a copy, which each attempt's end makes anew."""
    import shutil

    keep = _attempts_name(log)
    if os.path.exists(keep):
        if os.path.samefile(log, keep):
            return
        os.unlink(keep)  # an older copy: the log holds all of it
    try:
        os.link(log, keep)
    except OSError:
        shutil.copyfile(log, keep)


def _keeping(step: Callable[[str], None], log: str) -> bool:
    """Run one step of keeping ``log``'s attempts; on failure say so and go on: the job matters
    more than its history."""
    try:
        step(log)
        return True
    except OSError as exc:
        print(f"hkt: warning: could not keep the earlier attempts of {log} ({exc}); the next "
              "attempt's log may replace them", file=sys.stderr)
        return False


def run_logged(log: str, command: Callable[[], int], header: str = "") -> int:
    """Run ``command`` with stdout and stderr (file descriptors 1 and 2, so that child processes
    and C libraries are included) appended to ``log`` after ``header``; if it fails, print this
    attempt's last lines to the original stderr (only the stop line for a stopped command).
    Returns the command's exit status (1 for an uncaught exception, whose traceback goes to the
    log)."""
    os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    keeping = _keeping(restore_attempts, log)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a", encoding="utf-8") as fh:
        keeping = keeping and _keeping(second_name, log)  # before the command: a kill -9 too
        start = fh.tell()
        fh.write(header)
        fh.flush()
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            status = command()
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - the traceback belongs in the log, then the tail
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            if keeping:
                _keeping(second_name, log)  # a copy gets this attempt (a link has it already)
    if status:
        with open(log, encoding="utf-8", errors="replace") as fh:
            fh.seek(start)
            lines = deque(fh, maxlen=LOG_TAIL_LINES)
        if status in STOP_CODES and lines:
            sys.stderr.write(lines[-1])
        else:
            sys.stderr.write(f"--- end of {log}:\n{''.join(lines)}")
        sys.stderr.flush()
    return status


STOP_CODES = {128 + s for s in signals.SIGNALS}  # 130, 143: stopped by a signal


def main(argv: list[str] | None = None) -> int:
    entry = argv is None  # the process's own command line: it ends after this
    log, argv = _split_log(list(sys.argv[1:] if argv is None else argv))
    with signals.handled(ending=entry):
        if log is not None:
            status = run_logged(log, lambda: _main(argv), attempt_header(argv))
        else:
            status = _main(argv)
    try:
        sys.stdout.flush()  # what is still buffered, here rather than at the interpreter's exit
    except BrokenPipeError:
        return reader_gone()
    return status


def reader_gone() -> int:
    """Standard output's reader has gone (``| head -1`` read its line and closed the pipe): end
    quietly with exit 0, as the reader asked for no more. Standard output is pointed at
    /dev/null, so that nothing buffered fails again as the interpreter exits."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def _main(argv: list[str]) -> int:
    try:
        # a local workflow's GPU job: claim its GPU first, before anything starts CUDA
        from hkt.gpu_slots import claimed, for_command

        with claimed(for_command(argv), say=lambda s: print(s, file=sys.stderr, flush=True)):
            return _run_command(argv)
    except HKTError as exc:
        print(f"hkt: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # standard output's reader left early: not an error
        return reader_gone()
    except OSError as exc:  # disk full, read-only file system, permissions: the user's to fix
        print(f"hkt: error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except signals.Stopped as exc:
        print(f"hkt: {exc.message or _stopped(exc, argv)}", file=sys.stderr, flush=True)
        return exc.exit_code


def _run_command(argv: list[str]) -> int:
    found = _command_parser(argv)
    if found is None:
        _refuse_unknown_command(argv)
        build_parser(argv).parse_args(argv)  # prints help/usage and exits
        return 2
    parser, module_name = found
    skip = 2 if argv[0] in GROUPS else 1
    args = parser.parse_intermixed_args(argv[skip:])
    module = importlib.import_module(module_name)
    return int(module.run(args) or 0)


def _refuse_unknown_command(argv: list[str]) -> None:
    """Raise :class:`HKTError` for a command (or a group's command) that does not exist, listing
    those that do and the one it is likely a typo of (``hkt trian``: did you mean train?)."""
    table, prog, rest = {**COMMANDS, **GROUPS}, "hkt", argv
    if argv and argv[0] in GROUPS:
        table, prog, rest = group_table(argv[0]), f"hkt {argv[0]}", argv[1:]
    if not rest or rest[0].startswith("-") or rest[0] in table:
        return
    raise HKTError(f"unknown command '{prog} {rest[0]}' (commands: {', '.join(table)}; "
                   f"`{prog} --help` says what each does)" + did_you_mean(rest[0], table))


def _stopped(exc: signals.Stopped, argv: list[str]) -> str:
    """What a command stopped by a signal says, unless it said more itself."""
    name = " ".join(argv[:2] if argv and argv[0] in GROUPS else argv[:1]) or "the command"
    return (f"stopped by {exc.name} during `hkt {name}`: nothing half-written is left (every "
            "file is written whole or not at all); run the same command again to redo it")


_OS_HINTS = {
    errno.ENOSPC: "free some space or choose another location",
    errno.EDQUOT: "free some space or choose another location",
    errno.EROFS: "choose a location on a writable file system",
    errno.EACCES: "fix its permissions or choose another location",
    errno.EPERM: "fix its permissions or choose another location",
}


def describe_os_error(exc: OSError) -> str:
    """One line for an OSError: the path, the errno's meaning (for a full disk, the space the
    write needed and the space free there) and what to do."""
    meaning = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
    where = exc.filename if exc.filename is not None else "a file"
    hint = _OS_HINTS.get(exc.errno or -1, "check the path and try again")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        meaning += f" ({_space(exc)})"
        hint += ", then run the same command again: it goes on from the files written whole"
    return f"cannot write or read {where}: {meaning}; {hint}"


def _space(exc: OSError) -> str:
    """What a full disk lacked: the size the write needed (where known), the space left."""
    from hkt.fileio import free_bytes

    free = free_bytes(exc.filename) if exc.filename is not None else None
    needed = getattr(exc, "needed", None)
    parts = ([f"the write needed {_size(needed)}"] if needed is not None else []) + \
        [f"{_size(free)} free there" if free is not None else "free space unknown"]
    return ", ".join(parts)


def _size(n: int) -> str:
    """Bytes for people: B, KiB, MiB, GiB."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


if __name__ == "__main__":
    sys.exit(main())
