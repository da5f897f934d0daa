"""hkt.paper reads the paper's figures from config/report/paper.yaml, each written once: LRA's
ListOps Transformer is config/report/lra_listops.yaml's entry, read from there. A bad file is an
error naming the file and the key."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from hkt import paper
from hkt.errors import ConfigError


def test_the_figures_are_the_papers():
    assert paper.paper_accuracy("listops", 512, "hkt") == paper.PaperResult(
        "listops", 512, "hkt", 55.10, 0.29, 3)
    assert paper.paper_accuracy("listops", 2000, "hkt") is None
    assert paper.SCORE_COST == {"bound": 4 / 3, "levels3": 1.3125}
    assert (paper.LEVELS, paper.STRIDE, paper.SEEDS, paper.KURTOSIS) == (3, 2, 3, 33.0)
    assert paper.ablation_delta("listops", 512, "hkt", 1) == -18.4
    assert paper.ABLATION_TASK == "listops" and paper.COMPARED_MODELS == ("hkt", "mha")


def test_lras_listops_transformer_is_read_from_the_leaderboard_file():
    """36.37 is written in config/report/lra_listops.yaml alone; paper.yaml names its entry."""
    board = yaml.safe_load((paper.REPORT_CONFIG / "lra_listops.yaml").read_text("utf-8"))
    (entry,) = [e for e in board["entries"] if e["model"] == "Transformer"]
    got = paper.lra_published("listops", 2000)
    assert got.mean == entry["accuracy"] == 36.37 and got.seeds == 1 and math.isnan(got.std)
    assert "36.37" not in paper.PAPER_FILE.read_text("utf-8")
    assert paper.lra_published("imdb", 4000).mean == 64.27
    assert paper.lra_published("listops", 2000, "hkt") is None


def _broken(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(paper.PAPER_FILE.read_text("utf-8"))
    edit(data)
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


@pytest.mark.parametrize("edit, key", [
    (lambda d: d.pop("kurtosis"), "(top level)"),
    (lambda d: d["main"][1].update(mean="fifty"), "main[1].mean"),
    (lambda d: d["score_cost"].update(bound="4/0"), "score_cost.bound"),
    (lambda d: d["ablation_no_hierarchy"].update(levels=1.5), "ablation_no_hierarchy.levels"),
    (lambda d: d["lra_transformer"][0].update(accuracy=36.37), "lra_transformer[0]"),
    (lambda d: d["lra_transformer"][0].update(from_leaderboard="Nobody"),
     "lra_transformer[0].from_leaderboard"),
])
def test_a_bad_file_names_itself_and_the_key(tmp_path, edit, key):
    path = _broken(tmp_path, edit)
    with pytest.raises(ConfigError) as err:
        paper.load(path)
    assert str(path) in str(err.value) and f"key '{key}'" in str(err.value)


def test_a_fraction_is_read_exactly(tmp_path):
    assert paper.load(_broken(tmp_path, lambda d: None))["score_cost"]["bound"] == 4 / 3
