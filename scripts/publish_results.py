"""Copy a finished suite's results into ``docs/results/NAME/``: what a reader needs to audit every
number without rerunning it, and nothing large.

    .venv/bin/python scripts/publish_results.py RESULTS DEST [--replace]

Copies the summary, every table and figure, the attention benchmark, the plan the workflow
printed (``plan/suite.json``) and the workflow's sessions (``plan/sessions.json``: its wall time
over interruptions), and for every run its ``record.json``, ``history.csv`` and
composed ``config.yaml`` (runs/TASK/MODEL/VARIANT/seedS/), and for every analysis its
``summary.md`` and ``settings.json``. Checkpoints, data, logs and the MLflow store stay behind.
The environment of the runs (the same for all, or the copy stops) is written once, as
``environment.json``. A README of how the results were made is the publisher's to write.

Refuses a RESULTS without ``summary.md`` (the suite did not finish) and a DEST that holds files,
unless ``--replace`` (which removes what DEST held first).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

TOP = ("summary.md", "tables", "figures", "bench/attention.csv", "bench/attention.md", "plan/suite.json",
       "plan/sessions.json")
RUN_FILES = ("record.json", "history.csv", "config.yaml")
ANALYSIS_FILES = ("summary.md", "settings.json")


def environments(results: Path) -> dict[str, Path]:
    """Each distinct ``environment.json`` of the runs and analyses, by its text, with one file."""
    envs: dict[str, Path] = {}
    for f in sorted([*results.glob("runs/**/environment.json"), *results.glob("analysis/**/environment.json")]):
        envs.setdefault(f.read_text("utf-8"), f)
    return envs


def publish(results: Path, dest: Path, replace: bool = False) -> int:
    """Copy what :data:`TOP`, :data:`RUN_FILES` and :data:`ANALYSIS_FILES` name; the number of files."""
    if not (results / "summary.md").is_file():
        raise SystemExit(f"{results} has no summary.md: the suite has not finished (run the workflow first)")
    if dest.exists() and any(dest.iterdir()):
        if not replace:
            raise SystemExit(f"{dest} already holds files; pass --replace to publish over them")
        shutil.rmtree(dest)
    envs = environments(results)
    if len(envs) > 1:
        raise SystemExit(f"the runs were made in {len(envs)} different environments "
                         f"(e.g. {', '.join(str(p) for p in list(envs.values())[:2])}); publish one at a time")
    dest.mkdir(parents=True, exist_ok=True)
    copied = 0
    for name in TOP:
        src = results / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
            copied += sum(1 for f in src.rglob("*") if f.is_file())
        elif src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
            copied += 1
    for kind, names in (("runs", RUN_FILES), ("analysis", ANALYSIS_FILES)):
        for name in names:
            for src in sorted((results / kind).glob(f"**/{name}")):
                if "checkpoints" in src.parts:
                    continue
                target = dest / src.relative_to(results)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
                copied += 1
    if envs:
        env = next(iter(envs))
        json.loads(env)  # a corrupt file stops the copy here, not in a reader's hands
        (dest / "environment.json").write_text(env, "utf-8")
        copied += 1
    return copied


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--replace", action="store_true", help="remove what DEST holds first")
    args = ap.parse_args(argv)
    n = publish(args.results, args.dest, args.replace)
    print(f"published {n} files from {args.results} to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
