"""``hkt train --data DATA_DIR --out RUN_DIR [OVERRIDES…]``: one training run.

Overrides are Hydra's: ``model=mha task=imdb profile=smoke seed=1 optim.lr=3e-4
model.mixer.levels=2`` or ``model=hkt variant=levels1``. The resolved config is printed
once the arguments are checked; a bad override or ``--data`` stops before any work with one
message naming it. Re-running the same command resumes an interrupted run from its last
checkpoint, or only reports a finished one.
"""

from __future__ import annotations

import argparse
import logging
import sys

from omegaconf import DictConfig, OmegaConf

from hkt.config_compose import config_dir
from hkt.errors import ConfigError
from hkt.logs import stderr_handler
from hkt.train.run_config import CONFIG_NAME, load_run_config


def _groups_epilog() -> str:
    try:
        cdir = config_dir()
    except Exception:  # noqa: BLE001 - help must never fail
        return ""
    lines = ["config groups (choose with GROUP=OPTION):"]
    for group in ("task", "model", "optim", "profile", "variant"):
        opts = sorted(p.stem for p in (cdir / group).glob("*.yaml"))
        lines.append(f"  {group:<11} {', '.join(opts) or '-'}")
    lines.append(f"config directory: {cdir} (override with $HKT_CONFIG_DIR)")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Train one model on prepared data (hkt prepare's output) from Hydra "
                          "config overrides; writes checkpoints, history.csv and record.json to "
                          "RUN_DIR and logs to MLflow. Re-running the same command resumes an "
                          "interrupted run or only reports a finished one.")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _groups_epilog()
    parser.add_argument("--data", metavar="DATA_DIR", help="prepared data (what `hkt prepare` wrote)")
    parser.add_argument("--out", metavar="RUN_DIR", help="run directory: checkpoints, history, record.json")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDES",
                        help="Hydra overrides, e.g. model=mha profile=smoke optim.lr=3e-4")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config, each key with the file that set it, "
                             "and exit (no --data/--out needed)")
    parser.add_argument("--restart-if-changed", action="store_true",
                        help="if RUN_DIR holds a run with another config or other data, empty it "
                             "and start over (default: refuse)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress output (the summary line is still printed)")


def run(args: argparse.Namespace) -> int:
    _log_to_stderr()  # load_config reports how it resolved model.match_params_of
    config = load_run_config(args.overrides)
    cfg = config.node
    if args.print_config:
        print(_config_with_sources(cfg, args.overrides), end="")
        return 0
    if not args.data or not args.out:
        raise ConfigError("hkt train needs --data DATA_DIR and --out RUN_DIR "
                          "(or --print-config to only show the config)")
    from hkt.train.loop import train  # torch: loaded after the config is checked, not for --help

    def announce() -> None:  # once the data are checked too: a bad --data is one line alone
        print("# resolved config\n" + OmegaConf.to_yaml(cfg), end="", flush=True)

    train(config, args.data, args.out, stream=sys.stderr, progress=not args.no_progress,
          restart_if_changed=args.restart_if_changed, announce=announce)
    return 0


def _config_with_sources(cfg: DictConfig, overrides: list[str]) -> str:
    """The resolved config, each key followed by the file that set it (:mod:`hkt.config_sources`)."""
    from hkt.config_sources import annotate_yaml, key_sources

    sources = key_sources(CONFIG_NAME, overrides)
    if cfg.model.get("match_params_of") is not None:  # load_run_config widened it
        sources["model.d_ffn"] = (f"widened to {cfg.model.match_params_of}'s parameter count "
                                  "(model.match_params_of)")
    return ("# each key's value comes from the file named after it (later files win: "
            "config/train.yaml's defaults list)\n" + annotate_yaml(OmegaConf.to_yaml(cfg), sources))


def _log_to_stderr() -> None:
    logger = logging.getLogger("hkt.train")
    if not logger.handlers:
        logger.addHandler(stderr_handler("hkt: %(message)s"))
        logger.setLevel(logging.INFO)
