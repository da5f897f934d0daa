"""Copy a finished suite's results into ``docs/results/NAME/``: what a reader needs to audit every
number without rerunning it, and nothing large.

    .venv/bin/python scripts/publish_results.py RESULTS DEST [--replace]
    .venv/bin/python scripts/publish_results.py --retable DEST
    .venv/bin/python scripts/publish_results.py --add RESULTS DEST
    .venv/bin/python scripts/publish_results.py --redo RESULTS DEST
    .venv/bin/python scripts/publish_results.py --manifest DEST


Copies the summary, every table and figure, the attention benchmark, the plan the workflow
printed (``plan/suite.json``) and the workflow's sessions (``plan/sessions.json``: its wall time
over interruptions), each task's data card (``data/TASK/README.md``: source, checksums,
generator settings) and data metadata (``data/TASK/metadata.json``: what the tables' data
warnings are read from, ``hkt aggregate --data``) and per-example facts (``data/TASK/examples.parquet``,
where the data has them: what the per-example readings group predictions by), and for every run the summary counts (``tables/runs.csv``) its
``record.json``, ``history.csv``, composed ``config.yaml`` and ``predictions.parquet`` (the one
its record names, checked against the record's SHA-256; a run of before predictions were kept
has none) (runs/TASK/MODEL/VARIANT/seedS/),
and for each of their analyses ``summary.md``, ``settings.json`` and ``analysis.parquet`` (the
per-layer, per-head rows the analysis tables are built from). Checkpoints, data, logs and the
MLflow store stay behind, and so do runs the summary does not count (another suite's in the
same directory): the script names them. The environment of the runs (one software environment
for all, by its digest, or the copy stops) is written once, as ``environment.json``. A README
of how the results were made is the publisher's to write.

Refuses, before touching DEST: a RESULTS without ``summary.md`` or ``tables/runs.csv`` (the suite
did not finish), one a workflow is running in (it claims ``.workflow.lock`` as a workflow does,
so none starts while it copies), and one with a run
record or analysis newer than its summary (a run since the last aggregate); a DEST that holds
files, unless ``--replace``, which swaps the new copy in only once it is complete.

Every form but ``--manifest`` (one file, written atomically) writes DEST whole or not at all, one
writer at a time (hkt.staging): the new
publication is built in ``.NAME.staging/NAME`` beside it under the lock ``.NAME.lock`` and swapped
in by two renames; a second writer meanwhile is refused in one line, and what a killed one left is
recovered by the next run on DEST (the staging folder removed, or ``.NAME.old`` renamed back).

Every publication holds ``SHA256SUMS`` (``sha256sum -c SHA256SUMS`` checks it), written when it
is published, added to or sealed (``--manifest``): the SHA-256 of every file it holds but its
README, ``pending.json`` and what ``--retable`` rewrites (summary, tables, figures). Before its
tables are regenerated (``--retable``, ``--add``, the drift test) a publication is checked
against it, and each run's record against its ``history.csv`` (the record's validation accuracy
is the history's best, at its last step): a file edited, added or removed since is refused in
one line naming it.

``--add`` grows a publication by the jobs its suite gained (a new model in the main grid, a long
suite's runs as each finishes): the runs of suite DEST's name that DEST lacks and RESULTS holds
are copied as above; a run made in another software environment than DEST's (the lock moved
between sessions) carries its own ``environment.json`` beside its record, which the summary's
Environment section compares with DEST's (a run that records none is refused); RESULTS'
workflow sessions join DEST's, the jobs leave
DEST's ``pending.json`` (the suite's jobs not published yet, and why: the drift test,
``tests/test_published_results.py``, holds a publication to its suite but for these), and DEST
is retabled. The published runs are untouched. RESULTS may be a directory a workflow is still
running in (a long suite publishes each run as it lands while the next trains): ``--add`` then
takes only its finished runs, those with a record (the last file a run writes), not one the
suite also analyses (that waits for the workflow's end), and refuses, adding nothing, where a
run's record changed while it was copied. ``--redo`` puts runs made again in place of the published ones (issue 72: the cpu suite's
ListOps runs, made again to keep their predictions): each run RESULTS holds that DEST has
published, finished, whose record reaches the published run's outcome (hkt.run_identity: task,
model, variant, seed, steps, data, settings, best step, validation and test accuracy) replaces
it, record, history, config and predictions, with its own ``environment.json`` where it ran in
another; its history may differ in late digits (a CPU of another model rounds differently),
and the script says how far.
A run whose outcome differs, or that has no predictions where the published one has, is not
published and is named with why; where none qualifies nothing changes. A record of before
content checksums names only its split files' SHA-256, which a later release writes otherwise
for the same rows: ``--published-data DIR`` (repeatable) gives the published data prepared again
at the published commit, its files checked against the record's, whose content checksums stand
for the record's. RESULTS' sessions join
DEST's as ``redoes`` (``hkt plan`` reports them apart from the suite's own run), and DEST is
retabled; its analyses stay (made from the published run's weights, which a rerun at the same
outcome equals, or differs from in late digits as its history does). The replaced files remain in
the repository's history. ``scripts/identity_check.py --runs DEST RESULTS`` is the same check as
a report. Regenerating a publication (``--retable``,
``--add`` and the drift test) first checks each of its predictions files against its record.
Every record is read through its schema (hkt.run_record.load_record), and its predictions as
``hkt aggregate`` reads them (hkt.predictions.read_checked: SHA-256, rows, accuracies); a run
file that links out of its run's folder is refused (hkt.run_record.run_file), before anything
is staged.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from hkt.data_layout import DATA_METADATA, EXAMPLES
from hkt.environment import third_party_digest
from hkt.errors import HKTError
from hkt.publication import MANIFEST
from hkt.report.summary import data_metadata
from hkt.staging import staged_dir
from hkt.workflow.results_lock import LOCK_NAME, ResultsInUse, claim_results_dir, holder

PENDING = "pending.json"  # a publication's jobs of its suite not run and published yet
#: What the manifest leaves out: the publisher's prose and pending list, and what --retable
#: rewrites from the rest (the drift test holds those byte for byte).
UNSEALED = ("README.md", PENDING, MANIFEST, "summary.md", "tables/", "figures/")
TOP = ("summary.md", "tables", "figures", "bench/attention.csv", "bench/attention.md", "plan/suite.json",
       "plan/sessions.json")
RUN_FILES = ("record.json", "history.csv", "config.yaml")
ANALYSIS_FILES = ("summary.md", "settings.json", "analysis.parquet")


def environments(results: Path, runs: list[Path]) -> dict[str, Path]:
    """The distinct software environments of these runs and their analyses, by digest (the
    text where a file has none), each with one file. Kernel release and interpreter path are
    not part of the digest (hkt/environment.py): a suite resumed after a reboot is one."""
    envs: dict[str, Path] = {}
    for run in runs:
        for f in (results / "runs" / run / "environment.json", results / "analysis" / run / "environment.json"):
            if f.is_file():
                envs.setdefault(env_digest(_in_run(f)), f)
    return envs


def _in_run(path: Path) -> Path:
    """``path``, a file of a run's folder, refused in one line where it links out of it
    (:func:`hkt.run_record.run_file`)."""
    from hkt.run_record import RecordError, run_file

    try:
        return run_file(path.parent, path.name)
    except RecordError as exc:
        raise SystemExit(str(exc)) from None


def run_files(results: Path, run: Path) -> list[Path]:
    """What is published of one run (relative to ``results``): its record, history and config,
    the predictions its record names (checked against the record: :func:`run_predictions`), and
    its analysis's summary, settings and rows, those that exist; each inside its run's folder
    (a link to a file elsewhere is refused: publishing it would seal a file the run never
    wrote)."""
    files = [_in_run(results / kind / run / name).relative_to(results)
             for kind, names in (("runs", RUN_FILES), ("analysis", ANALYSIS_FILES))
             for name in names if (results / kind / run / name).is_file()]
    named = run_predictions(results / "runs" / run)
    return files if named is None else [*files, named.relative_to(results)]


def run_predictions(run_dir: Path) -> Path | None:
    """The predictions file (hkt.predictions) the record in ``run_dir`` names, as every reader
    takes it (:func:`hkt.predictions.read_checked`: the record read through its schema, the
    file inside the run, its SHA-256, rows and accuracies the record's); None for a record of
    before predictions were kept, which names none. One line where they are not the run's."""
    from hkt.predictions import RECORD_FIELD, PredictionsError, read_checked
    from hkt.run_record import RECORD_NAME, RecordError, load_record, run_file

    try:
        record = load_record(run_dir / RECORD_NAME)
        if read_checked(run_dir, record) is None:
            return None
        return run_file(run_dir, record[RECORD_FIELD]["file"])
    except (PredictionsError, RecordError) as exc:
        raise SystemExit(str(exc)) from None


def check_predictions(dest: Path) -> int:
    """Every predictions file of publication ``dest`` is the one its record names (SHA-256), and
    every record that names one has it; a run published before predictions were kept has none.
    Returns how many runs have them."""
    from hkt.predictions import PREDICTIONS_NAME

    named = {p for p in (run_predictions(r.parent) for r in dest.glob("runs/**/record.json")) if p}
    stray = sorted(set(dest.glob(f"runs/**/{PREDICTIONS_NAME}")) - named)
    if stray:
        raise SystemExit(f"{stray[0]} is named by no record ({len(stray)} such files): publish "
                         "predictions with the record that names them")
    return len(named)


def env_digest(env_file: Path) -> str:
    """An environment file's digest without this project's own version
    (:func:`hkt.environment.third_party_digest`: a release of hkt-bench between a publication's
    runs and its added ones is no other environment; their commits differ anyway), or its
    recorded digest where it lists no packages, or its text where it has neither."""
    text = env_file.read_text("utf-8")
    try:
        env = json.loads(text)
        if isinstance(env.get("packages"), dict):
            return third_party_digest(env)
        return env.get("digest") or text
    except (ValueError, AttributeError):
        raise SystemExit(f"{env_file} is not a JSON object: the run's environment is unreadable") from None


def counted_runs(results: Path) -> list[Path]:
    """The run directories (relative to RESULTS/runs) that the summary counts: ``tables/runs.csv``'s
    ``source`` column, each a path ending in runs/TASK/MODEL/VARIANT/seedS/record.json."""
    table = results / "tables" / "runs.csv"
    if not table.is_file():
        raise SystemExit(f"{results} has no tables/runs.csv: the suite's aggregate has not finished "
                         "(run the workflow to its end)")
    runs = []
    with table.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            parts = PurePosixPath(row.get("source") or "").parts
            if len(parts) < 6 or parts[-1] != "record.json" or "runs" not in parts:
                raise SystemExit(f"{table}: a run whose source is not a record in a results directory "
                                 f"({row.get('source')!r}); publish a suite aggregated from its records")
            at = len(parts) - 1 - parts[::-1].index("runs")
            run = Path(*parts[at + 1:-1])
            if not (results / "runs" / run / "record.json").is_file():
                raise SystemExit(f"{table} counts {run}, whose record is not in {results / 'runs'}")
            runs.append(run)
    return sorted(set(runs))


def check_finished(results: Path) -> None:
    """Claim RESULTS as a workflow does (hkt.workflow.results_lock), so none runs there while it is copied,
    and refuse one with a record or analysis newer than its summary."""
    try:
        claim_results_dir(results, Path(__file__).resolve().parents[1])
    except ResultsInUse as exc:
        raise SystemExit(f"{exc}; publish when it has finished") from None
    summary = (results / "summary.md").stat().st_mtime
    newer = [f for f in [*results.glob("runs/**/record.json"), *results.glob("analysis/**/analysis.parquet")]
             if f.stat().st_mtime > summary]
    if newer:
        raise SystemExit(f"{newer[0].relative_to(results)} is newer than summary.md ({len(newer)} such "
                         "files): runs have finished since the last aggregate; run the workflow to its end")


def write_metadata(data_dir: Path, dest: Path) -> None:
    """The ``hkt`` metadata of the prepared data in ``data_dir`` (its train split's), as JSON at
    ``dest``: what the tables' data warnings are read from (``hkt aggregate --data``)."""
    meta = data_metadata(data_dir)
    if meta is None:
        raise SystemExit(f"{data_dir} holds no prepared train split to read the data's metadata "
                         "from: publish from the results directory the suite ran in")
    dest.write_text(json.dumps(meta, indent=1) + "\n", "utf-8")


def publish(results: Path, dest: Path, replace: bool = False) -> tuple[int, list[Path]]:
    """Copy what the module docstring lists; the number of files and the runs left behind."""
    if not (results / "summary.md").is_file():
        raise SystemExit(f"{results} has no summary.md: the suite has not finished (run the workflow first)")
    runs = counted_runs(results)
    check_finished(results)
    envs = environments(results, runs)
    if len(envs) > 1:
        raise SystemExit(f"the runs were made in {len(envs)} different environments "
                         f"(e.g. {', '.join(str(p) for p in list(envs.values())[:2])}); publish one at a time")
    left = sorted({f.parent.relative_to(results / "runs") for f in results.glob("runs/**/record.json")
                   if "checkpoints" not in f.parts} - set(runs))
    for run in runs:  # before anything is staged: each run's files, its predictions checked
        run_files(results, run)
    check_histories(results, runs, schema=True)
    with writing(dest, copy=False) as stage:
        if dest.exists() and any(dest.iterdir()) and not replace:  # checked holding its lock
            raise SystemExit(f"{dest} already holds files; pass --replace to publish over them")
        return _copy_suite(results, runs, envs, stage), left


def _copy_suite(results: Path, runs: list[Path], envs: dict[str, Path], stage: Path) -> int:
    """Copy what the module docstring lists of ``results`` into ``stage``; the number of files."""
    copied = 0

    def copy(src: Path, rel: Path) -> None:
        nonlocal copied
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, stage / rel)
        copied += 1

    for name in TOP:
        src = results / name
        if src.is_dir():
            for f in sorted(p for p in src.rglob("*") if p.is_file()):
                copy(f, f.relative_to(results))
        elif src.is_file():
            copy(src, Path(name))
    for card in sorted(results.glob("data/*/README.md")):
        copy(card, card.relative_to(results))
        write_metadata(card.parent, stage / card.parent.relative_to(results) / DATA_METADATA)
        copied += 1
        if (card.parent / EXAMPLES).is_file():  # the per-example facts the readings group by
            copy(card.parent / EXAMPLES, card.parent.relative_to(results) / EXAMPLES)
    for run in runs:
        for f in run_files(results, run):
            copy(results / f, f)
    if envs:
        (stage / "environment.json").write_text(next(iter(envs.values())).read_text("utf-8"), "utf-8")
        copied += 1
    write_manifest(stage)
    return copied + 1


@contextlib.contextmanager
def writing(dest: Path, *, copy: bool = True) -> Iterator[Path]:
    """:func:`hkt.staging.staged_dir` for ``dest``: the whole new publication is built beside it
    and swapped in at once, under its lock (a second writer is refused in one line), and what
    a killed writer left is recovered first."""
    try:
        with staged_dir(dest, copy=copy) as stage:
            yield stage
    except HKTError as exc:
        raise SystemExit(str(exc)) from None


def check_histories(results: Path, runs: list[Path], *, schema: bool = False) -> None:
    """Before anything is copied: each run's record agrees with its ``history.csv`` (and, with
    ``schema``, loads through the record schema), or one line naming the first that does not."""
    from hkt.run_record import HISTORY_NAME, RECORD_NAME, RecordError, load_record

    for run in runs:
        rec_path = results / "runs" / run / RECORD_NAME
        try:
            rec = load_record(rec_path) if schema else json.loads(rec_path.read_text("utf-8"))
        except RecordError as exc:
            raise SystemExit(f"{exc.args[0].splitlines()[0]}; nothing was copied") from None
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{rec_path} is unreadable ({exc}); nothing was copied") from None
        _check_history(rec_path, rec_path.with_name(HISTORY_NAME), rec,
                       "nothing was copied: publish the run's own history and record")


def _check_history(rec_path: Path, hist: Path, rec: dict[str, Any], redo: str) -> None:
    """A record that disagrees with its run's ``history.csv`` (where there is one): one line."""
    from hkt.runs_frame import read_curve

    if not hist.is_file():
        return
    try:
        read_curve(hist, rec)
    except ValueError as exc:
        raise SystemExit(f"{rec_path} disagrees with its run's {hist.name} ({exc}); {redo}") from None


def sealed_files(dest: Path) -> list[str]:
    """The files of publication ``dest`` its manifest covers (POSIX paths relative to it)."""
    files = (f.relative_to(dest).as_posix() for f in dest.rglob("*") if f.is_file())
    return sorted(f for f in files if not any(f == u or (u.endswith("/") and f.startswith(u))
                                                for u in UNSEALED))


def write_manifest(dest: Path) -> Path:
    """``dest/SHA256SUMS``: every sealed file's SHA-256, in ``sha256sum``'s format."""
    from hkt.fileio import atomic_write_text, sha256_file

    path = dest / MANIFEST
    atomic_write_text(path, "".join(f"{sha256_file(dest / f)}  {f}\n" for f in sealed_files(dest)))
    return path


def verify(dest: Path) -> None:
    """Refuse (one line naming the file) a publication whose files are not the ones it was
    published with (its :data:`MANIFEST`), or a run whose record disagrees with its history."""
    from hkt.fileio import sha256_file
    from hkt.run_record import HISTORY_NAME, RECORD_NAME, load_record

    path = dest / MANIFEST
    if not path.is_file():
        raise SystemExit(f"{dest} has no {MANIFEST}: nothing shows its records are the ones its runs "
                         "wrote; publish it again, or seal it as it is with --manifest (then review "
                         "the files it lists)")
    listed: dict[str, str] = {}
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise SystemExit(f"{path}: line {n} is not `SHA256  FILE`")
        listed[name] = digest
    redo = (f"restore the published file (git checkout -- {dest}), or republish the suite; a file "
            f"added on purpose is sealed with --manifest")
    for name in sealed_files(dest):
        if name not in listed:
            raise SystemExit(f"{dest / name} is not in {path}: a file added since the publication; {redo}")
        if sha256_file(dest / name) != listed[name]:
            raise SystemExit(f"{dest / name} is not the file published (its SHA-256 differs from "
                             f"{path}'s): edited since; {redo}")
    gone = sorted(set(listed) - set(sealed_files(dest)))
    if gone:
        raise SystemExit(f"{dest / gone[0]} is in {path} but missing ({len(gone)} such files); {redo}")
    for rec_path in sorted(dest.glob(f"runs/**/{RECORD_NAME}")):
        hist = rec_path.with_name(HISTORY_NAME)
        if hist.is_file():
            _check_history(rec_path, hist, load_record(rec_path), redo)


def regenerate(dest: Path, work: Path) -> Path:
    """Rebuild the publication ``dest`` (``docs/results/NAME``)'s tables, figures and summary
    with this code, as its workflow's aggregate step did: the same arguments (the Grid of suite
    NAME), its records, analyses and data metadata laid out as a results directory under
    ``work`` and read from there (the records' paths are part of runs.csv). A publication of no
    suite (runs made by ``hkt train`` directly: ``docs/results/gpu``) is aggregated from every
    record under its ``runs/``, with the ablation table on the paper's ablation task. Returns
    the output directory. A publication whose files are not the ones published is refused
    first (:func:`verify`)."""
    from hkt.cli.main import main as hkt_main

    verify(dest)  # first: a file edited since is named as such
    check_predictions(dest)  # carried like records: each the file its record names, and saying it
    results = work / "results"
    for part in ("runs", "analysis"):
        if (dest / part).is_dir():
            shutil.copytree(dest / part, results / part)
    _lay_environments(dest, results)
    for meta in dest.glob(f"data/*/{DATA_METADATA}"):
        (results / meta.parent.relative_to(dest)).mkdir(parents=True)
        shutil.copy(meta, results / meta.relative_to(dest))
    for facts in dest.glob(f"data/*/{EXAMPLES}"):
        shutil.copy(facts, results / facts.relative_to(dest))
    args = [*_aggregate_inputs(dest.name, results, published_only=True),  # pending runs: not in dest
            "--out", "results",
            "--main-variant", "main",
            "--data", "results/data"]
    if (dest / "bench" / "attention.csv").is_file():
        args += ["--bench", str((dest / "bench" / "attention.csv").resolve())]
    with contextlib.chdir(work):
        if hkt_main(["aggregate", *args]) != 0:
            raise SystemExit(f"hkt aggregate failed on the records of {dest}")
    return results


def _lay_environments(dest: Path, results: Path) -> None:
    """Beside each record laid out in ``results`` that has no ``environment.json`` of its own, the
    publication's, where the record's ``env_digest`` is that environment's (as a workflow's run
    directory holds it): the summary reads a run's environment beside its record."""
    from hkt.run_record import RECORD_NAME, load_record

    root = dest / "environment.json"
    if not root.is_file():
        return
    digest = json.loads(root.read_text("utf-8")).get("digest")
    for rec in results.glob(f"runs/**/{RECORD_NAME}"):
        env = rec.with_name("environment.json")
        if not env.exists() and digest and load_record(rec).get("env_digest") == digest:
            shutil.copyfile(root, env)


def pending_runs(dest: Path) -> list[str]:
    """The runs (``TASK/MODEL/VARIANT/seedS``) of its suite that publication ``dest`` does not
    hold yet, as its :data:`PENDING` lists them (none without one)."""
    return _pending(dest)[0]


def _pending(dest: Path) -> tuple[list[str], str]:
    """:data:`PENDING`'s runs and why they are pending, checked."""
    path = dest / PENDING
    if not path.is_file():
        return [], ""
    try:
        pending = json.loads(path.read_text("utf-8"))
        runs, why = list(pending["runs"]), str(pending["why"])
    except (ValueError, KeyError, TypeError):
        raise SystemExit(f"{path}: expected a JSON object with 'runs' (a list of "
                         "TASK/MODEL/VARIANT/seedS) and 'why'") from None
    if not why or not all(isinstance(r, str) and r.count("/") == 3 for r in runs):
        raise SystemExit(f"{path}: each run is TASK/MODEL/VARIANT/seedS, and 'why' says why")
    return runs, why


def _aggregate_inputs(name: str, results: Path, pending: list[str] = (), *,
                      published_only: bool = False) -> list[str]:
    """The records, suite, ablation and analyses arguments of suite ``name``'s aggregate step,
    paths relative to ``results``' parent, but the ``pending`` runs'; every record under
    ``results/runs`` for no suite. ``published_only``: also leave out the suite's runs that
    ``results`` lacks (a model added to the suite since it was published: the drift test,
    ``tests/test_published_results.py``, names them), so its tables regenerate as published."""
    from hkt.config_compose import config_dir
    from hkt.paper import ABLATION_TASK
    from hkt.workflow.suites import load_suite

    configs = config_dir()
    if not (configs / "suites" / f"{name}.yaml").is_file():
        records = sorted(str(f.relative_to(results.parent)) for f in results.rglob("record.json"))
        return [*records, "--ablation-task", ABLATION_TASK]
    grid = load_suite(name, overrides={"results_dir": results.name}).grid
    analyses = ["--analyses", *grid.analyses()] if grid.analyses() else []
    borrow = grid.borrow_args()
    for path in borrow[1::2]:  # after each --borrow: repository paths, as the workflow (run from the root) reads them
        if not Path(path).is_absolute():
            shutil.copytree(configs.parent / path, results.parent / path)
    records = [r for r in grid.records()
               if not any(r.endswith(f"/runs/{run}/record.json") for run in pending)
               and (not published_only or (results.parent / r).is_file())]
    board = ["--leaderboard", str(configs.parent / grid.leaderboard)] if grid.leaderboard else []
    return [*records, "--suite", name, *grid.ablation_args(), *borrow, *analyses, *board]


def add_runs(results: Path, dest: Path) -> list[str]:
    """Copy into publication ``dest`` the runs of its suite it lacks that ``results`` holds
    (module docstring, ``--add``), then retable it; the runs added. The new publication is
    built beside ``dest`` and swapped in whole, holding its lock (:func:`writing`): a refusal,
    a failure or a kill leaves ``dest`` as it was, and a second ``--add`` is refused meanwhile."""
    with writing(dest) as stage:
        return _add_runs(results, dest, stage)


def _add_runs(results: Path, dest: Path, stage: Path) -> list[str]:
    """:func:`add_runs`, checking ``dest`` (held) and writing its copy ``stage``."""
    from hkt.workflow.suites import load_suite

    grid = load_suite(dest.name, overrides={"results_dir": "results"}).grid
    wanted = [PurePosixPath(r).parent.relative_to("results/runs") for r in grid.records()]
    new = [run for run in wanted if not (dest / "runs" / run / "record.json").is_file()
           and (results / "runs" / run / "record.json").is_file()]
    if not new:
        raise SystemExit(f"{results} holds no run of suite {dest.name} that {dest} lacks")
    try:
        claim_results_dir(results, Path(__file__).resolve().parents[1])
        live = False
    except ResultsInUse:  # a long suite's next run: its finished runs are final
        new, live = finished_runs(results, new, grid), True
    verify(dest)  # what it holds is what was published, before anything joins it
    if not (dest / "environment.json").is_file():
        raise SystemExit(f"{dest} has no environment.json to compare the runs' with")
    unknown = [run for run in new if not (results / "runs" / run / "environment.json").is_file()]
    if unknown:
        raise SystemExit(f"runs that record no software environment ({', '.join(map(str, unknown))}): "
                         f"{dest}'s readers could not tell what they ran in; rerun them with this code")
    ours = env_digest(dest / "environment.json")
    records = {run: (results / "runs" / run / "record.json").read_bytes()  # read again below
               for run in new} if live else {}
    check_histories(results, new, schema=True)  # before anything is copied
    for run in new:  # and each run's files, its predictions checked
        run_files(results, run)
    staged = _stage_runs(results, new, ours, stage)
    if live:  # a run the workflow began again while it was read is not the one checked
        moved = [run for run in new
                 if (results / "runs" / run / "record.json").read_bytes() != records[run]]
        if moved:
            raise SystemExit(f"{', '.join(map(str, moved))}: its record changed while it was "
                             f"copied (the workflow in {results} runs it again); nothing was "
                             f"added to {dest}: add it once that run has finished")
    for f in staged:
        if f.name == "environment.json":
            print(f"{f.parent.relative_to('runs')}: made in another software environment "
                  f"than {dest}'s ({env_digest(stage / f)[:12]}, not {ours[:12]}); its "
                  "environment.json is published beside its record")
    _copy_facts(results, stage)
    _add_sessions(results / "plan" / "sessions.json", stage / "plan" / "sessions.json",
                  {str(PurePosixPath(run)): run_span(results / "runs" / run) for run in new})
    pending, why = _pending(stage)
    pending = [r for r in pending if PurePosixPath(r) not in set(map(PurePosixPath, new))]
    if pending:
        (stage / PENDING).write_text(json.dumps({"why": why, "runs": pending}, indent=1) + "\n", "utf-8")
    else:
        (stage / PENDING).unlink(missing_ok=True)
    write_manifest(stage)
    _retable(stage)
    return [str(PurePosixPath(run)) for run in new]


def redo_runs(results: Path, dest: Path, data: list[Path] = ()) -> tuple[list[str], list[str]]:
    """Put the runs ``results`` made again in place of ``dest``'s (module docstring, ``--redo``),
    then retable it, swapped in whole (:func:`writing`); the runs replaced, and those left out
    with why. ``data``: the published runs' data prepared again at their commit
    (``--published-data``, hkt.data.parquet.prepared_checksums)."""
    from hkt.data.parquet import prepared_checksums
    from hkt.errors import DataError

    try:
        known = [prepared_checksums(d) for d in data]
    except DataError as exc:
        raise SystemExit(str(exc)) from None
    with writing(dest) as stage:
        return _redo_runs(results, dest, stage, known)


def _redo_runs(results: Path, dest: Path, stage: Path, known: list[dict]) -> tuple[list[str], list[str]]:
    """:func:`redo_runs`, checking ``dest`` (held) and writing its copy ``stage``."""
    from hkt.run_identity import rerun_differences

    made = sorted(f.parent.relative_to(results / "runs") for f in results.glob("runs/**/record.json"))
    again = [run for run in made if (dest / "runs" / run / "record.json").is_file()]
    if not again:
        raise SystemExit(f"{results} holds no run that {dest} has published (--add adds new ones)")
    done = [run for run in again  # made again and put in place by an earlier --redo
            if (dest / "runs" / run / "record.json").read_bytes()
            == (results / "runs" / run / "record.json").read_bytes()]
    again = [run for run in again if run not in done]
    if not again:
        raise SystemExit(f"every run of {results} that {dest} has published is there as made again "
                         "already; nothing to do")
    try:
        claim_results_dir(results, Path(__file__).resolve().parents[1])
        live = False
    except ResultsInUse:  # runs still training there: those with a record are final
        live = True
    verify(dest)
    unknown = [run for run in again if not (results / "runs" / run / "environment.json").is_file()]
    if unknown:
        raise SystemExit(f"runs that record no software environment ({', '.join(map(str, unknown))}): "
                         f"{dest}'s readers could not tell what they ran in; rerun them with this code")
    records = {run: (results / "runs" / run / "record.json").read_bytes() for run in again} if live else {}
    check_histories(results, again, schema=True)
    take, left = [], []
    for run in again:  # outcome, data, settings and predictions (each file checked against its record)
        why, notes = rerun_differences(dest / "runs" / run, results / "runs" / run, known)
        if why:
            left.append(f"{run}: {'; '.join(why)}")
            continue
        print(f"{run}: same outcome as published; {notes[0]}")
        take.append(run)
    if not take:
        raise SystemExit(f"no run of {results} reached its published run's outcome; {dest} is "
                         "unchanged: " + " | ".join(left))
    for run in take:  # the published run's files go, the rerun's come (environment.json too)
        shutil.rmtree(stage / "runs" / run)
    staged = _stage_runs(results, take, env_digest(dest / "environment.json"), stage)
    if live and any((results / "runs" / run / "record.json").read_bytes() != records[run] for run in take):
        raise SystemExit(f"a record in {results} changed while it was copied (the workflow runs it "
                         f"again); {dest} is unchanged: redo once that run has finished")
    for f in staged:
        if f.name == "environment.json":
            print(f"{f.parent.relative_to('runs')}: made in another software environment than "
                  f"{dest}'s; its environment.json is published beside its record")
    _copy_facts(results, stage)
    _add_sessions(results / "plan" / "sessions.json", stage / "plan" / "sessions.json",
                  {str(PurePosixPath(run)): run_span(results / "runs" / run) for run in take + done},
                  key="redoes")  # a session still running at an earlier --redo joins now
    write_manifest(stage)
    _retable(stage)
    return [str(PurePosixPath(run)) for run in take], left


def finished_runs(results: Path, new: list[PurePosixPath], grid: Any) -> list[PurePosixPath]:
    """The runs of ``new`` that ``--add`` may take from a results directory a workflow is
    running in (its lock names whose): a run whose record exists is finished and final (the
    record is the last file a training run writes, hkt.train.loop), but one the suite also
    analyses waits for the workflow's end (its analysis may be under way). Says which it takes."""
    analysed = {PurePosixPath(a).parent.relative_to("results/analysis") for a in grid.analyses()}
    waiting = [run for run in new if run in analysed]
    take = [run for run in new if run not in analysed]
    who = holder(results / LOCK_NAME)
    print(f"a workflow is running in {results} (pid {who.get('pid', '?')} on host "
          f"{who.get('host', '?')}, from {who.get('checkout', '?')}): adding only its finished "
          f"runs ({len(take)})"
          + (f"; left for the workflow's end, as the suite analyses them: "
             f"{', '.join(map(str, waiting))}" if waiting else ""))
    if not take:
        raise SystemExit(f"{results}: every run it has finished is one the suite also analyses, "
                         "and the workflow still runs there; add them when it has finished")
    return take


def _copy_facts(results: Path, stage: Path) -> None:
    """The per-example facts of ``results``' data (``data/TASK/examples.parquet``) that the
    publication ``stage`` lacks for a task it holds: what the runs' predictions are read by (the
    report checks each run's labels against them)."""
    for facts in sorted(results.glob(f"data/*/{EXAMPLES}")):
        target = stage / facts.relative_to(results)
        if target.parent.is_dir() and not target.is_file():
            shutil.copy2(facts, target)


def _stage_runs(results: Path, new: list[PurePosixPath], ours: str, stage: Path) -> list[Path]:
    """Copy each new run's published files (``run_files``) from ``results`` into ``stage``; a
    run of another environment than the publication's (``ours``: a publication that spans
    sessions while the lock moves) carries its own ``environment.json`` beside its record, which
    the summary compares. The files staged, relative to ``stage``."""
    staged: list[Path] = []
    for run in new:
        env = Path("runs") / run / "environment.json"
        other = [env] if env_digest(_in_run(results / env)) != ours else []
        for f in [*run_files(results, run), *other]:
            (stage / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(results / f, stage / f)
            staged.append(f)
    return staged


def run_span(run_dir: Path) -> tuple[float, float]:
    """When a run trained: from its record's ``created_at`` (its end) less its ``wall_time_s``
    (the time of its sessions together, so a run resumed after a pause starts no earlier than
    this) to its end, in seconds since the epoch."""
    from datetime import datetime

    from hkt.run_record import RECORD_NAME, load_record

    rec = load_record(run_dir / RECORD_NAME)
    end = datetime.fromisoformat(str(rec["created_at"]).replace("Z", "+00:00")).timestamp()
    return end - float(rec.get("wall_time_s") or 0.0), end


def _add_sessions(src: Path, dest: Path, spans: dict[str, tuple[float, float]],
                  key: str = "adds") -> None:
    """``src``'s workflow sessions joined to ``dest``'s (each once: by start time and pid), each
    naming the runs it added (``key``: ``adds``, or ``redoes`` for runs made again; its plan's
    estimate was of the whole suite, not of these runs, so ``hkt plan`` reports them apart). A session adds the runs it worked on: those
    whose training (``spans``, :func:`run_span`) it overlaps, or that its command names as a
    target. Others are left out, and so is one still running here (another run's, in a copy of
    its results directory): it has no end yet."""
    import socket

    from hkt.workflow.sessions import running_here, session_end

    if not src.is_file():
        return
    mine = json.loads(dest.read_text("utf-8")) if dest.is_file() else {"sessions": []}
    seen = {(s.get("started"), s.get("pid")) for s in mine["sessions"]}
    host = socket.gethostname()
    for s in json.loads(src.read_text("utf-8"))["sessions"]:
        if (s.get("started"), s.get("pid")) in seen or running_here(s, host):
            continue
        start, end = float(s["started"]), session_end(s, now=0.0, host=host)
        named = " ".join(map(str, s.get("argv") or []))
        runs = [run for run, (a, b) in spans.items()
                if (start < b and a < end) or f"runs/{run}/record.json" in named]
        if runs:
            mine["sessions"].append({**s, key: runs})
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(mine, indent=1) + "\n", "utf-8")


def retable(dest: Path) -> int:
    """Replace ``dest``'s tables (the MLflow audit aside), figures and summary with
    :func:`regenerate`'s, swapped in whole (:func:`writing`); the number of files written."""
    with writing(dest) as stage:
        verify(dest)  # the seal first: an edited file is named as edited
        check_predictions(dest)  # refused naming dest's files, not its staged copy's
        return _retable(stage)


def _retable(dest: Path) -> int:
    """:func:`retable`, in place."""
    with tempfile.TemporaryDirectory() as tmp:
        out = regenerate(dest, Path(tmp))
        n = 0
        made = [out / "summary.md", *(out / "tables").iterdir(), *(out / "figures").iterdir()]
        for f in sorted(made):
            target = dest / f.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="?")
    ap.add_argument("dest", type=Path)
    ap.add_argument("--replace", action="store_true", help="replace what DEST holds, once the new copy is complete")
    ap.add_argument("--add", action="store_true",
                    help="add to DEST the runs of its suite it lacks that RESULTS holds, then retable")
    ap.add_argument("--redo", action="store_true",
                    help="put the runs RESULTS made again in place of DEST's, where each reaches its "
                         "published outcome, then retable")
    ap.add_argument("--published-data", type=Path, action="append", default=[], metavar="DIR",
                    help="with --redo: the published runs' data prepared again at their commit, for "
                         "records of before content checksums (its files must equal theirs)")
    ap.add_argument("--manifest", action="store_true",
                    help=f"no RESULTS: write DEST's {MANIFEST} anew from the files it holds (a "
                         "publication assembled by hand, a file added on purpose: review the diff)")
    ap.add_argument("--retable", action="store_true",
                    help="no RESULTS: rebuild DEST's tables, figures and summary from its own records "
                         "with this code (DEST's name is its suite's)")
    args = ap.parse_args(argv)
    if args.manifest:
        if args.results is not None:
            ap.error("--manifest takes DEST alone")
        print(f"wrote {write_manifest(args.dest)}: {len(sealed_files(args.dest))} files")
        return 0
    if args.retable:
        if args.results is not None:
            ap.error("--retable takes DEST alone")
        print(f"wrote {retable(args.dest)} files in {args.dest}")
        return 0
    if args.results is None:
        ap.error("give RESULTS and DEST")
    if args.published_data and not args.redo:
        ap.error("--published-data goes with --redo")
    if args.redo:
        done, left = redo_runs(args.results, args.dest, args.published_data)
        print(f"made again in {args.dest}: {len(done)} run{'' if len(done) == 1 else 's'}: "
              f"{', '.join(done)}")
        for why in left:
            print(f"not published (its published run stays): {why}")
        return 0
    if args.add:
        added = add_runs(args.results, args.dest)
        print(f"added {len(added)} run{'' if len(added) == 1 else 's'} to {args.dest}: "
              f"{', '.join(added)}")
        return 0
    n, left = publish(args.results, args.dest, args.replace)
    print(f"published {n} files from {args.results} to {args.dest}")
    if left:
        print(f"left behind {len(left)} runs the summary does not count: "
              + ", ".join(str(r) for r in left[:5]) + (" ..." if len(left) > 5 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
