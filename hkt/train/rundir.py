"""The run directory: one process at a time, and a run only continues with its own config and
data (docs/contracts.md "Runs"). Also where the MLflow run id of a run is kept between sessions
(``mlflow_run.json``), so that a resumed run logs to the same MLflow run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from omegaconf import DictConfig, OmegaConf

from hkt.config_compose import flatten
from hkt.errors import RunMismatch, TrainingError
from hkt.fileio import atomic_write_text, remove_orphaned_temps
from hkt.publication import MANIFEST, sealed_publication
from hkt.train.run_config import strip_for_compare
from hkt.train.data import RunData

LOCK_NAME = ".lock"
CONFIG_NAME = "config.yaml"
MLFLOW_INFO_NAME = "mlflow_run.json"

__all__ = ["exclusive", "empty_run_dir", "check_same_config", "check_same_data", "claim",
           "write_mlflow_info"]


@contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """One process per run directory (an OS lock: released even by kill -9). A run directory
    inside a sealed publication is refused before anything is made there: its lock file would
    be a file its seal does not list."""
    sealed = sealed_publication(run_dir)
    if sealed is not None:
        raise TrainingError(f"{run_dir} is inside the sealed publication {sealed} (it has its "
                            f"{MANIFEST}): a published run is not trained or changed in place; "
                            "copy it into a results directory and give that as --out")
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(run_dir / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise TrainingError(f"another process is already training in {run_dir}") from None
    try:
        for d in (run_dir, run_dir / "checkpoints"):  # what a killed predecessor left half-written
            remove_orphaned_temps(d)
        yield
    except BaseException:
        # a run that failed before writing anything (a bad device, a batch larger than the data)
        # leaves no directory holding only its lock
        if not any(p.name != LOCK_NAME for p in run_dir.iterdir()):
            (run_dir / LOCK_NAME).unlink(missing_ok=True)
            if created:
                run_dir.rmdir()
        raise
    finally:
        lock.release()


def empty_run_dir(run_dir: Path) -> None:
    """Remove everything in a run directory but its lock (held by this process)."""
    for p in run_dir.iterdir():
        if p.name == LOCK_NAME:
            continue
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The dotted keys whose values differ between two configs."""
    fa, fb = flatten(a), flatten(b)
    return sorted(k for k in set(fa) | set(fb) if fa.get(k, "<absent>") != fb.get(k, "<absent>"))


def check_same_config(saved: dict[str, Any], cfg: DictConfig, where: Path) -> None:
    """Refuse (:class:`RunMismatch`) to continue a run saved in ``where`` under another config."""
    diff = config_diff(strip_for_compare(saved), strip_for_compare(cfg))
    if diff:
        shown = ", ".join(diff[:6]) + (" …" if len(diff) > 6 else "")
        raise RunMismatch(f"{where} belongs to a run with a different config (differs in: "
                          f"{shown}); use another --out, delete {where.parent if where.is_file() else where} "
                          "or pass --restart-if-changed to start over")


def check_same_data(saved: dict[str, Any], data: RunData, where: Path) -> None:
    """Refuse (:class:`RunMismatch`) to continue a run saved in ``where`` (its checkpoint or
    record: ``saved``) on other data. Their content is compared (``data_content_checksums``:
    files of the same data written by another release of hkt differ in their bytes only); a run
    saved before content checksums were kept is compared by its files' SHA-256."""
    content, files = saved.get("data_content_checksums"), saved.get("data_checksums")
    if content:
        same, what = content == data.content_checksums, "content sha256"
    else:
        same, what = not files or files == data.checksums, "file sha256"
    if not same:
        raise RunMismatch(f"the data in {data.dir} differ from the data of the run in {where} "
                          f"({what} mismatch); use the same data, another --out, or pass "
                          "--restart-if-changed to start over")


def claim(run_dir: Path, cfg: DictConfig) -> str | None:
    """Make ``run_dir`` the home of a new run of ``cfg`` (no checkpoint yet): refuse a directory
    holding something else, or an earlier start under another config; write ``config.yaml``.
    Returns the MLflow run id an earlier start left, to log to the same run."""
    if any(p.name != LOCK_NAME for p in run_dir.iterdir()) and not (
            run_dir / CONFIG_NAME).exists() and not (run_dir / MLFLOW_INFO_NAME).exists():
        raise TrainingError(f"{run_dir} is not empty and holds no run; "
                            "choose an empty or new --out directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    saved = run_dir / CONFIG_NAME
    if saved.exists():
        check_same_config(OmegaConf.to_container(OmegaConf.load(saved)), cfg, saved)
    atomic_write_text(saved, OmegaConf.to_yaml(cfg))
    info = run_dir / MLFLOW_INFO_NAME
    return json.loads(info.read_text()).get("run_id") if info.exists() else None


def write_mlflow_info(run_dir: Path, run_id: str | None, uri: str | None,
                      experiment: str | None) -> None:
    """Keep the run's MLflow run id (and store) for the next session and for humans."""
    atomic_write_text(run_dir / MLFLOW_INFO_NAME, json.dumps(
        {"run_id": run_id, "tracking_uri": uri, "experiment": experiment}, indent=2) + "\n")
