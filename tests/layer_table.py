"""The layering of ``hkt/`` as docs/design.md §6 states it, read from its two tables: each
package's layer and the layers it may import, and the packages that never read each other. The
tables are the layering's one statement; tests/test_structure.py and tests/test_layers.py check
the code against what this reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
LAYER_HEADER = "| layer | folders | what they hold | may import |"
NEVER_HEADER = "| package | never imports | why |"


@dataclass(frozen=True)
class Layers:
    """``layer``: package (``hkt.train``; ``hkt`` for the root modules) -> its layer;
    ``may_import``: layer -> the layers its modules may import."""

    layer: dict[str, int]
    may_import: dict[int, frozenset[int]]


def _rows(text: str, header: str) -> list[list[str]]:
    """The cells of the rows of the table under ``header`` (its separator row skipped)."""
    lines = text.splitlines()
    if header not in lines:
        raise AssertionError(f"docs/design.md has no table headed {header!r}")
    rows = []
    for line in lines[lines.index(header) + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != header.count("|") - 1:
            raise AssertionError(f"docs/design.md: a row of the table {header!r} has "
                                 f"{len(cells)} cells: {line[:80]}")
        rows.append(cells)
    return rows


def _allowed(cell: str) -> frozenset[int]:
    """``layer 0`` or ``layers 0–3`` -> the layers named."""
    found = re.fullmatch(r"layers? (\d+)(?:–(\d+))?", cell)
    if found is None:
        raise AssertionError(f"docs/design.md: 'may import' reads {cell!r}; write 'layer N' or "
                             "'layers N–M'")
    low, high = int(found[1]), int(found[2] or found[1])
    return frozenset(range(low, high + 1))


def read_layers(text: str | None = None) -> Layers:
    """The layer table of docs/design.md (or of ``text``)."""
    layer, may_import = {}, {}
    for cells in _rows(DESIGN.read_text("utf-8") if text is None else text, LAYER_HEADER):
        number = int(cells[0].split(",")[0])
        folders = re.findall(r"`hkt/(\w*)/?`", cells[1])
        for folder in folders:
            layer["hkt." + folder if folder else "hkt"] = number
        may_import[number] = _allowed(cells[3])
    return Layers(layer, may_import)


def read_never(text: str | None = None) -> dict[str, tuple[str, ...]]:
    """Package -> the packages it never imports (docs/design.md's second table)."""
    rows = _rows(DESIGN.read_text("utf-8") if text is None else text, NEVER_HEADER)
    return {re.findall(r"`([\w.]+)`", cells[0])[0]: tuple(re.findall(r"`([\w.]+)`", cells[1]))
            for cells in rows}
