"""The ``hkt`` command line.

Each subcommand lives in the module that owns its logic; this file only maps names to
modules, imported lazily so that ``hkt --help`` stays fast. A command module exposes
``add_arguments(parser)`` and ``run(args) -> int``. ``hkt bench`` has one level more:
``hkt bench NAME`` maps to the modules in ``BENCHMARKS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hkt.errors import HKTError

COMMANDS: dict[str, tuple[str, str]] = {
    "prepare": ("hkt.data.cli", "Prepare a task's data as Parquet (download/verify or generate)."),
    "train": ("hkt.train.cli", "Train one model on prepared data; writes a run record."),
    "analyze": ("hkt.analysis.cli", "Analyse a trained run (kurtosis, kernel, fusion, truncation)."),
    "aggregate": ("hkt.report.cli", "Build tables and figures from run records or MLflow."),
    "doctor": ("hkt.doctor", "Check this machine against a suite before running it (config/doctor.yaml)."),
}

BENCHMARKS: dict[str, tuple[str, str]] = {
    "attention": ("hkt.bench.attention", "Time and memory of MHA vs HKT attention over sequence length."),
    "loader": ("hkt.bench.loader", "Data-loader throughput beside a training step's consumption."),
    "train": ("hkt.bench.train", "Training throughput of MHA/HKT models vs nn.TransformerEncoder."),
}


def _add_group(sub: argparse._SubParsersAction, table: dict[str, tuple[str, str]]) -> None:
    for name, (module, help_text) in table.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        # Arguments are added lazily in main() once the command is known.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hkt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_group(sub, COMMANDS)
    bench = sub.add_parser("bench", help="Benchmarks that print numbers and write results/bench/.")
    bench_sub = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    _add_group(bench_sub, BENCHMARKS)
    return parser


def _command_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str] | None:
    """Return the sub-parser and module for the command named in argv, with its arguments."""
    if not argv or argv[0].startswith("-"):
        return None
    table, prog, rest = COMMANDS, "hkt", argv
    if argv[0] == "bench":
        if len(argv) < 2 or argv[1].startswith("-"):
            return None
        table, prog, rest = BENCHMARKS, "hkt bench", argv[1:]
    name = rest[0]
    if name not in table:
        return None
    module_name, help_text = table[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"{prog} {name}", description=help_text)
    module.add_arguments(parser)
    return parser, module_name


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    found = _command_parser(argv)
    if found is None:
        build_parser().parse_args(argv)  # prints help/usage and exits
        return 2
    parser, module_name = found
    skip = 2 if argv[0] == "bench" else 1
    args = parser.parse_intermixed_args(argv[skip:])
    module = importlib.import_module(module_name)
    try:
        return int(module.run(args) or 0)
    except HKTError as exc:
        print(f"hkt: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
