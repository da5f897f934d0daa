"""What the results READMEs say with a number, the published files say too (issue 37: prose
that the files did not support). Every figure with two decimals (accuracies, differences,
intervals, p-values, ρ) in a results README, in the main README's Results section and in the
results index (docs/results/README.md), must be
in the published tables or summaries (a README may set another publication's rows beside its
own), be a run's accuracy in runs.csv, be one of the paper's figures (config/report/paper.yaml), or be a
suite's measured wall time (plan/sessions.json, segments.log) or its ratio to the plan. A record
that a rerun replaced stays published under ``replaced/`` (its accuracies, steps and session), so
that a README can say what the rerun changed; a rerun that did not reach its published outcome
is kept under ``not_reproduced/`` (its accuracies and steps), so that a README can say how it
differs.

So must every count with a unit (issue 48: "27 training runs" stayed after S4D made them 36):
training runs, seeds, sessions ("runs of the same command"), steps and hours, as integers, are
counts the published records, sessions and plans give (:func:`known_counts`)."""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from hkt import paper
from hkt.workflow.sessions import load_sessions, session_seconds

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "results"
#: A two-decimal figure, not part of a version number (3.11.7) or a longer decimal.
FIGURE = re.compile(r"(?<![\d.])\d+\.\d\d(?![\d]|\.\d)")
#: A version follows these words: not a result.
VERSION = re.compile(r"(Debian|Linux|Python|CPython|torch|MLflow|glibc)\s+$")


def figures(text: str) -> set[str]:
    return {m.group() for m in FIGURE.finditer(text) if not VERSION.search(text[:m.start()][-12:])}


def paper_figures() -> set[str]:
    values = [v for r in (*paper.MAIN, *paper.LRA_TRANSFORMER) for v in (r.mean, r.std)]
    values += [paper.ABLATION_NO_HIERARCHY["delta_pp"], paper.KURTOSIS, *paper.SCORE_COST.values()]
    by_task = {}
    for r in paper.MAIN:
        by_task.setdefault((r.task, r.length), {})[r.model] = r.mean
    values += [m["hkt"] - m["mha"] for m in by_task.values() if {"hkt", "mha"} <= set(m)]
    return {f"{abs(v):.2f}" for v in values if v == v}


def wall_figures(root: Path) -> set[str]:
    """The suite's wall time in hours from its sessions and its wrapper's stamps, and its ratio
    to the plan's estimate at the first start."""
    out = set()
    sessions = root / "plan" / "sessions.json"
    if sessions.is_file():
        every = load_sessions(root)  # as hkt status and hkt plan sum a suite's wall time
        runs = [s for s in every if not s.get("adds") and not s.get("redoes")]  # the suite's own
        wall = sum(session_seconds(s, now=0.0, host="") for s in runs)
        added = sum(session_seconds(s, now=0.0, host="") for s in every if s.get("adds"))
        redone = sum(session_seconds(s, now=0.0, host="") for s in every if s.get("redoes"))
        out |= {f"{wall / 3600:.2f}", f"{added / 3600:.2f}", f"{(wall + added) / 3600:.2f}",
                f"{redone / 3600:.2f}"}  # runs made again (publish_results.py --redo)
        if runs:  # a publication grown by added runs alone (a partial one) has no plan of its own
            out.add(f"{wall / runs[0]['estimate_s']:.2f}")
    stamps = root / "segments.log"
    if stamps.is_file():
        times = re.findall(r"=== (start|end) (\S+)", stamps.read_text())
        starts = [datetime.fromisoformat(t.replace("Z", "+00:00")) for k, t in times if k == "start"]
        ends = [datetime.fromisoformat(t.replace("Z", "+00:00")) for k, t in times if k == "end"]
        out.add(f"{sum((e - s).total_seconds() for s, e in zip(starts, ends)) / 3600:.2f}")
    return out


def kept_records(root: Path) -> list[Path]:
    """The records a publication keeps beside its runs: those reruns replaced (``replaced/``)
    and reruns that did not reach their published outcome (``not_reproduced/``)."""
    return sorted(p for kept in ("replaced", "not_reproduced")
                  for p in (root / kept).glob("runs/*/*/*/seed*/record.json"))


def published_figures(root: Path) -> set[str]:
    """The figures of a publication's summary and tables, and each run's accuracies (%)."""
    files = [root / "summary.md", *sorted((root / "tables").glob("*.md")),
             *sorted((root / "tables").glob("*.csv"))]
    out = figures("\n".join(f.read_text("utf-8") for f in files if f.is_file()))
    runs = root / "tables" / "runs.csv"
    if runs.is_file():
        for row in csv.DictReader(runs.open(encoding="utf-8")):
            out |= {f"{100 * float(row[k]):.2f}" for k in ("val_accuracy", "test_accuracy") if row[k]}
    for path in kept_records(root):  # what a rerun replaced, or a rerun that differs
        rec = json.loads(path.read_text("utf-8"))
        out |= {f"{100 * float(rec[k]):.2f}" for k in ("val_accuracy", "test_accuracy") if rec.get(k)}
    return out | wall_figures(root) | wall_figures(root / "replaced")


def unsupported(text: str, roots: list[Path]) -> list[str]:
    known = set().union(*(published_figures(r) for r in roots)) | paper_figures()
    return sorted(f for f in figures(text) if f not in known)


PUBLICATIONS = sorted(p for p in DOCS.iterdir() if (p / "tables").is_dir()) if DOCS.is_dir() else []


@pytest.mark.parametrize("root", PUBLICATIONS, ids=lambda p: p.name)
def test_every_figure_of_a_results_readme_is_in_the_published_files(root):
    assert unsupported((root / "README.md").read_text("utf-8"), PUBLICATIONS) == []


def results_section() -> str:
    """The main README's Results section ("Results at a glance") and the results index that
    reads them, docs/results/README.md (the publications' readings, moved out of the README)."""
    text = (ROOT / "README.md").read_text("utf-8")
    glance = text[text.index("## Results"):text.index("\n## ", text.index("## Results") + 1)]
    return glance + "\n" + (DOCS / "README.md").read_text("utf-8")


def test_the_main_readme_results_section_quotes_the_published_files():
    assert unsupported(results_section(), PUBLICATIONS) == []


def test_a_figure_the_files_do_not_hold_is_found(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "main.md").write_text("| hkt | 35.53 ± 0.74 |\n")
    assert unsupported("HKT scored 35.53 %, MHA 33.35 % (Debian 12.11)", [tmp_path]) == ["33.35"]


# ------------------------------------------------------------------ counts with a unit (issue 48)
#: An integer count and its unit: training runs, seeds, sessions (a workflow session is "a run
#: of the same command"), steps, hours. Not a decimal's tail, not inside a larger number.
COUNT = re.compile(r"(?<![\d.,])(\d[\d,]*)(?![\d.,]\d)\s+(?:more\s+)?(?P<unit>training runs?|"
                   r"runs? of the(?: same)? command|sessions?|seeds?|steps?|hours?|h\b)")
#: What a unit word counts: its word's start -> the kind of count (the first that matches).
UNITS = (("training run", "runs"), ("run", "sessions"), ("session", "sessions"),
         ("seed", "seeds"), ("step", "steps"), ("h", "hours"))


def counts(text: str) -> set[tuple[int, str]]:
    """The (count, kind) pairs stated in ``text``."""
    return {(int(m.group(1).replace(",", "")),
             next(kind for start, kind in UNITS if m.group("unit").startswith(start)))
            for m in COUNT.finditer(text.replace("\n", " "))}


def known_counts(root: Path) -> set[tuple[int, str]]:
    """The counts a publication's files give: its training records (all, per task, per task and
    model, per model), seeds per (task, model), the steps its runs trained and were best at,
    its workflow sessions (its own, added, all), and its wall time and plan in whole hours."""
    from hkt.run_record import load_record

    out: set[tuple[int, str]] = set()
    trained: list[dict] = []
    for path in sorted((root / "runs").glob("*/*/*/seed*/record.json")):
        rec = load_record(path)
        out |= {(int(rec[k]), "steps") for k in ("steps", "best_step") if rec.get(k)}
        if not rec.get("external"):
            trained.append(rec)
    for path in kept_records(root):  # a record a rerun replaced, or a rerun's: its steps
        rec = json.loads(path.read_text("utf-8"))
        out |= {(int(rec[k]), "steps") for k in ("steps", "best_step") if rec.get(k)}
    groups: dict[tuple, set] = {}
    for rec in trained:
        for key in ((), (rec["task"],), (rec["model"],), (rec["task"], rec["model"]),
                    (rec["task"], rec["model"], rec["variant"])):
            groups.setdefault(key, set()).add((rec["task"], rec["model"], rec["variant"], rec["seed"]))
    out |= {(len(v), "runs") for v in groups.values()}
    seeds: dict[tuple, set] = {}
    for rec in trained:
        seeds.setdefault((rec["task"], rec["model"], rec["variant"]), set()).add(rec["seed"])
    out |= {(len(v), "seeds") for v in seeds.values()} | {(1, "seeds")}  # a baseline's one seed
    for name in ("steps", "max_steps"):  # the budgets of the composed configs
        for cfg in (root / "runs").glob("*/*/*/seed*/config.yaml"):
            for m in re.finditer(rf"\b{name}: (\d+)", cfg.read_text("utf-8")):
                out.add((int(m.group(1)), "steps"))
    sessions = root / "plan" / "sessions.json"
    if sessions.is_file():
        every = json.loads(sessions.read_text("utf-8"))["sessions"]
        own = [s for s in every if not s.get("adds") and not s.get("redoes")]
        redone = [s for s in every if s.get("redoes")]  # runs made again (publish --redo)
        out |= {(len(own), "sessions"), (len(every) - len(own) - len(redone), "sessions"),
                (len(redone), "sessions"), (len(every), "sessions")}
        out |= {(round(s["estimate_s"] / 3600), "hours") for s in every if s.get("estimate_s")}
    out |= {(round(float(h)), "hours") for h in wall_figures(root)}
    return out


def unsupported_counts(text: str, roots: list[Path]) -> list[str]:
    known = set().union(*(known_counts(r) for r in roots))
    return sorted(f"{n} {unit}" for n, unit in counts(text) if (n, unit) not in known)


@pytest.mark.parametrize("root", PUBLICATIONS, ids=lambda p: p.name)
def test_every_count_of_a_results_readme_is_one_the_files_give(root):
    assert unsupported_counts((root / "README.md").read_text("utf-8"), PUBLICATIONS) == []


def test_the_main_readme_results_section_counts_what_the_files_hold():
    """Counts of what ran; the results index's section on the controls also gives suites'
    settings (a recipe's 76,800 steps) and a partial curve without tables, so it is left out."""
    text = results_section()
    assert unsupported_counts(text[:text.index("## What limits our ListOps values")],
                              PUBLICATIONS) == []


def test_a_stale_count_is_found():
    """The README's count before S4D joined the CPU suite: 27 training runs, 9 sessions; the
    suite has 36 runs (9 of S4D, added in 4 more sessions)."""
    cpu = DOCS / "cpu"
    assert counts("composes exactly its 27 training runs today, over 9 runs of the same "
                  "command, 3 seeds, 10,000 steps") == {(27, "runs"), (9, "sessions"),
                                                        (3, "seeds"), (10000, "steps")}
    assert unsupported_counts("the suite composes exactly its 27 training runs", [cpu]) == \
        ["27 runs"]
    assert unsupported_counts("its 36 training runs, 12 per task, 3 seeds each, in 9 runs of the "
                              "same command and 4 more sessions, 10k steps", [cpu]) == []


# ------------------------------------------------------------ the review's sentences (issue 58)
#: What a review found false in the prose, by file: it must not come back.
STALE = {
    "README.md": ["every model sits at the root-operator prior", "about a night on 2 cores"],
    "docs/results/README.md": ["every model sits at the root-operator prior"],
    "docs/results/quick/README.md": ["cannot be told (the summary's reading)"],
    "docs/listops.md": ["every suite with ListOps runs them"],
    "docs/data.md": ["parameters give byte-identical files"],
    "docs/results/s5_recipe/README.md": ["the paper's 2 × 64 model", "the paper's budget"],
}


@pytest.mark.parametrize("path", sorted(STALE))
def test_the_sentences_the_review_found_false_are_gone(path):
    text = " ".join((ROOT / path).read_text("utf-8").split()).lower()
    assert [s for s in STALE[path] if s.lower() in text] == []


#: A row of a summary's claims table that reads a ListOps run against the rules:
#: model, variant (none: the main grid's), what our runs read.
RULE_ROW = re.compile(r"^\| Which rule reference (\w+)(?: \((\w+)\))? reaches on listops "
                      r"\(T=512\) \| [^|]* \| ([^|]*) \|", re.M)


def test_every_run_the_summaries_read_above_the_prior_is_named_in_the_results_index():
    """The index used to say every model sits at the prior while the summaries read some runs
    above it (or read them not at all): each run a summary reads above the root-operator prior
    is named there by its variant (or model), with its distance to the prior."""
    index = (DOCS / "README.md").read_text("utf-8")
    above = []
    for root in PUBLICATIONS:
        for model, variant, ours in RULE_ROW.findall((root / "summary.md").read_text("utf-8")):
            if ours.split(": ", 1)[1].startswith("above the root-operator prior"):
                distance = re.search(r"above the root-operator prior \(\+(\d+\.\d\d)", ours)[1]
                above.append((root.name, variant or model.lower(), distance))
    assert above, "no run reads above the prior: the index's sentence needs rewriting"
    unnamed = [a for a in above if f"`{a[1]}`" not in index and a[1] not in index]
    no_distance = [a for a in above if not re.search(rf"(\+|, ){re.escape(a[2])}\b", index)]
    assert unnamed == [] and no_distance == []


def _verdict(summary: str, claim: str) -> str:
    """The reading cell of the claims row that starts with ``claim``."""
    row = next(line for line in summary.splitlines() if line.startswith(f"| {claim}"))
    return row.rstrip(" |").rsplit(" | ", 1)[1]


def test_the_quick_readme_reads_the_analysis_claims_as_its_summary_does():
    """The quick README said the decay "cannot be told" while its summary read "refutes"; both
    verdicts hold at the quick suite's budget only, which the summary and the README say."""
    summary = (DOCS / "quick" / "summary.md").read_text("utf-8")
    readme = " ".join((DOCS / "quick" / "README.md").read_text("utf-8").split())
    for claim in ("The approximation error decays", "Trained score distributions"):
        verdict = _verdict(summary, claim)
        assert "not the paper's budget" in verdict, verdict
        word = verdict.split(" at our ")[0].removesuffix(" the value")
        assert f'"{word}' in readme and "at this budget only" in readme, claim


def test_a_plateau_the_test_set_cannot_confirm_is_not_called_moved_alone():
    """Where a summary reads a plateau as moving over seeds only, or across runs of different
    precision, the publication's README says so too."""
    for root in PUBLICATIONS:
        summary = (root / "summary.md").read_text("utf-8")
        rows = [line for line in summary.splitlines()
                if line.startswith("| The Transformers' plateau")]
        readme = " ".join((root / "README.md").read_text("utf-8").split())
        if any("cannot tell with the test set's error" in r for r in rows):
            assert "cannot tell with the test set's error" in readme, root.name
        if any("differ in precision" in r for r in rows):
            assert "differ in precision" in readme, root.name


def test_a_comparison_with_lras_listops_says_how_long_its_trees_are():
    """LRA's ListOps trees are 500–2000 tokens long, ours 128–512: a README that sets our
    values beside LRA's ListOps figures says so."""
    for readme in [DOCS / "README.md", *sorted(DOCS.glob("*/README.md"))]:
        text = " ".join(readme.read_text("utf-8").split())
        if "LRA's ListOps" in text:
            assert "500–2000" in text and "128–512" in text, readme


def test_the_cpu_suites_time_the_readme_states_is_its_sessions():
    """The main command's time on 2 cores, in the README's quick start (its prose, beside the
    main job's block): the CPU suite's own sessions and the sessions that added S4D
    (plan/sessions.json)."""
    text = (ROOT / "README.md").read_text("utf-8")
    quick = text[text.index("## Quick start"):text.index("## HKT on one screen")]
    stated = set(re.findall(r"(\d+\.\d\d) h\b", re.sub(r"```.*?```", "", quick, flags=re.S)))
    assert len(stated) == 2 and stated <= wall_figures(DOCS / "cpu"), stated


def test_the_listops_page_names_every_suite_that_turns_the_rules_off():
    import yaml

    text = " ".join((ROOT / "docs" / "listops.md").read_text("utf-8").split())
    sentence = text[text.index("Each takes seconds"):text.index("Run one alone")]
    off = sorted(p.stem for p in (ROOT / "config" / "suites").glob("*.yaml")
                 if ((yaml.safe_load(p.read_text()) or {}).get("external") or {})
                 .get("root_op_prior", {}).get("enabled") is False)
    assert "long" in off
    assert [s for s in off if f"`{s}`" not in sentence] == []


# ------------------------------------------------ published figures read against the rules (issue 60)
#: The documents that quote the reading of LRA's published ListOps figures, and its publication.
LEADERBOARD = DOCS / "lra_listops" / "tables" / "leaderboard.csv"
READINGS_QUOTED = (DOCS / "lra_listops" / "README.md", ROOT / "docs" / "listops.md")
#: A row of a quoted readings table: | model | published (%) | reading |.
READING_ROW = re.compile(r"^\| (?P<model>[^|]+?) \| (?P<figure>\d+\.\d\d) \| (?P<reading>(?:at|above|"
                         r"below) the [^|]+?) \|$", re.M)


def computed_readings() -> list[tuple[str, str, str]]:
    """(model, figure, reading) of each published figure, as hkt aggregate --leaderboard read it."""
    return [(r["model"], f"{float(r['accuracy']):.2f}", r["position"])
            for r in csv.DictReader(LEADERBOARD.open(encoding="utf-8"))]


@pytest.mark.parametrize("doc", READINGS_QUOTED, ids=lambda p: p.name)
def test_the_quoted_readings_of_the_published_figures_are_the_computed_ones(doc):
    """Each document's table of readings is the computed table, row for row, and its count of
    figures at the prior is the computed count."""
    if not LEADERBOARD.is_file():
        pytest.skip("docs/results/lra_listops/ holds no leaderboard table")
    text = doc.read_text("utf-8")
    quoted = [(m["model"], m["figure"], m["reading"]) for m in READING_ROW.finditer(text)]
    computed = computed_readings()
    assert quoted == computed
    at_prior = sum(r == "at the root-operator prior" for _, _, r in computed)
    assert f"{at_prior} of the {len(computed)}" in text


def test_a_reading_the_computation_does_not_give_is_found():
    text = "| Transformer | 36.37 | above the root-operator prior, below the depth-1 rule |"
    assert [(m["model"], m["figure"], m["reading"]) for m in READING_ROW.finditer(text)] == \
        [("Transformer", "36.37", "above the root-operator prior, below the depth-1 rule")]
    if LEADERBOARD.is_file():
        assert ("Transformer", "36.37", "at the root-operator prior") in computed_readings()


def test_the_lra_tables_efficient_transformers_at_the_prior_are_counted_as_computed():
    """README's Results at a glance and the results index count the LRA paper's efficient
    Transformers at the prior (its Table 1 rows but the Transformer's) from the computed table."""
    if not LEADERBOARD.is_file():
        pytest.skip("docs/results/lra_listops/ holds no leaderboard table")
    rows = [r for r in csv.DictReader(LEADERBOARD.open(encoding="utf-8"))
            if "2011.04006), Table 1" in r["source"] and r["model"] != "Transformer"]
    at = sum(r["position"] == "at the root-operator prior" for r in rows)
    for doc in (ROOT / "README.md", DOCS / "README.md"):
        assert f"{at} of its {len(rows)} efficient Transformers" in " ".join(doc.read_text("utf-8").split()), doc
