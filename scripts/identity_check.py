"""Do two results directories hold the same numbers? Compares every table of A with B's, leaving
out only what differs by nature between two runs of the same suite: timings, run ids, paths,
creation times, commit and environment digests (and the measured rows of the cost table).

    .venv/bin/python scripts/identity_check.py RESULTS_A RESULTS_B
    .venv/bin/python scripts/identity_check.py --runs PUBLISHED RERUNS

The check of a change that must not alter a number (issue 22): run a suite before and after it,
from clean results directories, and compare; the recipe, with the smoke suite and the cpu cut
(``config/cuts/cpu.yaml``), is in docs/development.md. Besides the tables, every training run's
history (each logged step's loss, accuracy, learning rate and validation) must be the same, and
so must every run's predictions (``predictions.parquet``: each example's class and
probabilities), where A's run has them.
A column that only one side's table has (a change that adds a column) is named, not counted;
so are the runs only B has (a change that adds jobs, e.g. a new model in the main grid): their
histories and their rows (by the tables' key columns) are listed, and the rest compared.
Exit status 1 if any value differs or a run of A (or its predictions) is missing in B.

``--runs``: runs made again (a results directory holding some of a publication's runs, from
another commit or machine: issue 72) against the published ones, run by run (hkt.run_identity):
each rerun must reach its published run's outcome (task, model, variant, seed, steps, data,
settings, best step, validation and test accuracy); its history is compared value by value and
a difference is reported with how many significant digits agree everywhere (late digits:
rounding, as on a CPU of another model; few: training grew it, as S4D's did), not counted on
its own: the outcome decides; predictions are compared where both have them. Exit status 1
if a rerun's outcome differs or the publication lacks its run. A record of before content
checksums (``data_content_checksums``) names only its split files' SHA-256, which a later
release of hkt writes otherwise for the same rows: ``--published-data DIR`` gives the published
data prepared again at the published commit (its files must equal those the record names), whose
content checksums then stand for the record's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

BY_NATURE = {"ms_per_step", "wall_time_s", "created_at", "mlflow_run_id", "source",
             "mlflow_tracking_uri", "run_dir", "results_dir", "samples_per_s", "git_commit",
             "env_digest", "mlflow_experiment", "detail", "record",
             "wall_h", "steps_h", "evaluation_share"}  # the time table's: timings


#: Words the report writes about a run rather than numbers it measured: a change may reword
#: them (a data warning, a budget in words, the device's description, which names the CPU's
#: model since issue 59); the check names what changed and does not count it.
WORDING = {"data_warning", "budget", "external", "device"}  # external: the baseline's module


def same_frames(x: pl.DataFrame, y: pl.DataFrame) -> bool:
    """The same values in the columns both have, leaving out those in BY_NATURE. A column that
    only one side has (a change that adds or drops a column of a table) is no number changed:
    :func:`column_changes` names it."""
    cols = [c for c in x.columns if c not in BY_NATURE | WORDING and c in y.columns]
    return x.height == y.height and x.select(cols).equals(y.select(cols))


def column_changes(x: pl.DataFrame, y: pl.DataFrame) -> str:
    """The columns only B has, only A has, and the reworded ones, in words ("" for none)."""
    added = [c for c in y.columns if c not in x.columns]
    dropped = [c for c in x.columns if c not in y.columns]
    reworded = [c for c in x.columns if c in WORDING and c in y.columns and x.height == y.height
                and not x[c].equals(y[c])]
    return "; ".join(filter(None, (f"columns only in B: {', '.join(added)}" if added else "",
                                   f"columns only in A: {', '.join(dropped)}" if dropped else "",
                                   f"reworded: {', '.join(reworded)}" if reworded else "")))


def compare_histories(a: Path, b: Path) -> int:
    """How many training runs' histories (every logged step) differ between A and B."""
    differ, files = 0, sorted((a / "runs").glob("**/history.csv"))
    for f in files:
        g = b / f.relative_to(a)
        if not g.exists() or not same_frames(pl.read_csv(f), pl.read_csv(g)):
            print(f"{'missing in B' if not g.exists() else 'DIFFERENT'}  {f.relative_to(a)}")
            differ += 1
    extra = {g.relative_to(b) for g in (b / "runs").glob("**/history.csv")} - {f.relative_to(a) for f in files}
    for g in sorted(extra):
        print(f"only in B (new, not compared): {g}")
    print(f"{'same' if not differ else 'DIFFERENT'}  {len(files)} training histories")
    return differ


def compare_predictions(a: Path, b: Path) -> int:
    """How many runs' predictions (runs/**/predictions.parquet: every example's class and
    probabilities) differ between A and B. A run of A with none (made before predictions were
    kept) is not compared; one of A whose B lacks them is a difference."""
    differ, files = 0, sorted((a / "runs").glob("**/predictions.parquet"))
    for f in files:
        g = b / f.relative_to(a)
        if not g.exists() or not pl.read_parquet(f).equals(pl.read_parquet(g)):
            print(f"{'missing in B' if not g.exists() else 'DIFFERENT'}  {f.relative_to(a)}")
            differ += 1
    extra = ({g.relative_to(b) for g in (b / "runs").glob("**/predictions.parquet")}
             - {f.relative_to(a) for f in files})
    for g in sorted(extra):
        print(f"only in B (new, not compared): {g}")
    print(f"{'same' if not differ else 'DIFFERENT'}  {len(files)} runs' predictions")
    return differ


#: Columns that name a table's row (those a table has): rows only B has are new runs.
KEY = ["task", "length", "model", "variant", "seed", "versus", "comparison", "lr", "what"]


def shared_rows(x: pl.DataFrame, y: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """A's and B's rows whose key B's rows and A's share (sorted alike), and B's other rows in
    words: rows only A has stay in A's frame, so they count as a difference."""
    key = [c for c in KEY if c in x.columns and c in y.columns]
    if not key or y.is_empty():
        return x, y, ""
    new = y.join(x.select(key), on=key, how="anti", nulls_equal=True)
    y = y.join(new.select(key), on=key, how="anti", nulls_equal=True)
    note = f"{new.height} row(s) only in B, not compared" if new.height else ""
    return x.sort(key, nulls_last=True), y.sort(key, nulls_last=True), note


def main(a: Path, b: Path) -> int:
    differ = compare_histories(a, b) + compare_predictions(a, b)
    for f in sorted((a / "tables").glob("*.csv")):
        g = b / "tables" / f.name
        if not g.exists():
            print(f"missing in {b}: {f.name}")
            differ += 1
            continue
        x, y = pl.read_csv(f), pl.read_csv(g)
        if f.name == "cost.csv":  # the measured rows are timings
            x, y = (t.filter(pl.col("what").str.starts_with("analytic")) for t in (x, y))
        x, y, new = shared_rows(x, y)
        same, columns = same_frames(x, y), "; ".join(filter(None, (column_changes(x, y), new)))
        print(f"{'same' if same else 'DIFFERENT'}  {f.name} {x.shape}{f' ({columns})' if columns else ''}")
        differ += not same
    print("identical" if not differ else f"{differ} file(s) differ")
    return 1 if differ else 0


def compare_runs(published: Path, reruns: Path, data: list[Path] = ()) -> int:
    """``--runs`` (module docstring): each run of ``reruns`` against ``published``'s; the
    number whose outcome differs or that ``published`` lacks. ``data``: the published runs'
    data prepared again at their commit (``--published-data``: hkt.data.parquet.prepared_checksums)."""
    from hkt.data.parquet import prepared_checksums
    from hkt.run_identity import rerun_differences
    from hkt.run_record import load_record

    known = [prepared_checksums(d) for d in data]
    records = sorted((reruns / "runs").glob("**/record.json"))
    if not records:
        print(f"{reruns} holds no run record (runs/TASK/MODEL/VARIANT/seedS/record.json)")
        return 1
    differ = 0
    for rec in records:
        run = rec.parent.relative_to(reruns / "runs")
        old = published / "runs" / run
        if not (old / "record.json").is_file():
            print(f"not published  {run}")
            differ += 1
            continue
        diffs, notes = rerun_differences(old, rec.parent, known)
        differ += bool(diffs)
        b = load_record(rec)  # checked, as every reader of a record checks it
        print(f"{'DIFFERENT' if diffs else 'same outcome'}  {run}: best step {b.get('best_step')}, "
              f"val {b.get('val_accuracy')}, test {b.get('test_accuracy')}; " + "; ".join(diffs + notes))
    print(f"{'same outcome' if not differ else f'{differ} DIFFERENT'}: {len(records)} runs made again")
    return differ


USAGE = ("usage: python scripts/identity_check.py RESULTS_A RESULTS_B\n"
         "       python scripts/identity_check.py --runs PUBLISHED RERUNS [--published-data DIR ...]")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--runs"] and len(args) >= 3 and len(args) % 2 == 1 \
            and all(flag == "--published-data" for flag in args[3::2]):
        sys.exit(1 if compare_runs(Path(args[1]), Path(args[2]), [Path(d) for d in args[4::2]]) else 0)
    if len(args) != 2 or args[0].startswith("--"):
        sys.exit(USAGE)
    sys.exit(main(Path(args[0]), Path(args[1])))
