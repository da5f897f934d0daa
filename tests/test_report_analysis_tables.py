"""hkt.report.analysis_tables: tables across `hkt analyze` outputs, and the cost table."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from hkt.mixers import score_cost_limit, score_cost_ratio
from hkt.runs_frame import AggregateError
from hkt.report import analysis_tables as at
from hkt import paper
from hkt.figures import suite
from hkt.run_record import ANALYSIS_FILE


def _row(section: str, layer: int, head: int, level: int, quantity: str, metric: str,
         value: float) -> dict:
    """One row as hkt.analysis.run._row writes it."""
    return {"section": section, "layer": layer, "head": head, "level": level,
            "quantity": quantity, "metric": metric, "value": float(value)}


def fake_analysis(root: Path, *, task: str = "listops", length: int | None = 512,
                  model: str = "hkt", variant: str = "main", seed: int = 0, levels: int = 2,
                  kappa: float = 10.0, antisym: float = 0.5, psd: bool = True,
                  truncation: tuple[float, ...] = (0.4, 0.6)) -> Path:
    """Write an analysis.parquet in the tidy format `hkt analyze` writes; returns its path.

    ``length=None`` writes a file from before the ``length`` column existed.
    """
    rows = []
    for level in range(levels):
        for quantity in ("scores", "queries", "keys"):
            rows.append(_row("kurtosis", 0, 0, level, quantity, "kappa", kappa + level))
            rows.append(_row("kurtosis", 0, 0, level, quantity, "n", 100))
        for metric, value in (("antisym_share", antisym), ("lambda_min", -0.1 if not psd else 0.1),
                              ("lambda_max", 1.0), ("neg_mass_share", 0.0 if psd else 0.2),
                              ("rank", 4), ("psd", float(psd))):
            rows.append(_row("kernel", 0, 0, level, "M", metric, value))
    rows.append(_row("kernel", 0, 0, -1, "M", "psd_condition", float(psd)))
    for metric, value in (("rank", 3), ("rank_bound", 8), ("lambda_min", 0.0), ("psd", 1.0),
                          ("length", 16)):
        rows.append(_row("gram", 0, 0, -1, "example0", metric, value))
    if model == "hkt":
        for keep, acc in enumerate(truncation, start=1):
            rows.append(_row("truncation", -1, -1, keep, "accuracy", "accuracy", acc))
            rows.append(_row("truncation", -1, -1, keep, "accuracy", "examples", 50))
    out = root / f"{task}{length}" / model / variant / f"seed{seed}"
    ident = {"task": task, "length": length, "model": model, "variant": variant, "seed": seed}
    if length is None:
        del ident["length"]
    table = pl.DataFrame(rows).with_columns(*(pl.lit(v).alias(k) for k, v in ident.items()),
                                            pl.lit(str(out)).alias("run_dir"))
    out.mkdir(parents=True, exist_ok=True)
    table.write_parquet(out / ANALYSIS_FILE)
    return out / ANALYSIS_FILE


@pytest.fixture
def analyses(tmp_path) -> pl.DataFrame:
    """ListOps at T=512 (HKT seeds 0 and 1, MHA seed 0) and at T=2000 (HKT seed 0)."""
    fake_analysis(tmp_path, seed=0, kappa=10.0, antisym=0.4, truncation=(0.4, 0.6))
    fake_analysis(tmp_path, seed=1, kappa=20.0, antisym=0.6, psd=False, truncation=(0.5, 0.7))
    fake_analysis(tmp_path, model="mha", levels=1, kappa=3.0)
    fake_analysis(tmp_path, length=2000, kappa=50.0, truncation=(0.2, 0.3))
    return at.load_analyses([tmp_path])


def test_load_analyses_finds_each_file_once(tmp_path):
    f = fake_analysis(tmp_path)
    assert at.load_analyses([tmp_path, f, f.parent]).height == pl.read_parquet(f).height
    assert at.load_analyses([]).is_empty()
    with pytest.raises(AggregateError, match="no such file"):
        at.load_analyses([tmp_path / "missing"])


def test_kurtosis_table_keeps_lengths_apart(analyses):
    t = at.kurtosis_table(analyses).filter((pl.col("quantity") == "scores") & (pl.col("level") == 0))
    assert t.select("length", "model").rows() == [(512, "hkt"), (512, "mha"), (2000, "hkt")]
    hkt = t.row(0, named=True)
    assert (hkt["kappa_mean"], hkt["kappa_min"], hkt["kappa_max"]) == (15.0, 10.0, 20.0)
    assert hkt["seeds"] == 2 and hkt["paper"] == paper.KURTOSIS and hkt["gaussian"] == 1.0
    assert t.row(2, named=True)["kappa_mean"] == 50.0
    queries = at.kurtosis_table(analyses).filter(pl.col("quantity") == "queries")
    assert queries["paper"].is_null().all()


def test_kurtosis_table_keeps_variants_apart(tmp_path):
    fake_analysis(tmp_path, kappa=10.0)
    fake_analysis(tmp_path, variant="levels1", levels=1, kappa=2.0)
    t = at.kurtosis_table(at.load_analyses([tmp_path])).filter(
        (pl.col("quantity") == "scores") & (pl.col("level") == 0))
    assert t.select("variant", "kappa_mean").rows() == [("levels1", 2.0), ("main", 10.0)]


def test_kernel_table(analyses):
    t = at.kernel_table(analyses)
    assert t.select("length", "model", "level").rows() == [
        (512, "hkt", 0), (512, "hkt", 1), (512, "mha", 0), (2000, "hkt", 0), (2000, "hkt", 1)]
    hkt = t.row(0, named=True)
    assert hkt["antisym_mean"] == pytest.approx(0.5) and hkt["psd_share"] == pytest.approx(0.5)
    assert hkt["psd_condition_share"] == pytest.approx(0.5) and hkt["n"] == 2
    assert (hkt["gram_rank"], hkt["gram_rank_bound"]) == (3.0, 8.0)
    assert t.row(3, named=True)["psd_share"] == 1.0


def test_truncation_table(analyses):
    t = at.truncation_table(analyses)
    assert t.select("length", "variant", "level").rows() == [
        (512, "main", 1), (512, "main", 2), (2000, "main", 1), (2000, "main", 2)]
    one = t.row(0, named=True)
    assert one["acc_mean"] == pytest.approx(45.0) and one["delta_pp"] == pytest.approx(-20.0)
    assert one["seeds"] == 2
    assert t.row(2, named=True)["delta_pp"] == pytest.approx(-10.0)
    assert t.row(3, named=True)["delta_pp"] == pytest.approx(0.0)


def _runs(*rows: tuple[str, int, str, str, float]) -> pl.DataFrame:
    """A runs frame of (task, length, model, variant, ms/step) rows."""
    return pl.DataFrame([{"task": t, "length": n, "model": m, "variant": v, "ms_per_step": ms}
                         for t, n, m, v, ms in rows])


def test_cost_table(tmp_path):
    bench = tmp_path / "attention.csv"
    pl.DataFrame({"variant": ["hkt-fused", "mha"], "T": [64, 64], "device": ["cpu", "cpu"],
                  "time_ratio": [1.5, 1.0], "memory_ratio": [1.2, 1.0]}).write_csv(bench)
    runs = _runs(("listops", 512, "hkt", "paper", 30.0), ("listops", 512, "mha", "paper", 20.0),
                 ("listops", 2000, "hkt", "paper", 90.0), ("listops", 2000, "mha", "paper", 30.0),
                 ("listops", 512, "hkt", "main", 99.0), ("listops", 512, "mha", "main", 1.0))
    t = at.cost_table(runs, bench, main_variant="paper")
    analytic, bound = t.row(0, named=True), t.row(1, named=True)
    assert analytic["ratio"] == pytest.approx(score_cost_ratio(paper.LEVELS, paper.STRIDE))
    assert analytic["paper"] == paper.SCORE_COST["levels3"]
    assert f"L={paper.LEVELS}, s={paper.STRIDE}" in analytic["what"]
    assert bound["ratio"] == pytest.approx(score_cost_limit(paper.STRIDE))
    assert bound["paper"] == paper.SCORE_COST["bound"]
    assert t.filter(pl.col("what").str.contains("measured") & pl.col("setting").str.starts_with("T="))[
        "ratio"].to_list() == [1.5, 1.2]
    train = t.filter(pl.col("what") == "training ms/step, measured")
    assert train.select("setting", "ratio").rows() == [("listops T=512 (runs' mean)", 1.5),
                                                      ("listops T=2000 (runs' mean)", 3.0)]
    assert at.cost_table(runs, None)["ratio"].to_list()[2:] == [99.0]  # main_variant defaults to main


def test_write_tables_and_figures(analyses, tmp_path):
    written, _ = at.write_analysis_tables(analyses, _runs(), None, tmp_path / "tables")
    names = {p.name for p in written}
    assert {f"{t}.{e}" for t in ("kurtosis", "kernel", "truncation", "cost")
            for e in ("md", "csv", "tex")} == names
    md = (tmp_path / "tables" / "kurtosis.md").read_text()
    assert "| listops | 512 | hkt | main | scores | 0 | 2 | 15.00 |" in md
    for out in (suite.kappa_by_level(at.kurtosis_table(analyses), tmp_path / "fig" / "kappa.png"),
                suite.truncation_by_task(analyses, tmp_path / "fig" / "truncation.png")):
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_file_without_length_takes_it_from_its_run_record(tmp_path):
    f = fake_analysis(tmp_path, length=None)
    rec = {"task": "listops", "config": {"task": {"max_length": 1024}}}
    (f.parent / "record.json").write_text(json.dumps(rec))  # run_dir = the file's directory
    assert set(at.load_analyses([f])["length"]) == {1024}
    (f.parent / "record.json").unlink()
    with pytest.raises(AggregateError, match="re-run `hkt analyze`"):
        at.load_analyses([f])


def test_truncation_table_says_whether_its_sample_is_the_main_tables(analyses):
    t = at.truncation_table(analyses)
    assert set(t["examples"].to_list()) == {50}
    runs = pl.DataFrame({"task": ["listops", "listops"], "length": [512, 2000],
                         "test_examples": [32, 32]})
    caption = at.truncation_caption(t, runs)
    assert "different sample" in caption and "50 here, 32 in the main table" in caption
    same = at.truncation_caption(t, runs.with_columns(pl.lit(50).alias("test_examples")))
    assert "same test examples as the main table" in same


def _figure(monkeypatch, fn, *args):
    caught = []
    monkeypatch.setattr(suite, "save", lambda fig, path: caught.append(fig) or path)
    fn(*args, "unused.png")
    return caught[0]


def test_level_axes_have_integer_ticks_and_truncation_a_sensible_span(analyses, monkeypatch):
    for fig in (_figure(monkeypatch, suite.kappa_by_level, at.kurtosis_table(analyses)),
                _figure(monkeypatch, suite.truncation_by_task, analyses)):
        ax = fig.axes[0]
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
    # a near-flat truncation curve (one example in 256) keeps at least the minimum span
    flat = analyses.with_columns(
        pl.when(pl.col("section") == "truncation").then(
            pl.when(pl.col("metric") == "accuracy").then(0.095 + 0.001 * pl.col("level"))
            .otherwise(256.0)).otherwise(pl.col("value")).alias("value"))
    ax = _figure(monkeypatch, suite.truncation_by_task, flat).axes[0]
    lo, hi = ax.get_ylim()
    assert hi - lo >= suite.TRUNCATION_MIN_SPAN_PP
    assert "256 test examples" in ax.get_title()
