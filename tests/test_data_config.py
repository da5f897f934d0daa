"""Task configs through the CLI: printing them, and unknown keys pointing at the right command."""

from __future__ import annotations

from hkt.cli.main import main


def test_prepare_print_config_shows_overrides_and_writes_nothing(tmp_path, capsys):
    assert main(["prepare", "listops", "--print-config", "prepare.seed=3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("task:\n") and "  family: listops" in out and "    seed: 3" in out


def test_prepare_unknown_key_points_to_prepare_print_config(tmp_path, capsys):
    assert main(["prepare", "listops", "--out", str(tmp_path / "d"), "prepare.sedd=1"]) == 2
    err = capsys.readouterr().err
    assert "task.prepare.sedd" in err and "hkt prepare listops --print-config" in err
    assert "hkt train" not in err and not (tmp_path / "d").exists()


def test_prepare_without_out_says_what_is_missing(capsys):
    assert main(["prepare", "listops"]) == 2
    assert "--out" in capsys.readouterr().err


def test_prepare_refuses_non_finite_probability(tmp_path, capsys):
    assert main(["prepare", "listops", "--out", str(tmp_path / "d"), "prepare.p_operator=nan"]) == 2
    err = capsys.readouterr().err
    assert "task.prepare.p_operator" in err and "finite" in err
