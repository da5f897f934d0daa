"""``hkt prepare TASK --out DIR [--source PATH] [OVERRIDES…]``: write a task's Parquet splits and data card,
then its per-example facts (``examples.parquet``, :mod:`hkt.facts.examples`).

A command (layer 5, docs/contracts.md): the facts hold the ListOps rules' answers, which the
baselines (layer 4) compute, so the command, not :func:`hkt.data.prepare.prepare_task`, writes
them, and it sits in :mod:`hkt.cli`, above both, not in :mod:`hkt.data`.

``hkt prepare TASK --print-config [OVERRIDES…]`` prints the task config instead (every key).
"""

from __future__ import annotations

import argparse
import logging

from hkt.logs import stderr_handler


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="task config name: config/task/TASK.yaml (listops, listops_lra, imdb, "
                                     "imdb_lra, cifar10)")
    parser.add_argument("--out", help="output directory (train/val/test.parquet, README.md); required "
                                      "unless --print-config")
    parser.add_argument("--print-config", action="store_true",
                        help="print the task config with the overrides applied (every key) and exit")
    parser.add_argument("--source", default=None,
                        help="local archive or directory used instead of the download (ListOps: a directory "
                             "of LRA TSV files); overrides the mirror")
    parser.add_argument("--quiet", action="store_true", help="only warnings and errors")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the task config, e.g. "
                                                     "prepare.splits.train=1000 or max_length=4000")
    # overrides may come before or after the options (`hkt prepare listops --out D prepare.seed=1`)
    parser.parse_args = parser.parse_intermixed_args  # type: ignore[method-assign]


def _setup_logging(quiet: bool) -> None:
    logger = logging.getLogger("hkt")
    if not logger.handlers:
        logger.addHandler(stderr_handler("hkt: %(levelname)s: %(message)s"))
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


def run(args: argparse.Namespace) -> int:
    from hkt.data.task_config import load_task_config
    from hkt.facts.examples import write_examples
    from hkt.data.prepare import prepare_task
    from hkt.errors import ConfigError
    from hkt.fileio import ensure_writable_dir

    _setup_logging(args.quiet)
    cfg = load_task_config(args.task, args.overrides)  # fails on a bad key/value before any work
    if args.print_config:
        import yaml

        shown = {k: v for k, v in cfg.items() if k != "task"}
        print(yaml.safe_dump({"task": shown}, sort_keys=False), end="")
        return 0
    if not args.out:
        raise ConfigError("hkt prepare needs --out DIR (where to write the splits), "
                          "or --print-config to only show the config")
    ensure_writable_dir(args.out)  # before minutes of generation or download, not after
    result = prepare_task(args.task, args.out, source=args.source, cfg=cfg)
    examples = write_examples(result.out)  # the per-example facts the report reads by
    total = sum(result.counts.values())
    counts = ", ".join(f"{s} {n:,}" for s, n in result.counts.items())
    print(f"{args.task}: {counts} examples written to {result.out} in {result.seconds:.1f} s "
          f"({total / max(result.seconds, 1e-9):,.0f} examples/s)")
    for s, digest in result.checksums.items():
        print(f"  {s}.parquet sha256 {digest}")
    print(f"  data card: {result.out / 'README.md'}")
    print(f"  per-example facts: {examples}")
    return 0
