"""The package's shape: no import circle among ``hkt`` modules (function-level imports count),
and layer 0 imports only layer 0 (docs/contracts.md). A circle held by a function-level import
still ties two modules together. There is no line cap: a module holds one concept, however long
(a cap split modules by size, not by idea).

Nor many small modules: at most :data:`MOST_SMALL` modules have fewer than :data:`SMALL_LINES`
lines, since a crowd of small files is usually one idea split in pieces. Counted: every
``hkt/**/*.py`` except (1) a package's ``__init__.py``, which holds its package's docstring and
re-exports, not a concept of its own, and (2) a plugin file, a module that registers a plugin at
its top level (``@register("NAME")`` on a function or class): a registry's convention is one file
per plugin (a baseline is one file, as in benchopt), so its size is the plugin's own, and
merging plugins would undo "a file in the right place is the whole registration"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "hkt"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The hkt modules that ``name`` imports anywhere in its file (a package's ``__init__`` for
    ``from pkg import name`` unless ``name`` is a submodule)."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {known(a.name) for a in node.names if a.name.split(".")[0] == "hkt"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "hkt":
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in mods else known(module))
    found.discard(None)
    found.discard(name)
    return found  # type: ignore[return-value]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle() -> None:
    mods = _modules()
    graph = {name: _imports(name, path, mods) for name, path in mods.items()}
    assert _circles(graph) == []


# docs/contracts.md's layers, by module prefix (the longest prefix wins): a module imports only
# modules of its own layer or below. hkt.dropout and hkt.workflow.gpuslots are shared pieces
# (a torch layer; a GPU-slot claim that training makes) and sit in layer 0.
LAYERS = {
    0: ("hkt", "hkt.errors", "hkt.signals", "hkt.mlflow_store", "hkt.fileio", "hkt.config",
        "hkt.logs", "hkt.registry", "hkt.value_checks", "hkt.device", "hkt.provenance", "hkt.paper",
        "hkt.environment", "hkt.data.layout", "hkt.dropout", "hkt.workflow.gpuslots"),
    1: ("hkt.run_record", "hkt.predictions", "hkt.runs_frame", "hkt.references", "hkt.figures"),
    2: ("hkt.mixers", "hkt.models", "hkt.data"),
    3: ("hkt.train",),
    4: ("hkt.step_timing", "hkt.analysis", "hkt.baselines", "hkt.report", "hkt.data.examples"),
    5: ("hkt.bench", "hkt.doctor", "hkt.estimate", "hkt.plan", "hkt.status", "hkt.stop",
        "hkt.workflow", "hkt.cli", "hkt.data.cli"),
}
#: Consumers that must not read each other: the report reads files and MLflow only.
NEVER = {"hkt.report": ("hkt.train", "hkt.analysis"), "hkt.analysis": ("hkt.report",)}
LAYER0 = set(LAYERS[0]) - {"hkt"}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(name: str) -> int | None:
    """The layer of module ``name`` by its longest listed prefix; None for an unlisted module."""
    if name == "hkt":
        return 0
    best = max(((len(p), layer) for layer, prefixes in LAYERS.items() for p in prefixes
                if p != "hkt" and _within(name, p)), default=None)
    return None if best is None else best[1]


def test_every_module_has_a_layer() -> None:
    unlisted = sorted(n for n in _modules() if _layer(n) is None)
    assert not unlisted, f"modules in no layer (add them to docs/contracts.md and LAYERS): {unlisted}"


def test_imports_point_down_the_layers() -> None:
    mods = _modules()
    upward = [f"{name} (layer {_layer(name)}) imports {target} (layer {_layer(target)})"
              for name, path in sorted(mods.items()) for target in sorted(_imports(name, path, mods))
              if (_layer(target) or 0) > (_layer(name) or 0)]
    forbidden = [f"{name} imports {target}" for name, path in sorted(mods.items())
                 for target in sorted(_imports(name, path, mods))
                 for src, banned in NEVER.items() if _within(name, src)
                 and any(_within(target, b) for b in banned)]
    assert not upward and not forbidden, upward + forbidden


def test_the_layer_check_sees_an_upward_import() -> None:
    assert _layer("hkt.train.loop") == 3 and _layer("hkt.workflow.grid") == 5
    assert _layer("hkt.workflow.gpuslots") == 0 and _layer("hkt.data.layout") == 0
    assert _layer("hkt.data.load") == 2 and _layer("hkt.nothing") is None


@pytest.mark.parametrize("name", sorted(LAYER0))
def test_layer0_imports_only_layer0(name: str) -> None:
    mods = _modules()
    above = _imports(name, mods[name], mods) - LAYER0 - {"hkt", "hkt.data", "hkt.workflow"}
    assert not above, f"{name} (layer 0) imports {sorted(above)}"


SMALL_LINES = 40
MOST_SMALL = 8


def _is_plugin(path: Path) -> bool:
    """Whether the module registers a plugin at its top level: a function or class decorated
    with ``register(…)`` or ``X.register(…)``."""
    def registers(decorator: ast.expr) -> bool:
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        return (isinstance(func, ast.Name) and func.id == "register") or (
            isinstance(func, ast.Attribute) and func.attr == "register")

    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef))
               and any(registers(d) for d in node.decorator_list)
               for node in ast.parse(path.read_text(), str(path)).body)


def _small_modules() -> dict[str, int]:
    """Module -> line count, for the counted modules under :data:`SMALL_LINES` lines."""
    counts = {name: len(path.read_text().splitlines()) for name, path in _modules().items()
              if path.name != "__init__.py" and not _is_plugin(path)}
    return {name: n for name, n in sorted(counts.items()) if n < SMALL_LINES}


def test_the_small_module_count_sees_what_it_counts() -> None:
    mods = _modules()
    assert _is_plugin(mods["hkt.baselines.majority"]) and _is_plugin(mods["hkt.mixers.mha"])
    assert not _is_plugin(mods["hkt.data.layout"]) and not _is_plugin(mods["hkt.mixers.base"])
    assert "hkt.data.layout" in _small_modules()


def test_few_small_modules() -> None:
    small = _small_modules()
    assert len(small) <= MOST_SMALL, (
        f"{len(small)} modules have fewer than {SMALL_LINES} lines (at most {MOST_SMALL}): "
        f"{small}; merge the ones that hold one idea with the module of that idea")
