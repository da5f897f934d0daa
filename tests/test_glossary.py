"""One meaning per word (docs/glossary.md): "reference" is a ListOps rule reference and nothing
else. In the code (hkt/**/*.py), the configs (config/**/*.yaml) and the workflow (workflow/**)
the word appears only as "rule reference(s)", as the names of the rule references' module and
functions, or as a form :data:`ALLOWED_FORMS` lists with its reason; any other "reference" fails
with its file and line (issue 75 renamed four others: borrowed runs, the default setting, the
full model of an ablation, the materialised HKT implementation)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Where the glossary's words are held to it.
SCOPE = (("hkt", "**/*.py"), ("config", "**/*.yaml"), ("workflow", "**/*"))

#: The forms the word may take, each with its reason (regular expressions, matched around it).
ALLOWED_FORMS: dict[str, str] = {
    # prose, wrapped across a line of a docstring, a comment, a caption or a string ("the rule\n#
    # references", '"the rule "\n f"references')
    r"(?i:rule)(?:[\s#*\"'`>-]|\bf\")*(?i:references?)\b": "the glossary's one meaning: a rule reference",
    r"\brule_references\b": "the module of the rule references (hkt.rule_references)",
    r"\bRULE_REFERENCES\b": "the rule references' table in hkt.rule_references",
    r"\bis_reference\b": "hkt.rule_references.is_reference: whether a run is a rule reference",
    r"msc_thesis references/": "a folder of a GitHub repository cited as where a figure was read "
                               "(config/report/lra_listops.yaml): a path, not our word",
}
ALLOWED = re.compile("|".join(f"(?:{form})" for form in ALLOWED_FORMS))
WORD = re.compile("reference", re.IGNORECASE)


def stray_references(path: Path, root: Path = ROOT) -> list[str]:
    """``FILE:LINE: text`` for every "reference" in ``path`` that no allowed form covers."""
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError:
        return []
    covered = [m.span() for m in ALLOWED.finditer(text)]
    found = []
    for m in WORD.finditer(text):
        if any(a <= m.start() and m.end() <= b for a, b in covered):
            continue
        line = text.count("\n", 0, m.start()) + 1
        found.append(f"{path.relative_to(root)}:{line}: {text.splitlines()[line - 1].strip()}")
    return found


def scoped_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder, pattern in SCOPE for p in (root / folder).glob(pattern)
                  if p.is_file() and "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", scoped_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_reference_means_a_rule_reference_only(path):
    stray = stray_references(path)
    assert not stray, (
        "'reference' means a ListOps rule reference only (docs/glossary.md): write 'rule "
        "reference', or the glossary's word for the other meaning (borrowed runs, default "
        "setting, full model, materialised), or list the form in tests/test_glossary.py's "
        "ALLOWED_FORMS with its reason:\n" + "\n".join(stray))


def test_another_meaning_is_named_by_file_and_line(tmp_path):
    code = tmp_path / "hkt" / "x.py"
    code.parent.mkdir()
    code.write_text('"""The ListOps rule\n    references, drawn (hkt.rule_references)."""\n'
                    "# the rule\n# reference of a run, is_reference(frame)\n"
                    "lr = 1e-4  # the reference setting\nREFERENCE_HEADROOM = 7\n", "utf-8")
    assert stray_references(code, tmp_path) == [
        "hkt/x.py:5: lr = 1e-4  # the reference setting",
        "hkt/x.py:6: REFERENCE_HEADROOM = 7"]


def test_the_glossary_has_the_words_of_the_other_meanings():
    text = (ROOT / "docs" / "glossary.md").read_text("utf-8")
    for word in ("rule reference", "borrowed runs", "default setting", "full model",
                 "materialised"):
        assert f"**{word}" in text, f"docs/glossary.md has no entry '{word}'"
