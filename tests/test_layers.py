"""The packages that never read each other, though their layers would allow it (docs/design.md
§6, read by tests/layer_table.py), and no private name crosses a module boundary. Read from the
source, so it needs no imports of its own; tests/test_structure.py checks the layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from layer_table import DESIGN, read_never

HKT = Path(__file__).resolve().parent.parent / "hkt"

#: Package or root module -> what it must not import (its consumers, or their internals).
NEVER = read_never()


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``import``/``from … import`` of hkt modules in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hkt"):
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("hkt")]
    return out


def _package(path: Path, root: Path = HKT) -> str:
    """``hkt.report`` for hkt/report/claims.py, ``hkt.run_record`` for hkt/run_record.py."""
    return "hkt." + path.relative_to(root).with_suffix("").parts[0]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _wrong(path: Path, never: dict[str, tuple[str, ...]], root: Path = HKT) -> list[str]:
    """The imports of ``path`` that ``never`` forbids its package."""
    banned = never.get(_package(path, root), ())
    return [m for m, _ in _imports(path) if any(_within(m, b) for b in banned)]


SOURCES = sorted(HKT.rglob("*.py"))


def test_each_rule_names_a_package_or_module_that_exists():
    """A rule keyed by a name no file has checks nothing (``record`` and ``runs`` did, after
    hkt.record and hkt.runs became hkt.run_record and hkt.runs_frame)."""
    names = {_package(path) for path in SOURCES}
    named = set(NEVER) | {b for bs in NEVER.values() for b in bs}
    assert NEVER and named <= names, f"docs/design.md §6 names no such package: {sorted(named - names)}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HKT)))
def test_dependencies_point_one_way(path):
    wrong = _wrong(path, NEVER)
    assert not wrong, f"{path.relative_to(HKT)} imports {wrong} (docs/design.md §6, 'never imports')"


def test_a_forbidden_import_is_caught_by_the_design_pages_rule(tmp_path: Path) -> None:
    """A report module that imports the training code, inside a function, breaks the rule as
    docs/design.md states it; with ``hkt.train`` taken out of that row, it breaks none."""
    root = tmp_path / "hkt"
    claims = root / "report" / "claims.py"
    claims.parent.mkdir(parents=True)
    claims.write_text("def f():\n    from hkt.train.loop import train\n")
    assert _wrong(claims, NEVER, root) == ["hkt.train.loop"]
    text = DESIGN.read_text("utf-8")
    row = "| `hkt.report` | `hkt.train`, "
    assert row in text
    assert _wrong(claims, read_never(text.replace(row, "| `hkt.report` | ")), root) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HKT)))
def test_no_private_name_crosses_a_module(path):
    private = [f"{m}.{n}" for m, names in _imports(path) for n in names
               if n.startswith("_") and not n.startswith("__")]
    assert not private, f"{path.relative_to(HKT)} imports private {private}: make them public"
