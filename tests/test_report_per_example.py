"""Per-example readings (hkt/report/example_runs.py, paired.py, rule_agreement.py,
per_example.py, buckets.py): from
synthetic predictions in the runs' predictions.parquet schema and a small generated ListOps
task, each reading equals what the predictions say when counted by hand; runs without
predictions leave every table as it was; predictions on other data stop with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import load_script
from test_baselines_listops_rules import SMALL
from test_report_aggregate import make_record

from hkt.cli.main import main as hkt_main
from hkt.facts.examples import load_examples
from hkt.data_layout import EXAMPLES
from hkt.data.prepare import prepare_task
from hkt.report import buckets, example_runs, report_settings
from hkt.predictions import (PREDICTIONS_NAME, RECORD_FIELD, SPLITS, SplitPredictions, one_hot,
                             write_predictions)
from hkt.report.tables import difference_note

RULES = ("root_op_prior", "depth1_rule", "depth2_rule", "depth3_rule", "exact_rule")
NEW_TABLES = {"paired", "rule_agreement", "breakdown", "breakdown_gap"}


# ------------------------------------------------------------------------------- the readings

@pytest.fixture(scope="module")
def listops(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("per-example") / "data" / "listops"
    # short trees too (min_length 5): the suites' trees (128 < length) nearly all have depth 9
    prepare_task("listops", out, overrides=[*SMALL, "prepare.splits.test=300",
                                            "prepare.min_length=5"])
    return out


def _predictions(run_dir: Path, facts: pl.DataFrame, pred: np.ndarray) -> dict[str, str]:
    """A run's predictions.parquet, written as every run writes it (probabilities one-hot);
    returns the record's field naming it."""
    split = {name: (facts["split"] == name).to_numpy() for name in SPLITS}
    return write_predictions({name: SplitPredictions(
        rows=facts["row"].to_numpy()[m], labels=facts["label"].to_numpy()[m],
        preds=pred.astype(np.int64)[m], probs=one_hot(pred.astype(np.int64)[m], 10))
        for name, m in split.items()}, run_dir, 10)


def _suite(root: Path, data: Path, *, predictions: bool = True, models=("hkt", "mha"),
           rules: bool = False) -> Path:
    """Records of HKT and MHA (3 seeds) and a convolution on ``data``: MHA answers the
    root-operator prior, HKT the label on a seed-dependent share of the deeper trees."""
    facts = load_examples(data)  # made on first need: prepare_task alone does not write them
    runs = root / "runs"
    for model in models:
        for seed in range(3):
            rng = np.random.default_rng(seed)
            pred = facts["root_op_prior"].to_numpy().copy()
            if model == "hkt":
                learn = (facts["depth"].to_numpy() >= 3) & (rng.random(len(facts)) < 0.7)
                pred[learn] = facts["label"].to_numpy()[learn]
            elif model == "conv":
                pred = (pred + 1) % 10
            test = facts["split"] == "test"
            right = pred == facts["label"].to_numpy()
            rec = make_record(model=model, seed=seed, val=float(right[~test.to_numpy()].mean()),
                              test=float(right[test.to_numpy()].mean()),
                              test_examples=int(test.sum()), data_dir=str(data), steps=1000)
            d = runs / "listops" / model / "main" / f"seed{seed}"
            d.mkdir(parents=True, exist_ok=True)
            if predictions:
                rec[RECORD_FIELD] = _predictions(d, facts, pred)
            (d / "record.json").write_text(json.dumps(rec))
    for rule in RULES if rules else ():  # the rule references, as their baselines record them
        right = (facts[rule] == facts["label"]).to_numpy()
        test = (facts["split"] == "test").to_numpy()
        rec = make_record(model=rule, seed=0, val=float(right[~test].mean()),
                          test=float(right[test].mean()), test_examples=int(test.sum()),
                          data_dir=str(data), n_params=0, external=f"hkt.baselines.{rule}")
        d = runs / "listops" / rule / "main" / "seed0"
        d.mkdir(parents=True, exist_ok=True)
        if predictions:
            rec[RECORD_FIELD] = _predictions(d, facts, facts[rule].to_numpy())
        (d / "record.json").write_text(json.dumps(rec))
    return runs


def _aggregate(runs: Path, out: Path, *extra: str) -> Path:
    assert hkt_main(["aggregate", str(runs), "--out", str(out), *extra]) == 0
    return out


@pytest.fixture(scope="module")
def aggregated(listops, tmp_path_factory) -> tuple[Path, pl.DataFrame]:
    root = tmp_path_factory.mktemp("agg")
    runs = _suite(root, listops, models=("hkt", "mha", "conv"), rules=True)
    return _aggregate(runs, root / "results"), pl.read_parquet(listops / EXAMPLES)


def _test(facts: pl.DataFrame) -> pl.DataFrame:
    return facts.filter(pl.col("split") == "test").sort("row")


def test_the_rule_agreement_is_what_the_predictions_say(aggregated):
    out, facts = aggregated
    test = _test(facts)
    t = pl.read_csv(out / "tables" / "rule_agreement.csv")
    mha = t.filter(pl.col("model") == "mha").row(0, named=True)
    assert mha["agree_root_op_prior"] == pytest.approx(100.0)  # MHA answers the prior
    assert mha["prior_wrong_mean"] == pytest.approx(0.0)
    wrong = test["root_op_prior"] != test["label"]
    assert mha["prior_wrong_examples"] == int(wrong.sum())
    depth1 = (test["depth1_rule"] == test["root_op_prior"]).mean() * 100
    assert mha["agree_depth1_rule"] == pytest.approx(depth1)
    hkt = t.filter(pl.col("model") == "hkt").row(0, named=True)
    assert 0 < hkt["prior_wrong_mean"] <= 100 and hkt["agree_root_op_prior"] < 100


def test_the_breakdown_by_depth_is_counted_by_hand(aggregated):
    out, facts = aggregated
    test = _test(facts)
    t = pl.read_csv(out / "tables" / "breakdown.csv", schema_overrides={"bucket": pl.String})
    depth = t.filter((pl.col("facet") == "depth") & (pl.col("model") == "exact_rule"))
    assert set(depth["accuracy_mean"]) == {100.0}
    prior = t.filter((pl.col("facet") == "depth") & (pl.col("model") == "root_op_prior"))
    for r in prior.iter_rows(named=True):
        here = test.filter(pl.col("depth") == int(r["bucket"]))
        assert r["examples"] == len(here)
        assert r["accuracy_mean"] == pytest.approx(
            100 * (here["root_op_prior"] == here["label"]).mean())
    assert {"depth", "depth group", "answer depth", "length quartile",
            "root operator"} == set(t["facet"])
    # answer depth: MHA (the prior) is right exactly on the examples the prior answers
    needed = t.filter((pl.col("facet") == "answer depth") & (pl.col("model") == "mha"))
    assert needed.filter(pl.col("bucket") == "the prior")["accuracy_mean"].to_list() == [100.0]
    assert set(needed.filter(pl.col("bucket") != "the prior")["accuracy_mean"]) == {0.0}
    quartiles = t.filter((pl.col("facet") == "length quartile") & (pl.col("model") == "mha"))
    assert quartiles["examples"].sum() == len(test)
    assert (out / "figures" / "accuracy_by_depth.png").is_file()


def test_the_gap_reads_paired_and_says_so(aggregated, listops, tmp_path):
    out, _ = aggregated
    paired = pl.read_csv(out / "tables" / "paired.csv")
    gap = pl.read_csv(out / "tables" / "gap.csv")
    row = paired.filter((pl.col("model") == "hkt") & (pl.col("versus") == "mha")).row(0, named=True)
    assert gap["paired_ci_low_pp"][0] == pytest.approx(row["paired_ci_low_pp"])
    assert gap["paired_ci_high_pp"][0] == pytest.approx(row["paired_ci_high_pp"])
    # the error model's interval holds Welch's over seeds; the reading given these runs is
    # narrower than either and carries no verdict
    assert row["paired_ci_low_pp"] <= row["ci_low_pp"] and row["ci_high_pp"] <= row["paired_ci_high_pp"]
    assert row["paired_ci_high_pp"] - row["paired_ci_low_pp"] > \
        row["given_runs_ci_high_pp"] - row["given_runs_ci_low_pp"]
    note = (out / "tables" / "gap.md").read_text().split("\n")[0]
    assert "'seeds + test set, paired' (the primary reading where present; listops T=512)" in note
    assert "given these runs" in (out / "tables" / "paired.md").read_text()
    controls = pl.read_csv(out / "tables" / "controls.csv")
    assert len(paired) == 1 + len(controls)  # HKT − MHA, and conv against each
    summary = (out / "summary.md").read_text()
    assert "comes from the hierarchy of operations" in summary



def test_the_ablation_reads_paired_as_the_gap_does(listops, tmp_path):
    """The no-hierarchy row (derived: the MHA runs) and MHA's row read the MHA runs'
    predictions against HKT's: the gap's paired interval, mirrored; the full model has none;
    the hierarchy claim reads it."""
    out = _aggregate(_suite(tmp_path, listops), tmp_path / "results", "--derived", "levels1=mha")
    gap = pl.read_csv(out / "tables" / "gap.csv").row(0, named=True)
    abl = pl.read_csv(out / "tables" / "ablation.csv")
    rows = {(r["model"], r["variant"]): r for r in abl.iter_rows(named=True)}
    assert rows[("hkt", "main")]["paired_ci_low_pp"] is None
    for key in (("hkt", "levels1"), ("mha", "main")):
        assert rows[key]["paired_ci_low_pp"] == pytest.approx(-gap["paired_ci_high_pp"])
        assert rows[key]["paired_ci_high_pp"] == pytest.approx(-gap["paired_ci_low_pp"])
        assert rows[key]["paired_p_value"] == pytest.approx(gap["paired_p_value"])
    md = (out / "tables" / "ablation.md").read_text()
    assert "'seeds + test set, paired' (the primary reading where present; listops T=512)" in md
    assert "95% CI, seeds + test set, paired (pp)" in md.splitlines()[2]
    claim = next(line for line in (out / "summary.md").read_text().splitlines()
                 if line.startswith("| Removing the hierarchy"))
    assert "seeds + test set, paired [" in claim


def test_the_rule_rows_read_example_by_example(aggregated):
    """MHA answers the prior on every example: paired, it sits at the prior with a zero-width
    interval, agreeing on 100% and right nowhere the prior is wrong."""
    out, _ = aggregated
    rows = {line.split(" reaches")[0].split()[-1]: line
            for line in (out / "summary.md").read_text().splitlines()
            if line.startswith("| Which rule reference")}
    assert set(rows) == {"HKT", "MHA", "CONV"}
    assert ("at the root-operator prior (+0.00 pp, 95% CI [+0.00, +0.00], seeds + test set, "
            "paired); it answers "
            "as the root-operator prior on 100.00 ± 0.00% of the test examples, and gets "
            "0.00 ± 0.00% right") in rows["MHA"]
    assert rows["MHA"].rstrip(" |").endswith("| at the root-operator prior")
    assert "above the" in rows["HKT"] and "paired" in rows["HKT"]


def test_the_mechanism_reads_a_gain_that_lives_on_deep_trees(aggregated):
    """HKT gains only on trees of depth ≥ 3: the deepest third's gain exceeds the shallowest's."""
    out, _ = aggregated
    rows = [line for line in (out / "summary.md").read_text().splitlines()
            if "hierarchy of operations: HKT − MHA is larger" in line]
    assert [("by tree depth" in r, "by answer depth" in r) for r in rows] == [(True, False),
                                                                             (False, True)]
    assert rows[0].rstrip(" |").endswith("supports")
    # here one answer depth (the depth-1 rule) holds 127 of the 300 examples: both ends
    assert rows[1].rstrip(" |").endswith("cannot tell") and "127 of the 300" in rows[1]


def test_one_depth_at_both_ends_reads_cannot_tell_and_says_why():
    """Our suites' trees nearly all have depth 9: the tree-depth row cannot split them, and the
    answer-depth row still reads."""
    n = 60
    rng = np.random.default_rng(0)
    label = rng.integers(0, 10, n)
    facts = pl.DataFrame({"split": ["test"] * n, "row": np.arange(n), "label": label,
                          "depth": np.full(n, 9),
                          **{rule: np.where(np.arange(n) % 5 == i, label, (label + 1) % 10)
                             for i, rule in enumerate(RULES[:4])},
                          "exact_rule": label})
    r, runs = _readings("listops", facts, {"hkt": [label, label], "mha": [(label + 1) % 10] * 2})
    t = buckets.mechanism_table(r, runs)
    tree = t.filter(pl.col("measure") == "tree depth").row(0, named=True)
    assert tree["difference_pp"] is None
    assert tree["reason"].startswith("60 of the 60 test examples are depth 9")
    assert t.filter(pl.col("measure") == "answer depth")["difference_pp"][0] == 0.0
    from hkt.report.claims.mechanism import mechanism_claim

    rows = mechanism_claim(t)
    assert rows[0].reading == "cannot tell" and "no reading: 60 of the 60" in rows[0].ours


def test_runs_without_predictions_leave_every_table_as_it_was(listops, tmp_path):
    runs = _suite(tmp_path, listops, predictions=False)
    out = _aggregate(runs, tmp_path / "results")
    assert not NEW_TABLES & {p.stem for p in (out / "tables").iterdir()}
    assert not (out / "figures" / "accuracy_by_depth.png").exists()
    assert difference_note() in (out / "tables" / "gap.md").read_text()
    assert "'seeds + test set, paired': none here" in (out / "tables" / "gap.md").read_text()
    assert "hierarchy of operations: HKT" not in (out / "summary.md").read_text()


def test_predictions_on_other_data_stop_with_one_line(listops, tmp_path, capsys):
    """Predictions that are their record's, read against data whose labels are not the ones
    they were made on (`--data` of another preparation): one line naming the file."""
    runs = _suite(tmp_path, listops, models=("hkt",))
    data = tmp_path / "other" / "listops"
    shutil.copytree(listops, data)
    facts = pl.read_parquet(data / EXAMPLES)
    facts.with_columns((pl.col("label") + 1) % 10).write_parquet(data / EXAMPLES)
    path = runs / "listops" / "hkt" / "main" / "seed0" / PREDICTIONS_NAME
    assert hkt_main(["aggregate", str(runs), "--out", str(tmp_path / "out"),
                     "--data", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err
    assert "predictions were made on other data" in err and str(path) in err


def test_a_publication_regenerates_its_readings_from_its_own_files(listops, tmp_path):
    """A publication-like folder (records, predictions, the data's metadata and facts, no
    splits): `publish_results.py --retable` rebuilds every per-example table from it."""
    dest = tmp_path / "tiny"
    runs = _suite(tmp_path / "made", listops)
    shutil.copytree(runs, dest / "runs")
    (dest / "data" / "listops").mkdir(parents=True)
    shutil.copy(listops / EXAMPLES, dest / "data" / "listops" / EXAMPLES)
    (dest / "data" / "listops" / "metadata.json").write_text("{}")
    load_script("publish_results").write_manifest(dest)  # sealed, as publishing seals it
    load_script("publish_results").retable(dest)
    assert NEW_TABLES <= {p.stem for p in (dest / "tables").iterdir()}
    first = (dest / "tables" / "breakdown_gap.csv").read_bytes()
    load_script("publish_results").retable(dest)
    assert (dest / "tables" / "breakdown_gap.csv").read_bytes() == first  # seeded: byte for byte


def test_settings_come_from_the_report_config_and_a_bad_one_is_named(tmp_path):
    s = report_settings.load_settings()
    assert s.depth_groups == 3 and s.length_buckets == 4 and 0 < s.confidence < 1
    assert s.min_bucket_examples == 30 and s.named_runs == 8
    bad = tmp_path / "report.yaml"
    bad.write_text("confidence: 0.95\nper_example: {depth_groups: 3, length_buckets: 4, "
                   "min_bucket_examples: 0, named_runs: 8}\n")
    with pytest.raises(Exception, match="per_example.min_bucket_examples"):
        report_settings.load_settings(bad)
    bad.write_text("confidence: 95\nper_example: {depth_groups: 3, length_buckets: 4, "
                   "min_bucket_examples: 30, named_runs: 8}\n")
    with pytest.raises(Exception, match="confidence"):
        report_settings.load_settings(bad)
    bad.write_text("confidence: 0.95\nper_example: {depth_groups: 3, length_buckets: 4, "
                   "min_bucket_examples: 30}\n")
    with pytest.raises(Exception, match="per_example.named_runs"):
        report_settings.load_settings(bad)


def _readings(task: str, facts: pl.DataFrame, preds: dict[str, list[np.ndarray]]):
    """Readings of runs (model -> one prediction array per seed) on ``facts``' test rows."""
    rows = facts["row"].to_numpy()
    label = facts["label"].to_numpy()
    found, frame = {}, []
    for model, seeds in preds.items():
        for seed, pred in enumerate(seeds):
            key = (task, 1024, model, "main", seed)
            found[key] = example_runs.Run(rows, pred, pred == label)
            frame.append(dict(zip(("task", "length", "model", "variant", "seed"), key)))
    return (example_runs.Readings(found, {(task, 1024): facts}, report_settings.load_settings()),
            pl.DataFrame(frame))


def test_imdb_reads_by_length_quartile_and_cifar_by_class():
    n = 40
    imdb = pl.DataFrame({"split": ["test"] * n, "row": np.arange(n), "label": np.arange(n) % 2,
                         "length": np.arange(n) * 10 + 5})
    long = imdb["length"].to_numpy() > 200  # HKT right on the long reviews only; MHA nowhere
    hkt = np.where(long, imdb["label"].to_numpy(), 1 - imdb["label"].to_numpy())
    r, runs = _readings("imdb", imdb, {"hkt": [hkt, hkt], "mha": [1 - imdb["label"].to_numpy()] * 2})
    t = buckets.breakdown_table(r, runs)
    assert set(t["facet"]) == {"length quartile"}
    q = t.filter(pl.col("model") == "hkt").sort("order")
    assert q["examples"].to_list() == [10, 10, 10, 10]
    assert q["bucket"].to_list() == ["Q1: 5–95", "Q2: 105–195", "Q3: 205–295", "Q4: 305–395"]
    assert q["accuracy_mean"].to_list() == [0.0, 0.0, 100.0, 100.0]
    gap = buckets.breakdown_gap_table(r, runs).sort("order")
    assert gap["difference_pp"].to_list() == [0.0, 0.0, 100.0, 100.0]
    assert buckets.mechanism_table(r, runs).is_empty()  # no tree depth: no mechanism row
    cifar = pl.DataFrame({"split": ["test"] * 6, "row": np.arange(6), "label": [0, 1, 2, 0, 1, 2],
                          "class": ["cat", "dog", "ship"] * 2})
    pred = np.array([0, 1, 0, 0, 0, 0])
    r, runs = _readings("cifar10", cifar, {"hkt": [pred]})
    t = buckets.breakdown_table(r, runs).sort("order")
    assert t.select("bucket", "examples", "accuracy_mean").rows() == [
        ("cat", 2, 100.0), ("dog", 2, 50.0), ("ship", 2, 0.0)]


def test_a_task_without_facts_is_read_paired_and_its_tables_say_why(listops, tmp_path):
    """Predictions whose data folder holds neither facts nor splits: the paired differences
    still read, and the per-fact tables name the task and where its facts were looked for."""
    data = tmp_path / "gone" / "listops"
    shutil.copytree(listops, data)
    runs = _suite(tmp_path, data)
    shutil.rmtree(data)
    out = _aggregate(runs, tmp_path / "results")
    assert len(pl.read_csv(out / "tables" / "paired.csv")) == 1
    assert pl.read_csv(out / "tables" / "rule_agreement.csv").is_empty()
    note = (out / "tables" / "breakdown.md").read_text().split("\n")[0]
    assert f"No per-example facts (examples.parquet, nor the prepared splits to make them from) " \
           f"for listops T=512 (looked for in {data})" in note


def test_the_per_example_products_are_written_where_predictions_are_and_declared_on_request(
        aggregated):
    """hkt.report.aggregate_outputs: with predictions, every per-example file is written (and has its
    report caption); the workflow declares them only when asked (its runs write predictions)."""
    from hkt.report.aggregate_outputs import PRODUCTS, aggregate_files

    out, _ = aggregated
    with_them = set(aggregate_files(out, analyses=False, predictions=True))
    without = set(aggregate_files(out, analyses=False))
    new = with_them - without
    assert {p.stem for p in new} == NEW_TABLES | {"accuracy_by_depth"}
    assert all(p.is_file() for p in new)
    root = Path(__file__).resolve().parents[1]
    for p in PRODUCTS:
        if p.predictions:
            assert (root / "workflow" / "report" / f"{p.caption}.rst").is_file(), p.name


def test_an_unreadable_facts_or_predictions_file_is_one_line_naming_it(listops, tmp_path, capsys):
    runs = _suite(tmp_path, listops, models=("hkt",))
    path = runs / "listops" / "hkt" / "main" / "seed0" / PREDICTIONS_NAME
    pl.read_parquet(path).drop("pred").write_parquet(path)
    assert hkt_main(["aggregate", str(runs), "--out", str(tmp_path / "out")]) == 0
    # the synthetic runs have no history.csv: one warning each; the altered file's run is
    # named in one line and read unpaired (tests/test_faults_predictions.py)
    err = [e for e in capsys.readouterr().err.strip().splitlines() if "history.csv" not in e]
    assert len(err) == 1 and str(path) in err[0] and "read unpaired" in err[0]
    data = tmp_path / "data" / "listops"
    shutil.copytree(listops, data)
    (data / EXAMPLES).write_bytes(b"PAR1 not parquet")
    runs = _suite(tmp_path / "two", listops, models=("hkt",))
    for rec in runs.rglob("record.json"):
        rec.write_text(rec.read_text().replace(str(listops), str(data)))
    assert hkt_main(["aggregate", str(runs), "--out", str(tmp_path / "out2")]) == 2
    err = [e for e in capsys.readouterr().err.strip().splitlines() if not e.startswith("hkt: warning:")]
    assert len(err) == 1 and f"{data / EXAMPLES} is not a readable Parquet file" in err[0]


def test_a_table_with_paired_and_unpaired_rows_says_which_is_which(listops, tmp_path):
    """ListOps runs with predictions, IMDB runs without: the gap's note names listops as paired
    and keeps the unpaired note for the rest; the IMDB row keeps its unpaired interval."""
    runs = _suite(tmp_path, listops)
    for model in ("hkt", "mha"):
        for seed in range(3):
            rec = make_record(task="imdb", length=1024, model=model, seed=seed,
                              test=0.6 + 0.01 * seed + (0.05 if model == "hkt" else 0),
                              val=0.6, test_examples=25000, steps=1000)
            d = runs / "imdb" / model / "main" / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "record.json").write_text(json.dumps(rec))
    out = _aggregate(runs, tmp_path / "results")
    note = (out / "tables" / "gap.md").read_text().split("\n")[0]
    assert "(the primary reading where present; listops T=512)" in note
    assert difference_note() in note
    assert "imdb/hkt/main/seed0" in (out / "tables" / "paired.md").read_text()  # named as unread
    gap = pl.read_csv(out / "tables" / "gap.csv")
    imdb = gap.filter(pl.col("task") == "imdb").row(0, named=True)
    alone = pl.read_csv(_aggregate(runs / "imdb", tmp_path / "imdb") / "tables" / "gap.csv")
    assert imdb["ts_ci_low_pp"] == alone["ts_ci_low_pp"][0]  # the unpaired interval, as it was
    assert imdb["paired_ci_low_pp"] is None


def test_a_caption_names_as_many_unread_runs_as_the_settings_say():
    """per_example.named_runs: the caption names that many runs without predictions, then counts."""
    from dataclasses import replace

    s = report_settings.load_settings()
    missing = [f"listops/mha/main/seed{i}" for i in range(10)]
    note = example_runs.Readings({}, {}, s, missing=missing).notes()
    assert f"{', '.join(missing[:8])} and 2 more." in note and missing[8] not in note
    note = example_runs.Readings({}, {}, replace(s, named_runs=3), missing=missing).notes()
    assert note.endswith(f"read nowhere here: {', '.join(missing[:3])} and 7 more.")
