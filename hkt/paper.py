"""The published numbers of "Hierarchical Kernel Transformer: Multi-Scale Attention with an
Information-Theoretic Approximation Analysis" (arXiv 2604.08829, 2026; docs/design.md §1) as
data, to print beside ours: used by the report's tables and the figures of runs and analyses.

The figures are written once, in ``config/report/paper.yaml`` (LRA's ListOps Transformer in
``config/report/lra_listops.yaml``, which that file names); this module reads and checks them at
import, and a bad file is a :class:`~hkt.errors.ConfigError` naming the file and the key.

Accuracies are percentages (the paper's unit); our records hold fractions and the tables
convert. A task is identified by its name *and* its sequence length T, because the same task
family runs at more than one length (ListOps at T=512 in the paper, T=2000 in LRA).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from hkt.errors import ConfigError, yaml_problem

#: The paper's figures, and LRA's leaderboard that holds its ListOps Transformer: data beside
#: the package (``config/report/``), not a config a run composes.
REPORT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "report"
PAPER_FILE = REPORT_CONFIG / "paper.yaml"


@dataclass(frozen=True)
class PaperResult:
    task: str       # data family, as in run records (listops, cifar10, imdb)
    length: int     # sequence length T
    model: str      # hkt | mha
    mean: float     # test accuracy, percent
    std: float      # over 3 seeds, percent
    seeds: int = 3


def _bad(path: Path, key: str, what: str) -> ConfigError:
    return ConfigError(f"{path}: key '{key}' {what}; fix it (the file's header comments give "
                       "the format)")


def _read(path: Path) -> dict[str, Any]:
    """The mapping in YAML file ``path``, or a :class:`ConfigError` that says what is wrong."""
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} is missing: it holds the paper's published figures; restore "
                          "it from the repository") from None
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_problem(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a mapping of keys; restore it from the repository")
    return data


def _keys(node: Any, path: Path, key: str, required: tuple[str, ...],
          optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """``node`` as a mapping with every ``required`` key and no key beyond ``optional``."""
    if not isinstance(node, dict):
        raise _bad(path, key, f"is {node!r}, not a mapping")
    absent = [k for k in required if k not in node]
    unknown = sorted(set(node) - set(required) - set(optional))
    if absent or unknown:
        raise _bad(path, key, "; ".join(filter(None, (
            f"misses {', '.join(absent)}" if absent else "",
            f"has unknown keys {', '.join(map(str, unknown))}" if unknown else ""))))
    return node


def _number(v: Any, path: Path, key: str, *, whole: bool = False) -> Any:
    """A number (an int where ``whole``); a text ``"p/q"`` is read as the fraction."""
    if isinstance(v, str) and not whole:
        try:
            return float(Fraction(v.replace(" ", "")))
        except (ValueError, ZeroDivisionError):
            pass
    ok = isinstance(v, int if whole else (int, float)) and not isinstance(v, bool)
    if not ok:
        raise _bad(path, key, f"is {v!r}, not a {'whole number' if whole else 'number'}")
    return int(v) if whole else float(v)


def _text(v: Any, path: Path, key: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _bad(path, key, f"is {v!r}, not a non-empty text")
    return v


def _names(v: Any, path: Path, key: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not v:
        raise _bad(path, key, f"is {v!r}, not a list of names")
    return tuple(_text(x, path, f"{key}[{i}]") for i, x in enumerate(v))


def _results(v: Any, path: Path, key: str, seeds: int) -> tuple[PaperResult, ...]:
    """The main table's entries, each task, length, model, mean and std."""
    if not isinstance(v, list) or not v:
        raise _bad(path, key, f"is {v!r}, not a list of results")
    out = []
    for i, e in enumerate(v):
        at = f"{key}[{i}]"
        e = _keys(e, path, at, ("task", "length", "model", "mean", "std"))
        out.append(PaperResult(_text(e["task"], path, f"{at}.task"),
                               _number(e["length"], path, f"{at}.length", whole=True),
                               _text(e["model"], path, f"{at}.model"),
                               _number(e["mean"], path, f"{at}.mean"),
                               _number(e["std"], path, f"{at}.std"), seeds))
    return tuple(out)


def _leaderboard_figure(name: str, task: str, length: int, path: Path, key: str) -> float:
    """The accuracy of entry ``name`` of LRA's leaderboard file, whose task and T must match."""
    board_path = REPORT_CONFIG / "lra_listops.yaml"
    board = _read(board_path)
    if (board.get("task"), board.get("length")) != (task, length):
        raise _bad(path, key, f"names {board_path.name}, whose task and length are "
                              f"{board.get('task')!r}, {board.get('length')!r}, "
                              f"not {task!r}, {length}")
    found = [e for e in board.get("entries") or []
             if isinstance(e, dict) and e.get("model") == name]
    if len(found) != 1:
        raise _bad(path, key, f"names entry {name!r}, which {board_path} holds "
                              f"{len(found)} times (it must hold it once)")
    return _number(found[0].get("accuracy"), board_path, f"entries ({name}).accuracy")


def _lra(v: Any, path: Path, key: str) -> tuple[PaperResult, ...]:
    """LRA's Transformer figures: one run each, no spread, set beside ``mha``."""
    if not isinstance(v, list) or not v:
        raise _bad(path, key, f"is {v!r}, not a list of figures")
    out = []
    for i, e in enumerate(v):
        at = f"{key}[{i}]"
        e = _keys(e, path, at, ("task", "length"), ("accuracy", "from_leaderboard"))
        if ("accuracy" in e) == ("from_leaderboard" in e):
            raise _bad(path, at, "needs one of accuracy (the figure) or from_leaderboard (the "
                                 "entry of config/report/lra_listops.yaml that holds it)")
        task = _text(e["task"], path, f"{at}.task")
        length = _number(e["length"], path, f"{at}.length", whole=True)
        acc = (_number(e["accuracy"], path, f"{at}.accuracy") if "accuracy" in e else
               _leaderboard_figure(_text(e["from_leaderboard"], path, f"{at}.from_leaderboard"),
                                   task, length, path, f"{at}.from_leaderboard"))
        out.append(PaperResult(task, length, "mha", acc, float("nan"), 1))
    return tuple(out)


def load(path: Path = PAPER_FILE) -> dict[str, Any]:
    """Every figure of ``path``, checked: the module's names below, by their file keys."""
    raw = _keys(_read(path), path, "(top level)",
                ("profile", "compared_models", "learning_controls", "levels", "stride", "seeds",
                 "main", "ablation_no_hierarchy", "score_cost", "kurtosis", "lra_transformer"))
    seeds = _number(raw["seeds"], path, "seeds", whole=True)
    ab = _keys(raw["ablation_no_hierarchy"], path, "ablation_no_hierarchy",
               ("task", "length", "model", "levels", "delta_pp"))
    cost = _keys(raw["score_cost"], path, "score_cost", ("bound", "levels3"))
    return {
        "profile": _text(raw["profile"], path, "profile"),
        "compared_models": _names(raw["compared_models"], path, "compared_models"),
        "learning_controls": _names(raw["learning_controls"], path, "learning_controls"),
        "levels": _number(raw["levels"], path, "levels", whole=True),
        "stride": _number(raw["stride"], path, "stride", whole=True),
        "seeds": seeds,
        "main": _results(raw["main"], path, "main", seeds),
        "ablation_no_hierarchy": {
            "task": _text(ab["task"], path, "ablation_no_hierarchy.task"),
            "length": _number(ab["length"], path, "ablation_no_hierarchy.length", whole=True),
            "model": _text(ab["model"], path, "ablation_no_hierarchy.model"),
            "levels": _number(ab["levels"], path, "ablation_no_hierarchy.levels", whole=True),
            "delta_pp": _number(ab["delta_pp"], path, "ablation_no_hierarchy.delta_pp")},
        "score_cost": {k: _number(cost[k], path, f"score_cost.{k}") for k in ("bound", "levels3")},
        "kurtosis": _number(raw["kurtosis"], path, "kurtosis"),
        "lra_transformer": _lra(raw["lra_transformer"], path, "lra_transformer"),
    }


_FIGURES = load()

#: The budget profile (config/profile/) that trains at the paper's scale: only its runs can be
#: compared with the figures below in value; runs of any other profile, in shape only.
PROFILE: str = _FIGURES["profile"]

#: The paper's HKT configuration (pyramid levels L and stride s), which its figures were
#: measured with: where our tables and figures place the paper's points and costs.
LEVELS: int = _FIGURES["levels"]
STRIDE: int = _FIGURES["stride"]

#: The two models the paper compares (our model names): HKT against standard attention.
COMPARED_MODELS: tuple[str, ...] = _FIGURES["compared_models"]
#: Seeds behind each of the paper's accuracies (mean ± std, docs/design.md §1): their standard
#: error is std / sqrt(SEEDS).
SEEDS: int = _FIGURES["seeds"]

#: Controls known to learn these tasks far past a Transformer (our model names; why: the file).
LEARNING_CONTROLS: tuple[str, ...] = _FIGURES["learning_controls"]

#: The main table: accuracy (%) ± std over SEEDS seeds.
MAIN: tuple[PaperResult, ...] = _FIGURES["main"]

#: Ablation: removing the hierarchy (L=1) on ListOps costs this many percentage points.
ABLATION_NO_HIERARCHY: dict[str, Any] = _FIGURES["ablation_no_hierarchy"]
#: The task of the paper's ablation table: the default wherever an ablation task is asked for.
ABLATION_TASK: str = ABLATION_NO_HIERARCHY["task"]

#: Score-computation cost relative to standard attention (s = STRIDE): at L = LEVELS
#: (``levels3``) and the bound over all L (``bound``).
SCORE_COST: dict[str, float] = _FIGURES["score_cost"]

#: Mardia kurtosis of trained score distributions (Gaussian = 1).
KURTOSIS: float = _FIGURES["kurtosis"]

#: Context: the Long Range Arena paper's vanilla Transformer (percent), not the HKT paper.
LRA_TRANSFORMER: tuple[PaperResult, ...] = _FIGURES["lra_transformer"]


def paper_accuracy(task: str, length: int, model: str) -> PaperResult | None:
    """The HKT paper's figure for (task, T, model), or None where it reports none."""
    for r in MAIN:
        if (r.task, r.length, r.model) == (task, int(length), model):
            return r
    return None


def lra_published(task: str, length: int, model: str = "mha") -> PaperResult | None:
    """The LRA paper's vanilla-Transformer figure for (task, T), where one exists (it is set
    beside our standard attention, ``model`` mha, only)."""
    for r in LRA_TRANSFORMER:
        if (r.task, r.length, r.model) == (task, int(length), model):
            return r
    return None


def ablation_delta(task: str, length: int | None, model: str, levels: int | None) -> float | None:
    """The paper's ablation difference (pp) for ``model`` with ``levels`` on (task, T), if any."""
    nh = ABLATION_NO_HIERARCHY
    if (task, length, model, levels) == (nh["task"], nh["length"], nh["model"], nh["levels"]):
        return nh["delta_pp"]
    return None
