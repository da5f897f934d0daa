"""Shared pytest fixtures. Each section belongs to the part of the library named in its title."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

# The README's test command runs the files on every core (pytest-xdist, `-n auto --dist
# loadfile` in pyproject.toml): one file per worker at a time, its module fixtures made once.
# Workers take the files in collection order, so the ones that take minutes (a Slurm cluster, the
# end-to-end workflow, the dry runs, training killed and resumed) start first and the short ones
# fill in around them. Only the order changes, never what runs.
LONG_FIRST = ("test_slurm_e2e.py", "test_workflow_e2e.py", "test_workflow.py",
              "test_faults_signals.py", "test_doctor.py", "test_train_run.py",
              "test_faults_workflow.py", "test_stop.py", "test_tile.py", "test_train_tracking.py",
              "test_plan.py", "test_faults_gpu_memory.py", "test_faults_tracking.py",
              "test_faults_disk.py")


def pytest_collection_modifyitems(config, items):
    """Collects the long files of LONG_FIRST first (see there)."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# =============================================================================================
# training (hkt/train): tiny prepared-data directories and an isolated results/ + MLflow store
# =============================================================================================

TRAIN_FIXTURE_TASKS = {
    # task: (vocab_size, num_classes, max_length) as the real task configs / `hkt prepare` say
    "listops": (16, 10, 512),
    "imdb": (257, 2, 1024),
    "cifar10": (256, 10, 1024),
}


def write_prepared_data(out: Path, task: str, *, n_train: int = 64, n_eval: int = 32,
                        min_len: int = 8, max_len: int = 48, seed: int = 0) -> Path:
    """A tiny prepared-data directory in the contract's layout (docs/contracts.md).

    Labels are a simple function of the tokens (learnable), lengths vary (padding is exercised).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    vocab_size, num_classes, max_length = TRAIN_FIXTURE_TASKS[task]
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = ["<pad>"] + [f"t{i}" for i in range(1, vocab_size)]
    for split, n in (("train", n_train), ("val", n_eval), ("test", n_eval)):
        lengths = rng.integers(min_len, max_len + 1, size=n)
        low = 0 if task == "cifar10" else 1
        tokens = [rng.integers(low, vocab_size, size=int(L)).astype(np.uint16) for L in lengths]
        labels = np.array([int(t[0]) % num_classes for t in tokens], dtype=np.int64)
        table = pa.table({
            "id": pa.array([f"{split}-{i:05d}" for i in range(n)], pa.string()),
            "tokens": pa.array(tokens, pa.list_(pa.uint16())),
            "label": pa.array(labels, pa.int64()),
            "length": pa.array(lengths.astype(np.int32), pa.int32()),
        })
        meta = {"task": task, "split": split, "vocab": vocab, "vocab_size": vocab_size,
                "num_classes": num_classes, "max_length": max_length,
                "source": {"generator": "tests/conftest.py write_prepared_data", "seed": seed},
                "code_version": "test"}
        table = table.replace_schema_metadata({"hkt": json.dumps(meta)})
        pq.write_table(table, out / f"{split}.parquet", compression="zstd")
    seal_prepared_data(out)
    return out


def seal_prepared_data(out: Path) -> None:
    """Write the manifest that `hkt prepare` writes last (after a test edits a split on purpose)."""
    from hkt.data_layout import SPLITS, split_file
    from hkt.data.parquet import write_manifest
    from hkt.fileio import sha256_file

    write_manifest(out, {s: sha256_file(out / split_file(s)) for s in SPLITS})


@pytest.fixture
def prepared_data(tmp_path_factory):
    """prepared_data(task) -> directory with tiny {train,val,test}.parquet for that task."""
    cache: dict[str, Path] = {}

    def make(task: str = "listops", **kwargs) -> Path:
        key = f"{task}-{sorted(kwargs.items())}"
        if key not in cache:
            cache[key] = write_prepared_data(tmp_path_factory.mktemp(f"data-{task}"), task, **kwargs)
        return cache[key]

    return make


@pytest.fixture
def isolated_results(tmp_path, monkeypatch):
    """A private results/ dir and MLflow SQLite store: tests never touch the repo's results/."""
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setenv("HKT_RESULTS_DIR", str(results))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("HKT_SUITE", raising=False)  # a run of no suite, whatever the shell says
    return results


def check_predictions(run_dir: Path, data: Path) -> "object":
    """A run's ``predictions.parquet`` (hkt/predictions.py) keeps its contract: the file its
    record names (SHA-256), the schema's columns and order, each split's rows distinct rows of
    the split's file with that row's label, probabilities that sum to 1, and the accuracy of each
    split exactly the record's. Returns the table, as polars reads it."""
    import numpy as np
    import polars as pl
    import pyarrow.parquet as pq

    from hkt.fileio import sha256_file
    from hkt.run_record import load_record

    record = load_record(run_dir)
    assert record["predictions"] == {"file": "predictions.parquet",
                                     "sha256": sha256_file(run_dir / "predictions.parquet")}
    df = pl.read_parquet(run_dir / "predictions.parquet")
    classes = record["config"]["task"]["num_classes"]
    assert df.columns == ["split", "row", "label", "pred", *(f"p{c}" for c in range(classes))]
    assert df.schema["row"] == pl.Int64 and df.schema["p0"] == pl.Float16
    assert df.equals(df.sort("split", "row")) and set(df["split"]) == {"val", "test"}
    for split, field in (("val", "val_accuracy"), ("test", "test_accuracy")):
        part = df.filter(pl.col("split") == split)
        rows = part["row"].to_numpy()
        assert len(set(rows)) == len(rows)
        labels = pq.read_table(data / f"{split}.parquet", columns=["label"]).column("label")
        assert np.array_equal(labels.to_numpy()[rows], part["label"].to_numpy())
        probs = part.select(f"p{c}" for c in range(classes)).to_numpy().astype(np.float64)
        assert np.allclose(probs.sum(axis=1), 1, atol=1e-2)
        assert (part["pred"] == part["label"]).sum() / part.height == record[field]  # exactly
    assert df.filter(pl.col("split") == "test").height == record["test_examples"]
    return df


# =============================================================================================
# MLflow tracking servers (hkt/train/tracking.py, the Slurm tests): real ones, on 127.0.0.1
# =============================================================================================

def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` loaded as a module, fresh, and registered in ``sys.modules`` as
    ``hkt_script_NAME`` (a dataclass in it looks its module up there)."""
    spec = importlib.util.spec_from_file_location(f"hkt_script_{name}",
                                                  Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_server(root: Path, port: int | None = None, *, args: list[str] | None = None,
                  env: dict[str, str] | None = None,
                  cwd: Path | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """A running `mlflow server` on 127.0.0.1 (SQLite store and artifacts under ``root``, which a
    second server on the same ``root`` and port continues), and its process; stopped by PID
    (its process group) at the end, unless stopped already (:func:`stop_server`). ``args``:
    the server's own arguments instead (after ``mlflow``; 127.0.0.1 and ``port`` among them),
    ``env``: variables added to its environment, ``cwd``: where it runs."""
    port = port or free_port()
    mlflow = Path(sys.executable).parent / "mlflow"
    root.mkdir(parents=True, exist_ok=True)
    if args is None:
        args = ["server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                "--artifacts-destination", str(root / "artifacts")]
    with open(root / "server.log", "a") as log:
        proc = subprocess.Popen([str(mlflow), *args], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=cwd,
                                env=None if env is None else {**os.environ, **env})
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (root / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "mlflow server: no /health in 120 s"
            time.sleep(0.5)
        yield uri, proc
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server of :func:`mlflow_server` and its workers (SIGTERM, then SIGKILL)."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
