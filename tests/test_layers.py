"""The import layering of docs/contracts.md "Layers": dependencies point one way, and no private
name crosses a module boundary. Read from the source, so it needs no imports of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HKT = Path(__file__).resolve().parent.parent / "hkt"

#: What a package must not import (its consumers, or their internals).
FORBIDDEN = {
    "analysis": ("hkt.report", "hkt.bench", "hkt.cli"),
    "report": ("hkt.train", "hkt.analysis", "hkt.baselines", "hkt.bench", "hkt.models", "hkt.cli"),
    "train": ("hkt.report", "hkt.analysis", "hkt.baselines", "hkt.bench", "hkt.cli"),
    "figures": ("hkt.report", "hkt.analysis", "hkt.train", "hkt.bench", "hkt.cli"),
    "run_record": ("hkt.report", "hkt.analysis", "hkt.train", "hkt.runs_frame", "hkt.figures"),
    "runs_frame": ("hkt.report", "hkt.analysis", "hkt.train", "hkt.figures"),
}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``import``/``from … import`` of hkt modules in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hkt"):
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("hkt")]
    return out


def _package(path: Path) -> str:
    rel = path.relative_to(HKT).with_suffix("")
    return rel.parts[0]


SOURCES = sorted(HKT.rglob("*.py"))


def test_each_rule_names_a_package_or_module_that_exists():
    """A rule keyed by a name no file has checks nothing (``record`` and ``runs`` did, after
    hkt.record and hkt.runs became hkt.run_record and hkt.runs_frame)."""
    names = {_package(path) for path in SOURCES}
    assert set(FORBIDDEN) <= names, f"FORBIDDEN keys naming nothing: {sorted(set(FORBIDDEN) - names)}"
    banned = {b for bs in FORBIDDEN.values() for b in bs}
    assert all(b.removeprefix("hkt.") in names for b in banned), sorted(
        b for b in banned if b.removeprefix("hkt.") not in names)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HKT)))
def test_dependencies_point_one_way(path):
    banned = FORBIDDEN.get(_package(path), ())
    wrong = [m for m, _ in _imports(path) if any(m == b or m.startswith(b + ".") for b in banned)]
    assert not wrong, f"{path.relative_to(HKT)} imports {wrong} (docs/contracts.md 'Layers')"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HKT)))
def test_no_private_name_crosses_a_module(path):
    private = [f"{m}.{n}" for m, names in _imports(path) for n in names
               if n.startswith("_") and not n.startswith("__")]
    assert not private, f"{path.relative_to(HKT)} imports private {private}: make them public"
