"""The workflow config's check against its JSON schema (``workflow/schemas/config.schema.yaml``),
with one message naming the first bad key. Imported by :mod:`hkt.workflow.grid` (which
re-exports it) and ``workflow/rules/common.smk``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hkt.workflow.errors import GridError

__all__ = ["check_config"]


def check_config(config: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
    """Validate the workflow config against its JSON schema; raise :class:`GridError` naming the
    first bad key, and for an unknown key the keys allowed there (not the whole schema)."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(dict(config)),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    err = errors[0]
    where = ".".join(map(str, err.absolute_path))
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(err.schema.get("properties") or {})
        unknown = sorted(k for k in err.instance if k not in allowed)
        keys = ", ".join(f"{where}.{k}" if where else k for k in unknown)
        raise GridError(f"unknown key {keys} (allowed{' under ' + where if where else ''}: "
                        f"{', '.join(allowed)})")
    raise GridError(f"key {where or '(top level)'}: {err.message}")
