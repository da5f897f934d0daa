"""Do two results directories hold the same numbers? Compares every table of A with B's, leaving
out only what differs by nature between two runs of the same suite: timings, run ids, paths,
creation times, commit and environment digests (and the measured rows of the cost table).

    .venv/bin/python scripts/identity_check.py RESULTS_A RESULTS_B

The check of a change that must not alter a number (issue 22): run the smoke suite before and
after it, from clean results directories, and compare. Exit status 1 if any table differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

BY_NATURE = {"ms_per_step", "wall_time_s", "created_at", "mlflow_run_id", "source",
             "mlflow_tracking_uri", "run_dir", "results_dir", "samples_per_s", "git_commit",
             "env_digest", "mlflow_experiment", "detail", "record"}


def main(a: Path, b: Path) -> int:
    differ = 0
    for f in sorted((a / "tables").glob("*.csv")):
        g = b / "tables" / f.name
        if not g.exists():
            print(f"missing in {b}: {f.name}")
            differ += 1
            continue
        x, y = pl.read_csv(f), pl.read_csv(g)
        if f.name == "cost.csv":  # the measured rows are timings
            x, y = (t.filter(pl.col("what").str.starts_with("analytic")) for t in (x, y))
        cols = [c for c in x.columns if c not in BY_NATURE]
        same = cols == [c for c in y.columns if c not in BY_NATURE] and x.select(cols).equals(
            y.select(cols))
        print(f"{'same' if same else 'DIFFERENT'}  {f.name} {x.shape}")
        differ += not same
    print("identical" if not differ else f"{differ} table(s) differ")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/identity_check.py RESULTS_A RESULTS_B")
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
