"""The package's shape: no import circle among ``hkt`` modules nor among its packages
(function-level imports count), and every import points down the layers, which are the folders'
(docs/design.md §6's table, read by tests/layer_table.py): a package has one layer, the root modules of ``hkt/`` are layer 0 and hold no command. A circle held by a function-level import
still ties two modules together.

Every module of ``hkt/`` fits :data:`MOST_MODULE_LINES` lines and every function or method
:data:`MOST_FUNCTION_LINES`, none exempt: the Triton kernels (``hkt/mixers/kernels/tile.py`` and
``tile_parts.py``) are modules like another and each kernel a function. A module over them is
split by concept, not by line count.

Nor many small modules: at most :data:`MOST_SMALL` modules have fewer than :data:`SMALL_LINES`
lines, since a crowd of small files is usually one idea split in pieces. Counted: every
``hkt/**/*.py`` except (1) a package's ``__init__.py``, which holds its package's docstring and
re-exports, not a concept of its own, and (2) a plugin file, a module that registers a plugin at
its top level (``@register("NAME")`` on a function or class): a registry's convention is one file
per plugin (a baseline is one file, as in benchopt), so its size is the plugin's own, and
merging plugins would undo "a file in the right place is the whole registration"."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from layer_table import Layers, read_layers

ROOT = Path(__file__).resolve().parents[1] / "hkt"


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file of every module under ``root`` (the ``hkt`` package)."""
    mods = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
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


def _package_circles(mods: dict[str, Path]) -> list[list[str]]:
    """Circles among the packages of hkt/ (its folders, the root modules one more): package A
    imports package B when any module of A imports one of B, at its top or in a function. Two
    packages that import each other have no order, and the drawing of the house an arrow that
    runs back (``hkt.workflow`` imported ``hkt.suite``'s plan in ``start()``, which reads the
    grid)."""
    packages: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = {_folder(t, mods) for t in _imports(name, path, mods)}
        packages.setdefault(_folder(name, mods), set()).update(targets)
    return _circles({p: targets - {p} for p, targets in packages.items()})


def test_no_import_circle_between_packages() -> None:
    circles = _package_circles(_modules())
    assert not circles, f"packages of hkt/ that import each other (one must read the other's " \
        f"functions as arguments, or the shared piece move below both): {circles}"


def test_the_package_check_sees_a_circle_held_by_a_function(tmp_path: Path) -> None:
    """Two packages, each module importing the other's once and no module circle: ``a.one`` at
    its top, ``b.two`` inside a function (the shape ``hkt.workflow.invocation.start`` had)."""
    root = tmp_path / "hkt"
    for package in ("a", "b"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "a" / "one.py").write_text("from hkt.b.three import c\n")
    (root / "b" / "two.py").write_text("def f():\n    from hkt.a.one import g\n")
    (root / "b" / "three.py").write_text("c = 1\n")
    mods = _modules(root)
    graph = {name: _imports(name, path, mods) for name, path in mods.items()}
    assert _circles(graph) == [] and _package_circles(mods) == [["hkt.a", "hkt.b"]]
    (root / "b" / "two.py").write_text("def f():\n    pass\n")
    assert _package_circles(_modules(root)) == []


# docs/design.md §6's layers, by folder (tests/layer_table.py reads them): every module of a
# package (its subpackages included) has the package's layer, and the root modules of hkt/ are
# layer 0, the shared pieces. A module imports only the layers its row allows, so a module put in
# a folder of the wrong layer shows up as an import that runs up (or, at the root, as an import
# above layer 0).
LAYERS = read_layers()
#: What a command module exposes (docs/contracts.md, "Command line").
COMMAND_FUNCTIONS = {"add_arguments", "run"}


def _folder(name: str, mods: dict[str, Path]) -> str:
    """The top-level package of module ``name`` (``hkt.train`` for ``hkt.train.loop``), or
    ``hkt`` for a root module and the package itself."""
    parts = name.split(".")
    if len(parts) == 1 or (len(parts) == 2 and mods[name].name != "__init__.py"):
        return "hkt"
    return ".".join(parts[:2])


def _layer(name: str, mods: dict[str, Path], layers: Layers = LAYERS) -> int | None:
    """The layer of module ``name``: its folder's (0 at the root); None in a folder of no layer."""
    return layers.layer.get(_folder(name, mods))


def _upward(graph: dict[str, set[str]], layer: Callable[[str], int | None],
            layers: Layers = LAYERS) -> list[str]:
    """Every import in ``graph`` (module -> the modules it imports) to a layer that its own
    layer's row does not allow: one that runs up."""
    return [f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})"
            for name in sorted(graph) for target in sorted(graph[name])
            if (layer(target) or 0) not in layers.may_import[layer(name) or 0]]


def _all_imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def test_every_folder_has_a_layer() -> None:
    mods = _modules()
    folders = {_folder(n, mods) for n in mods}
    assert folders == set(LAYERS.layer), (
        f"packages of hkt/ in no layer (add them to the layer table of docs/design.md §6): "
        f"{sorted(folders - set(LAYERS.layer))}; layers of no package: "
        f"{sorted(set(LAYERS.layer) - folders)}")


def test_imports_point_down_the_layers() -> None:
    mods = _modules()
    upward = _upward(_all_imports(mods), lambda n: _layer(n, mods))
    assert not upward, upward


def test_the_layer_check_sees_a_module_in_the_wrong_folder() -> None:
    """A layer is its folder's: a subpackage's module has its package's layer, and a module
    placed in a folder below what it imports (a layer-4 facts module in hkt/data/, a layer-5
    command at the root) is an import that runs up."""
    mods = _modules()
    assert _layer("hkt.train.loop", mods) == 3 and _layer("hkt.workflow.grid", mods) == 5
    assert _layer("hkt.gpu_slots", mods) == 0 and _layer("hkt.data_layout", mods) == 0
    assert _layer("hkt.data.families.listops", mods) == 2
    assert _layer("hkt.suite.doctor.sdpa", mods) == 5 and _layer("hkt.suite", mods) == 5
    assert _layer("hkt", mods) == 0
    misplaced = {**mods, "hkt.data.facts": mods["hkt.data.load"], "hkt.command": mods["hkt.paper"]}
    graph = {"hkt.data.facts": {"hkt.baselines.run", "hkt.data.parquet"},
             "hkt.command": {"hkt.suite.estimate", "hkt.errors"}, "hkt.train.loop": {"hkt.data.load"}}
    assert _upward(graph, lambda n: _layer(n, misplaced)) == [
        "hkt.command (layer 0) imports hkt.suite.estimate (layer 5)",
        "hkt.data.facts (layer 2) imports hkt.baselines.run (layer 4)"]


def test_the_layers_are_the_design_pages(tmp_path: Path) -> None:
    """The check reads docs/design.md's table: moved to a lower row there, ``hkt/report/``'s
    imports of the data and the facts run up; a row that lets layer 1 import layer 2 lets a
    figure read the data; a 'may import' that says neither is refused, saying how to write it."""
    from layer_table import DESIGN

    text, mods = DESIGN.read_text("utf-8"), _modules()
    graph = _all_imports(mods)
    moved = read_layers(text.replace(", `hkt/report/` |", " |")
                        .replace("| `hkt/figures/` |", "| `hkt/figures/`, `hkt/report/` |"))
    upward = _upward(graph, lambda n: _layer(n, mods, moved), moved)
    assert upward and all(line.startswith("hkt.report.") and " (layer 1) imports " in line
                          for line in upward), upward
    figure = {"hkt.figures.suite": {"hkt.data.load"}}
    assert _upward(figure, lambda n: _layer(n, mods)) == [
        "hkt.figures.suite (layer 1) imports hkt.data.load (layer 2)"]
    looser = read_layers(text.replace("| layers 0–1 |", "| layers 0–2 |"))
    assert _upward(figure, lambda n: _layer(n, mods, looser), looser) == []
    with pytest.raises(AssertionError, match="write 'layer N' or 'layers N–M'"):
        read_layers(text.replace("| layers 0–1 |", "| anything below |"))


def _root_modules(mods: dict[str, Path]) -> list[str]:
    return sorted(n for n in mods if n != "hkt" and _folder(n, mods) == "hkt")


@pytest.mark.parametrize("name", _root_modules(_modules()))
def test_root_modules_import_only_root_modules(name: str) -> None:
    """The root of hkt/ is layer 0: its modules import one another only (and a package's
    ``__init__`` where ``from hkt import x`` names it)."""
    mods = _modules()
    above = {t for t in _imports(name, mods[name], mods) if _layer(t, mods) != 0}
    assert not above, f"{name} (layer 0, at the root of hkt/) imports {sorted(above)}"


def test_the_root_holds_no_command() -> None:
    """A command module (``add_arguments`` and ``run``) sits in the package it belongs to, never at
    the root of hkt/, which holds the shared pieces only."""
    mods = _modules()

    def functions(path: Path) -> set[str]:
        return {node.name for node in ast.parse(path.read_text(), str(path)).body
                if isinstance(node, ast.FunctionDef)}

    commands = [n for n in _root_modules(mods) if COMMAND_FUNCTIONS <= functions(mods[n])]
    assert not commands, f"commands at the root of hkt/: {commands}; move them to their package"
    assert COMMAND_FUNCTIONS <= functions(mods["hkt.suite.status"])  # the check sees a command


def _commands(mods: dict[str, Path]) -> set[str]:
    """The command modules: those that define ``add_arguments`` and ``run`` at their top level."""
    def functions(path: Path) -> set[str]:
        return {node.name for node in ast.parse(path.read_text(), str(path)).body
                if isinstance(node, ast.FunctionDef)}

    return {n for n, path in mods.items() if COMMAND_FUNCTIONS <= functions(path)}


def _command_imports(graph: dict[str, set[str]], commands: set[str]) -> list[str]:
    return sorted(f"{a} imports {b}" for a in commands for b in graph.get(a, set())
                  if b in commands and b != a)


def test_no_command_imports_another_command() -> None:
    """What two commands share sits below them (docs/design.md §6, layer 5): ``hkt stop``
    reads a suite's state from :mod:`hkt.suite.standing`, not from ``hkt status``'s module."""
    mods = _modules()
    commands = _commands(mods)
    assert {"hkt.suite.status", "hkt.suite.stop", "hkt.suite.plan"} <= commands
    graph = {name: _imports(name, mods[name], mods) for name in commands}
    assert not _command_imports(graph, commands), _command_imports(graph, commands)
    # the check sees one: stop reading its settings from status, as it did
    assert _command_imports({"hkt.suite.stop": {"hkt.suite.status", "hkt.errors"}}, commands) == [
        "hkt.suite.stop imports hkt.suite.status"]


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
    assert not _is_plugin(mods["hkt.data_layout"]) and not _is_plugin(mods["hkt.mixers.base"])
    assert "hkt.data_layout" in _small_modules()


def test_few_small_modules() -> None:
    small = _small_modules()
    assert len(small) <= MOST_SMALL, (
        f"{len(small)} modules have fewer than {SMALL_LINES} lines (at most {MOST_SMALL}): "
        f"{small}; merge the ones that hold one idea with the module of that idea")


#: The developers' convention (issue 75): a module holds one concept on a screen or two, a
#: function one step on one screen. Lines as ``wc -l`` counts them; a function's from its ``def``
#: to its last line, docstring and nested functions included, decorators not.
MOST_MODULE_LINES = 500
MOST_FUNCTION_LINES = 80


def _functions(tree: ast.Module) -> list[tuple[str, int, int]]:
    """(qualified name, line of its ``def``, lines) of every function and method in ``tree``,
    nested ones included (``Class.method``, ``outer.inner``)."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _too_long(path: Path, root: Path = ROOT) -> list[str]:
    """What in ``path`` breaks :data:`MOST_MODULE_LINES` or :data:`MOST_FUNCTION_LINES`: the
    file, or the file, line and function, with its line count and what to do."""
    text = path.read_text("utf-8")
    where = path.relative_to(root.parent)
    found = []
    lines = len(text.splitlines())
    if lines > MOST_MODULE_LINES:
        found.append(f"{where} has {lines} lines (at most {MOST_MODULE_LINES}): split it by "
                     "concept into modules of one idea each, and update its importers")
    for name, line, length in _functions(ast.parse(text, str(path))):
        if length > MOST_FUNCTION_LINES:
            found.append(f"{where}:{line}: {name} has {length} lines (at most "
                         f"{MOST_FUNCTION_LINES}): split it into functions of one step each")
    return found


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_functions_fit_on_a_screen(path: Path) -> None:
    too_long = _too_long(path)
    assert not too_long, "\n".join(too_long)


def test_the_length_check_sees_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    """A module of one line too many and a method of one line too many are each named, with the
    count and what to do; at the limits, nothing is."""
    root = tmp_path / "hkt"
    root.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST_FUNCTION_LINES - 2))
    fits = root / "fits.py"
    fits.write_text(f"def f():\n    \"\"\"Doc.\"\"\"\n{body}\n"
                    + "\n" * (MOST_MODULE_LINES - MOST_FUNCTION_LINES))
    assert len(fits.read_text().splitlines()) == MOST_MODULE_LINES
    assert _functions(ast.parse(fits.read_text())) == [("f", 1, MOST_FUNCTION_LINES)]
    assert _too_long(fits, root) == []
    nested = "class C:\n    def g(self):\n        def h():\n            pass\n"
    assert _functions(ast.parse(nested)) == [("C.g", 2, 3), ("C.g.h", 3, 2)]
    long = root / "long.py"
    method_body = "\n".join(f"        x{i} = {i}" for i in range(MOST_FUNCTION_LINES))
    long.write_text(f"class C:\n    def f(self):\n{method_body}\n" + "\n" * MOST_MODULE_LINES)
    method = 1 + MOST_FUNCTION_LINES
    lines = 1 + method + MOST_MODULE_LINES
    assert _too_long(long, root) == [
        f"hkt/long.py has {lines} lines (at most {MOST_MODULE_LINES}): split it by concept into "
        "modules of one idea each, and update its importers",
        f"hkt/long.py:2: C.f has {method} lines (at most {MOST_FUNCTION_LINES}): split it into "
        "functions of one step each"]
