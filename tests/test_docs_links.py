"""The README is one screen and the docs hold the rest: every link of the README and of the
pages under docs/ reaches a file of the repository, every repository path they name in
backticks exists, and the README indexes every page of docs/ (issue 47)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: a repository path in backticks: a top-level folder of ours, then a file or folder name
PATH = re.compile(r"`((?:hkt|config|workflow|scripts|tests|docs|requirements)/[\w./-]*)`")
PLACEHOLDER = re.compile(r"[A-Z]{2,}|\*|\.\.\.|…")  # NAME, TASK, glob, elision: not one path


def test_the_readme_is_one_screen():
    assert len(README.read_text("utf-8").splitlines()) <= 150


def test_every_link_reaches_a_file():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text("utf-8")):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            if not (page.parent / target.partition("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_every_repository_path_named_exists():
    import yaml

    pending = [["docs", "results", p.stem] for p in (ROOT / "config" / "suites").glob("*.yaml")
               if "published" in (yaml.safe_load(p.read_text()) or {})
               and not (ROOT / "docs" / "results" / p.stem).is_dir()]
    missing = []
    for page in PAGES:
        for path in PATH.findall(page.read_text("utf-8")):
            if PLACEHOLDER.search(path) or path.split("/")[:3] in pending:
                continue  # a suite's publication still to come: its folder is named beforehand
            if not (ROOT / path.rstrip(".")).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, missing


def test_the_readme_indexes_every_page_of_the_docs():
    text = README.read_text("utf-8")
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert pages and not [p for p in pages if f"({p})" not in text]
