"""The published suites (docs/results/cpu/, quick/, sensitivity/) can be audited without rerunning
them: every table file comes back byte for byte from the committed records, analyses, benchmark
and data metadata, with the code here; and each suite still composes exactly its published runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "results"
CONFIG_DIR = ROOT / "config"
#: The suites with a publication (their ``published`` key): docs/results/NAME is suite NAME's.
PUBLISHED_SUITES = sorted(p.stem for p in (CONFIG_DIR / "suites").glob("*.yaml")
                          if "\npublished:" in p.read_text())


def _publish_script():
    return load_script("publish_results")


def _has_records(root: Path) -> bool:
    """Whether publication ``root`` holds a run record (docs/results/s5_recipe/ holds a partial
    curve of a run still pending: its config, history and log, no record)."""
    return any((root / "runs").glob("*/*/*/seed*/record.json"))


def test_the_published_suites_are_found_and_each_names_its_own_folder():
    """Every suite file with a `published:` key is held by the tests below (a new one joins them
    by that key alone); cpu, quick and sensitivity are among them."""
    import yaml

    assert {"cpu", "quick", "sensitivity"} <= set(PUBLISHED_SUITES)
    for name in PUBLISHED_SUITES:
        published = yaml.safe_load((CONFIG_DIR / "suites" / f"{name}.yaml").read_text())["published"]
        assert published == f"docs/results/{name}", name


def test_every_publication_folder_is_its_suites_name():
    """Issue 73: docs/results/s4_recipe/ held the `s5_recipe` suite's run. Every publication's
    folder is named after the suite that made it (its `published:` key), but `gpu`: runs of no
    suite, made by `hkt train` directly."""
    folders = {p.name for p in DOCS.iterdir() if p.is_dir()} - {"gpu"}
    assert folders <= set(PUBLISHED_SUITES), sorted(folders - set(PUBLISHED_SUITES))


def check_publication(root: Path, work: Path) -> None:
    """What holds of publication ``root`` (docs/results/NAME, or a copy of one): its files are the
    ones published (its SHA256SUMS, and each record agrees with its history), and every table
    regenerates from them byte for byte (``work``: a scratch directory)."""
    out = _publish_script().regenerate(root, work)  # refuses a publication changed since
    published = sorted(f.name for f in (root / "tables").iterdir()
                       if not f.name.startswith("mlflow_check."))  # the MLflow store is not published
    assert published and set(published) <= {f.name for f in (out / "tables").iterdir()}
    differ = [name for name in published
              if (out / "tables" / name).read_bytes() != (root / "tables" / name).read_bytes()]
    assert not differ, f"{root}/tables: {differ} do not regenerate from its records"


@pytest.mark.parametrize("suite", [*PUBLISHED_SUITES, "gpu"])  # gpu: runs of no suite
def test_every_published_table_regenerates_byte_for_byte(suite, tmp_path):
    root = DOCS / suite
    if not _has_records(root):
        pytest.skip(f"docs/results/{suite}/ holds no published records")
    check_publication(root, tmp_path)


def test_every_publication_is_sealed():
    """Every publication holds the SHA-256 of what its runs wrote, and holds those files."""
    publish = _publish_script()
    roots = sorted(p for p in DOCS.iterdir() if p.is_dir())
    assert {"cpu", "gpu", "quick"} <= {p.name for p in roots}
    for root in roots:
        publish.verify(root)


def test_a_tampered_publication_is_refused_naming_the_file(tmp_path):
    """Issue 61: one published record's test_accuracy edited, and `--retable` rewrote the tables
    around the edit (and the drift test then passed). The same checks on a copy now refuse it,
    in one line naming the record, and leave its tables as they were."""
    import json
    import shutil

    publish = _publish_script()
    root = tmp_path / "quick"
    shutil.copytree(DOCS / "quick", root)
    check_publication(root, tmp_path / "w0")  # the copy as published passes
    record = root / "runs" / "listops" / "hkt" / "main" / "seed0" / "record.json"
    rec = json.loads(record.read_text())
    tables = {f.name: f.read_bytes() for f in (root / "tables").iterdir()}
    record.write_text(json.dumps({**rec, "test_accuracy": 0.9}, indent=2) + "\n")
    with pytest.raises(SystemExit, match=rf"{record} is not the file published \(its SHA-256 "
                                         r"differs from .*SHA256SUMS's\): edited since"):
        check_publication(root, tmp_path / "w1")
    with pytest.raises(SystemExit) as exc:
        publish.main(["--retable", str(root)])
    assert str(record) in str(exc.value) and "\n" not in str(exc.value)
    assert {f.name: f.read_bytes() for f in (root / "tables").iterdir()} == tables
    # the manifest rewritten to match: the record still disagrees with its run's history
    record.write_text(json.dumps({**rec, "val_accuracy": 0.9}, indent=2) + "\n")
    publish.write_manifest(root)
    with pytest.raises(SystemExit, match=rf"{record} disagrees with its run's history.csv \(its "
                                         r"best validation accuracy .* is not the record's 0.9\)"):
        check_publication(root, tmp_path / "w2")
    # a record added (a copy under another seed) or a file removed: named too
    record.write_text(json.dumps(rec, indent=2) + "\n")
    publish.write_manifest(root)
    extra = root / "runs" / "listops" / "hkt" / "main" / "seed9"
    shutil.copytree(record.parent, extra)
    with pytest.raises(SystemExit, match=r"seed9/\S+ is not in .*SHA256SUMS: a file added since"):
        publish.verify(root)
    shutil.rmtree(extra)
    (root / "runs" / "listops" / "mha" / "main" / "seed1" / "history.csv").unlink()
    with pytest.raises(SystemExit, match=r"mha/main/seed1/history.csv is in .*SHA256SUMS but missing"):
        publish.verify(root)


@pytest.mark.parametrize("suite", [*PUBLISHED_SUITES, "gpu"])
def test_published_predictions_are_their_records_and_give_their_accuracies(suite):
    """A published run's predictions.parquet (issue 58) is the file its record names and gives
    its record's accuracies exactly; a run published before predictions were kept has none."""
    from hkt.predictions import read_checked
    from hkt.run_record import load_record

    root = DOCS / suite
    if not _has_records(root):
        pytest.skip(f"docs/results/{suite}/ holds no published records")
    _publish_script().check_predictions(root)  # each named by its record, SHA-256 and all
    for path in sorted((root / "runs").glob("**/record.json")):
        record = load_record(path)
        if record.get("predictions"):  # as every reader takes them: SHA-256, rows, accuracies
            assert read_checked(path.parent, record) is not None
        else:
            assert not (path.parent / "predictions.parquet").exists(), path.parent


# ------------------------------------------------------------------------- no drift (issue 37)
# docs/results/NAME/ is the published run of config/suites/NAME.yaml. A suite edited after its
# run was published fails here until it is republished or given another name.


def _suite(name: str):
    """Suite ``name`` as its command resolves it (hkt.workflow.suites): for ``cpu``, the README's
    main command on a machine without CUDA (``suite: auto``); else by its name."""
    from hkt.workflow.suites import load_suite

    if name == "cpu":
        suite = load_suite("auto", config_dir=CONFIG_DIR, cuda=lambda: False, env={})
        assert suite.name == "cpu"
        return suite
    return load_suite(name, config_dir=CONFIG_DIR)


def _published_training_runs(root: Path) -> dict:
    """Job -> record of every training run published under ``root/runs`` (baselines aside)."""
    from hkt.run_record import load_record
    from hkt.workflow.grid import Job

    runs = {}
    for path in sorted((root / "runs").glob("*/*/*/seed*/record.json")):
        record = load_record(path)
        if record.get("external"):
            continue
        task, model, variant, seed = path.parent.relative_to(root / "runs").parts
        runs[Job(task, model, variant, int(seed.removeprefix("seed")))] = record
    return runs


@pytest.mark.parametrize("suite", PUBLISHED_SUITES)
def test_the_suite_composes_exactly_its_published_training_runs(suite):
    from hkt.workflow.job_configs import config_digest, train_config_digest

    made = _suite(suite)
    root = ROOT / made.config["published"]
    assert root == DOCS / suite, "a suite's publication is docs/results/<its name>"
    if not (root / "runs").is_dir():
        pytest.skip(f"docs/results/{suite}/ holds no published records")
    grid = made.grid
    published = _published_training_runs(root)
    jobs = grid.train_jobs()
    changed = [job for job in jobs if job in published and
               train_config_digest(grid.train_overrides(job)) != config_digest(published[job]["config"])]
    assert not changed, (f"config/suites/{suite}.yaml now composes other configs than the published "
                         f"runs of {changed}: republish docs/results/{suite}/ or name the suite anew")
    pending = set(_publish_script().pending_runs(root))
    beyond = sorted(job.run_dir() for job in set(jobs) - set(published))
    missing = sorted(map(str, set(published) - set(jobs)))
    assert set(beyond) == pending and not missing, (
        f"config/suites/{suite}.yaml trains {sorted(set(beyond) - pending)} beyond "
        f"docs/results/{suite}/ and its pending.json, and not {missing}: run and publish the new "
        "jobs (scripts/publish_results.py --add), or give the changed suite another name"
        + (f"; pending.json lists runs the suite does not train or that are published: "
           f"{sorted(pending - set(beyond))}" if pending - set(beyond) else ""))
    if suite == "cpu":
        assert len(jobs) == 3 * 4 * 3  # tasks x (mha, hkt, conv, s4d) x seeds


# ------------------------------------------------------- no machine's path (issue 73)
#: An absolute file path of two parts or more (``/work/main/.venv/bin/snakemake``); not a URL's
#: (``https://…``), a relative path's (``../cpu/``, ``tables/x.md``) nor a ratio's (``ms/step``).
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.-]+/)+[\w.-]+")
#: The text a publication writes for its readers: its prose, summary, tables (runs.csv aside:
#: one row per record, as the record holds it), benchmark reports and pending runs. What its
#: runs and data preparation wrote (records, configs, logs, data cards, made_with/) is sealed
#: evidence of the machine that made it (SHA256SUMS), kept as written.
PUBLISHED_TEXT = ("README.md", "summary.md", "pending.json", "tables/*.md", "tables/*.tex",
                  "tables/*.csv", "bench/*.md")


def absolute_paths(root: Path) -> list[str]:
    """``FILE:LINE: PATH`` for each absolute path in publication ``root``'s text
    (:data:`PUBLISHED_TEXT`)."""
    found = []
    for pattern in PUBLISHED_TEXT:
        for f in sorted(root.glob(pattern)):
            if f.name == "runs.csv":
                continue
            for n, line in enumerate(f.read_text("utf-8").splitlines(), 1):
                found += [f"{f.relative_to(root)}:{n}: {m.group()}" for m in ABSOLUTE_PATH.finditer(line)]
    return found


@pytest.mark.parametrize("root", sorted(p for p in DOCS.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_a_publication_names_paths_relative_to_the_repository(root):
    """docs/results/lra_listops/summary.md gave its report command with the venv it ran in,
    `/work/main/.venv/bin/snakemake`: a publication names no path of the machine that made it."""
    assert absolute_paths(root) == []


def test_an_absolute_path_in_a_publication_is_found(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "summary.md").write_text("- Report: `/work/main/.venv/bin/snakemake --report "
                                         "results/report.html`, see ../cpu/README.md, "
                                         "https://example.org/a/b, 12 ms/step\n")
    (tmp_path / "tables" / "runs.csv").write_text("results_dir\n/work/q/results\n")
    (tmp_path / "tables" / "main.tex").write_text("x\ny in /tmp/hktres/runs\n")
    assert absolute_paths(tmp_path) == ["summary.md:1: /work/main/.venv/bin/snakemake",
                                        "tables/main.tex:2: /tmp/hktres/runs"]
