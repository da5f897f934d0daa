"""The design the code cites is inside the repository (docs/design.md): every citation names a
section that exists, and no file of the library, configs, workflow or scripts sends a reader to
a document or folder outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
CITED_IN = ("hkt", "config", "workflow", "scripts")
CITATION = re.compile(r"docs/design\.md(?: (§\d+(?:, steps [\d ,and]+)?(?: and §\d+)?))?")


def _sources() -> list[Path]:
    return sorted(p for part in CITED_IN for p in (ROOT / part).rglob("*")
                  if p.is_file() and p.suffix in {".py", ".yaml", ".smk", ".rst", ".sh", ".md", ""}
                  and "__pycache__" not in p.parts)


def _sections() -> set[int]:
    return {int(m) for m in re.findall(r"^## (\d+)\. ", DESIGN.read_text("utf-8"), re.M)}


def test_the_design_covers_what_the_code_relies_on():
    text = DESIGN.read_text("utf-8")
    assert _sections() == {1, 2, 3, 4, 5, 6}
    for needle in ("55.10", "1.3125", "q̃_i", "Causality", "(5R + 4)/9", "Mardia",
                   "record.json", "pending.json", "Data flows one way"):
        assert needle in text, needle


def test_every_citation_names_a_section_of_the_design_and_nothing_points_outside():
    outside, unknown, sections = [], [], _sections()
    for path in _sources():
        text, name = path.read_text("utf-8", errors="replace"), str(path.relative_to(ROOT))
        if "DESIGN.md" in text or "../shared" in text:
            outside.append(name)
        unknown += [f"{name}: {m.group(0)}" for m in CITATION.finditer(text)
                    for section in re.findall(r"§(\d+)", m.group(0)) if int(section) not in sections]
    assert not outside, f"these cite a document or folder outside the repository: {outside}"
    assert not unknown, f"citations of no section of docs/design.md: {unknown}"
    assert len(_sources()) > 50  # the files were found


def test_every_docs_page_the_code_names_exists():
    """A docstring, config comment or message that sends a reader to docs/… names a page that
    is there (a renamed page left `docs/listops_rules.md` behind in six modules)."""
    missing = sorted({f"{path.relative_to(ROOT)}: {page}" for path in _sources()
                      for page in re.findall(r"docs/[\w/.-]*\w\.md",
                                             path.read_text("utf-8", errors="replace"))
                      if not (ROOT / page).is_file()})
    assert not missing, missing
