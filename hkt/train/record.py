"""The run record: one JSON file per run (RUN_DIR/record.json), the unit tables are built from.

Schema: ``hkt/schemas/run_record.schema.json`` (docs/contracts.md lists the fields). Any tool
that writes a record passing :func:`validate_record` joins the tables, so external baselines
(another framework, a non-neural model) only need to write this file; their ``mlflow_*``
fields may be null.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from hkt.errors import HKTError

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"

__all__ = ["SCHEMA_VERSION", "RECORD_NAME", "schema", "validate_record", "load_record",
           "write_record", "RecordError"]


class RecordError(HKTError):
    """A run record that does not match the schema."""


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON schema of run records (package data ``hkt/schemas/run_record.schema.json``)."""
    text = resources.files("hkt").joinpath("schemas/run_record.schema.json").read_text("utf-8")
    return json.loads(text)


def validate_record(record: dict[str, Any]) -> dict[str, Any]:
    """Check ``record`` against the schema; raise :class:`RecordError` naming the field."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(
        schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for e in errors[:5]:
            where = ".".join(str(p) for p in e.absolute_path) or "(record)"
            lines.append(f"{where}: {e.message}")
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise RecordError("invalid run record: " + "; ".join(lines) + more)
    return record


def load_record(path: str | Path) -> dict[str, Any]:
    """Read and validate a record (a record.json file, or a run directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_NAME
    try:
        record = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise RecordError(f"no run record at {path}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON: {exc}") from None
    try:
        return validate_record(record)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None


def write_record(record: dict[str, Any], path: str | Path) -> Path:
    """Validate and write ``record`` atomically (tmp file in the same directory, fsync, rename)."""
    from hkt.fileio import atomic_write_text

    validate_record(record)
    path = Path(path)
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=False) + "\n")
    return path
