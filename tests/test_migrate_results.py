"""scripts/migrate_results.py: a results directory written before 0.2.0 (old config names, keys
added since missing) is brought to the current names once, idempotently, and a file it cannot
read stops it with one line and nothing changed."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "results" / "cpu" / "runs" / "listops"
#: published runs in the current names: an encoder, S4D (its own added keys), a baseline
RUNS = ("mha/main/seed0", "s4d/main/seed0", "majority/main/seed0")
S4D_ADDED = ("n_ssm", "train_B", "dt_lr", "D_weight_decay")


@pytest.fixture(scope="module")
def migrate():
    return load_script("migrate_results")


def rename(node: dict, old: str, new: str) -> dict:
    return {new if k == old else k: v for k, v in node.items()}


def old_config(cfg: dict) -> dict:
    """``cfg`` as a run saved it before 0.2.0: task.name, model.attention, model.attn_dropout,
    none of the keys added since (norm, norm_place, S4D's four)."""
    cfg = {**cfg, "task": rename(cfg["task"], "family", "name")}
    model = cfg["model"]
    if "d_model" in model:
        model = {k: v for k, v in model.items() if k not in ("norm", "norm_place")}
        model = rename(rename(model, "mixer", "attention"), "mixer_dropout", "attn_dropout")
        model["attention"] = {k: v for k, v in model["attention"].items() if k not in S4D_ADDED}
    return {**cfg, "model": model}


def old_results(root: Path) -> Path:
    """A results directory of three published runs, written as before 0.2.0 (the unablated
    variant of a bare `hkt train` called ``default`` in one of them)."""
    for run in RUNS:
        src, dst = PUBLISHED / run, root / "runs" / "listops" / run
        dst.mkdir(parents=True)
        record = json.loads((src / "record.json").read_text())
        record["config"] = old_config(record["config"])
        if run.startswith("mha"):
            record["variant"] = record["config"]["variant"] = "default"
        (dst / "record.json").write_text(json.dumps(record, indent=2) + "\n")
        if (src / "config.yaml").exists():
            cfg = old_config(OmegaConf.to_container(OmegaConf.load(src / "config.yaml")))
            (dst / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    return root


def read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.suffix == ".json" else \
        OmegaConf.to_container(OmegaConf.load(path))


def key_order(node: dict) -> list[str]:
    """``node``'s keys in file order, the nodes below it too (``mixer`` -> ``mixer.state_size``)."""
    out = []
    for key, value in node.items():
        out += [key, *(f"{key}.{sub}" for sub in key_order(value))] if isinstance(value, dict) \
            else [key]
    return out


@pytest.fixture(scope="module")
def current_model_order():
    """The key order of a model node as the current code composes it (``hkt train``'s config)."""
    from hkt.train.run_config import compose_train

    def order(model: str) -> list[str]:
        cfg = compose_train([f"model={model}", "task=listops"])
        return key_order(OmegaConf.to_container(cfg.model))

    return order


def published_text(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_old_results_directory_migrates_to_the_published_form_once(migrate, tmp_path, capsys,
                                                                      current_model_order):
    results = old_results(tmp_path / "results")
    before = published_text(results)
    assert migrate.main(["--check", str(results)]) == 1  # lists, writes nothing
    assert published_text(results) == before
    assert "would migrate run record" in capsys.readouterr().out
    assert migrate.main([str(results)]) == 0
    for run in RUNS:  # the published content (variant default -> main), laid out as now
        for name in ("record.json", "config.yaml"):
            if (PUBLISHED / run / name).exists():
                got, want = (read(d / run / name) for d in (results / "runs/listops", PUBLISHED))
                cfg = got if name == "config.yaml" else got["config"]
                if "d_model" in cfg["model"]:  # an encoder's (a baseline's has no added keys)
                    assert key_order(cfg["model"]) == current_model_order(cfg["model"]["name"]), \
                        (run, name)
                if run.startswith("mha") and name == "record.json":
                    assert got["variant"] == got["config"]["variant"] == "main"
                    continue
                assert got == want, (run, name)
    # migrated records are read by the current code: valid records, current names
    from hkt.run_record import load_record

    assert load_record(results / "runs/listops/mha/main/seed0")["config"]["model"]["norm"] == "layer"
    # twice: nothing left to change
    after = published_text(results)
    capsys.readouterr()
    assert migrate.main(["--check", str(results)]) == 0
    assert migrate.main([str(results)]) == 0
    assert published_text(results) == after
    assert "nothing to migrate" in capsys.readouterr().out


def test_a_corrupt_file_stops_it_in_one_line_with_nothing_changed(migrate, tmp_path, capsys):
    results = old_results(tmp_path / "results")
    bad = results / "runs/listops/s4d/main/seed0/record.json"
    bad.write_text('{"task": "listops", ')  # cut short
    before = published_text(results)
    assert migrate.main([str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"migrate_results: error: cannot read run record {bad}")
    assert published_text(results) == before  # the readable old files too
    (results / "runs/listops/s4d/main/seed0/config.yaml").write_text("model: [unclosed\n")
    bad.write_text("{}")
    assert migrate.main([str(results)]) == 2
    assert "cannot read run config" in capsys.readouterr().err


def test_no_suite_as_spelt_before_0_2_0_becomes_null_and_none(migrate, tmp_path):
    """Records and MLflow tags that spelt "no suite" ``custom``, ``mixed`` or empty, and records
    that named their suite only in ``config.tracking.suite``, read as the code reads them now."""
    from hkt.provenance import NO_SUITE, SuiteRun

    base = json.loads((PUBLISHED / RUNS[0] / "record.json").read_text())
    cases = {"custom": ({"suite": "custom"}, None), "mixed": ({"suite": "mixed"}, None),
             "empty": ({"suite": ""}, None), "named": ({"suite": "cpu"}, "cpu"),
             "config-cpu": ({"tracking": "cpu"}, "cpu"),
             "config-custom": ({"tracking": "custom"}, None)}
    for name, (fields, _) in cases.items():
        record = {k: v for k, v in base.items() if k != "suite"}
        if "tracking" in fields:
            record["config"] = {**record["config"], "tracking": {"suite": fields["tracking"]}}
        else:
            record["suite"] = fields["suite"]
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "record.json").write_text(json.dumps(record))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.create_experiment("hkt-listops", artifact_location=(tmp_path / "art").as_uri())
    ids = {}
    for suite in ("custom", "mixed", "", "cpu"):
        ids[suite] = client.create_run(exp, tags={"suite": suite}).info.run_id
    assert migrate.main([str(tmp_path)]) == 0
    for name, (_, want) in cases.items():
        got = json.loads((tmp_path / "runs" / name / "record.json").read_text())
        assert got["suite"] == want, name
        assert SuiteRun.from_record(got).suite == (want or NO_SUITE)
    tags = {suite: client.get_run(rid).data.tags.get("suite") for suite, rid in ids.items()}
    assert tags == {"custom": NO_SUITE, "mixed": NO_SUITE, "": NO_SUITE, "cpu": "cpu"}
    assert migrate.main(["--check", str(tmp_path)]) == 0  # once


def test_an_old_mlflow_stores_validation_metrics_take_the_current_form(migrate, tmp_path):
    """Before 0.2.0 a run logged its curve as metric ``val_acc`` and its best as metric
    ``val_accuracy``, once; now the curve is ``val_accuracy`` and the best the tag
    ``best_val_accuracy``, and the reader knows only that form. A run resumed across the
    release (the old curve, then the new one, and the tag) keeps its whole curve."""
    from mlflow.tracking import MlflowClient

    from hkt.report.mlflow_runs import runs_from_mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("hkt-listops", artifact_location=(tmp_path / "art").as_uri())

    def run(seed: int, model: str, metrics: list[tuple[str, float, int]], best: str | None) -> str:
        rid = client.create_run(exp, tags={"task": "listops", "model": model, "variant": "main",
                                           "seed": str(seed)}).info.run_id
        client.log_param(rid, "task.max_length", 512)
        for key, value, step in metrics:
            client.log_metric(rid, key, value, step=step)
        if best is not None:
            client.set_tag(rid, "best_val_accuracy", best)
        client.set_terminated(rid, "FINISHED")
        return rid

    trained = run(0, "hkt", [("val_acc", 0.2, 6), ("val_acc", 0.5, 12), ("val_acc", 0.4, 18),
                             ("val_accuracy", 0.5, 18), ("test_accuracy", 0.45, 18)], None)
    baseline = run(0, "majority", [("val_accuracy", 0.17, 0), ("test_accuracy", 0.16, 0)], None)
    resumed = run(1, "hkt", [("val_acc", 0.3, 6), ("val_accuracy", 0.6, 12),
                             ("test_accuracy", 0.55, 12)], "0.6")
    current = run(2, "hkt", [("val_accuracy", 0.1, 6), ("val_accuracy", 0.7, 12),
                             ("test_accuracy", 0.65, 12)], "0.7")
    assert migrate.main([str(tmp_path)]) == 0

    def curve(rid: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(rid, "val_accuracy"))

    assert curve(trained) == [(6, 0.2), (12, 0.5), (18, 0.4)]  # the curve, not the best
    assert curve(baseline) == []
    assert curve(resumed) == [(6, 0.3), (12, 0.6)]
    assert curve(current) == [(6, 0.1), (12, 0.7)]
    for rid, best, latest in ((trained, "0.5", 0.4), (baseline, "0.17", None),
                              (resumed, "0.6", 0.6), (current, "0.7", 0.7)):
        data = client.get_run(rid).data
        assert "val_acc" not in data.metrics
        assert data.tags["best_val_accuracy"] == best
        assert data.metrics.get("val_accuracy") == latest
    runs = runs_from_mlflow(uri)[0].sort("model", "seed")
    assert runs["val_accuracy"].to_list() == [0.5, 0.6, 0.7, 0.17]
    assert migrate.main(["--check", str(tmp_path)]) == 0  # once


def test_a_checkpoint_migrates_and_loads_strictly_with_the_same_outputs(migrate, tmp_path):
    """A checkpoint of before the mixer rename (``blocks.N.attn.…``, config.model.attention)
    loads into today's model after migration, and computes what the saved model did."""
    from hkt.models import build_model
    from hkt.train.checkpoint import load_checkpoint

    spec = {"name": "mha", "d_model": 8, "n_heads": 2, "d_ffn": 16, "n_layers": 2}
    torch.manual_seed(1)
    saved = build_model(spec, vocab_size=12, num_classes=3, max_length=16).double().eval()
    old_state = {k.replace(".mixer.", ".attn."): v for k, v in saved.state_dict().items()}
    assert any(".attn." in k for k in old_state)
    path = tmp_path / "run" / "checkpoints" / "best.pt"
    path.parent.mkdir(parents=True)
    old_spec = {**spec, "attention": {}, "attn_dropout": 0.0}
    torch.save({"model": old_state, "config": {"model": old_spec, "task": {"name": "listops"}}}, path)
    assert migrate.main([str(tmp_path)]) == 0
    ck = load_checkpoint(path)
    assert ck["config"]["model"] == {**spec, "mixer": {}, "mixer_dropout": 0.0, "norm": "layer",
                                     "norm_place": "pre"}
    assert ck["config"]["task"] == {"family": "listops"}
    torch.manual_seed(2)
    loaded = build_model(ck["config"]["model"], vocab_size=12, num_classes=3, max_length=16).double().eval()
    tokens = torch.randint(1, 12, (3, 16), generator=torch.Generator().manual_seed(3))
    mask = torch.arange(16)[None, :] < torch.tensor([16, 9, 4])[:, None]
    assert not torch.equal(loaded(tokens, mask), saved(tokens, mask))  # the test can fail
    assert not loaded.load_state_dict(ck["model"]).missing_keys  # strict: nothing left over
    assert torch.equal(loaded(tokens, mask), saved(tokens, mask))
    assert migrate.main(["--check", str(tmp_path)]) == 0  # once


def test_a_corrupt_checkpoint_stops_it_in_one_line(migrate, tmp_path, capsys):
    """hkt.train.checkpoint.load_checkpoint's own errors (an empty file, a cut one), named in
    one line, and nothing written."""
    path = tmp_path / "run" / "checkpoints" / "last.pt"
    path.parent.mkdir(parents=True)
    for content, why in ((b"", "the file is empty"), (b"PK\x03\x04cut", "cannot load checkpoint")):
        path.write_bytes(content)
        assert migrate.main([str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and why in err and str(path) in err and "migrate again" in err
        assert path.read_bytes() == content


def test_the_old_digest_form_is_the_one_of_before_0_2_0(migrate):
    """How the workflow digested a config before 0.2.0 (the rerun triggers it recorded): the
    renamed keys under their old names, the added keys left out at their value of before."""
    now = {"task": {"family": "x"}, "model": {"name": "mha", "d_model": 8, "mixer": {},
                                              "mixer_dropout": 0.1, "norm": "layer",
                                              "norm_place": "pre"}}
    assert migrate._old_digest_form(now) == {
        "task": {"name": "x"}, "model": {"name": "mha", "d_model": 8, "attention": {},
                                         "attn_dropout": 0.1}}
    other = {**now, "model": {**now["model"], "norm": "batch"}}  # not the value of before: kept
    assert migrate._old_digest_form(other)["model"]["norm"] == "batch"


def test_the_old_digest_is_the_one_the_workflow_recorded_before_0_2_0(migrate):
    """Golden digests, computed once with the code of 8faa759 (hkt.workflow.job_configs.config_digest
    over hkt.renames' old names): the migration finds a finished job by this value, so a drift
    of the old form from what was recorded would rerun every job silently."""
    from hkt.train.run_config import strip_for_compare
    from hkt.workflow.job_configs import config_digest

    cfg = {"seed": 0, "variant": "main", "train": {"max_steps": 12, "batch_size": 8},
           "task": {"family": "listops", "max_length": 512, "id": "listops"},
           "model": {"name": "hkt", "d_model": 16, "mixer": {"levels": 3, "stride": 2},
                     "mixer_dropout": 0.0, "norm": "layer", "norm_place": "pre"},
           "tracking": {"enabled": True}}
    batch = {**cfg, "model": {**cfg["model"], "norm": "batch"}}  # an added key, not at its old value
    for c, before in ((cfg, "37b3b9ce15dde8ab907ebfd7a2a37709"),
                      (batch, "6b0d266561bb347d590ce06660cfea40")):
        assert config_digest(migrate._old_digest_form(strip_for_compare(c))) == before
        assert config_digest(c) != before  # today's digest takes the current names


def test_snakemakes_record_of_a_finished_training_job_takes_the_current_spelling(
        migrate, tmp_path, monkeypatch):
    """What Snakemake recorded of a training job before 0.2.0 (its params: the overrides in the
    old spelling with ``tracking.suite=``, the digest of the old form) becomes what the workflow
    records now, so the job is not rerun; a job whose config changed beyond the names keeps its
    record (and reruns)."""
    from snakemake.persistence import PersistenceBase as Persistence

    from hkt.workflow.job_configs import train_config_digest

    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    now = ["task=listops", "model=hkt", "profile=smoke", "seed=0", "variant=levels1",
           "model.mixer.stride=2", "train.max_steps=4"]
    old = ["task=listops", "model=hkt", "profile=smoke", "seed=0", "experiment=levels1",
           "tracking.suite=smoke", "model.attention.stride=2", "train.max_steps=4"]
    data, out = "results/data/listops", "results/runs/listops/hkt/levels1/seed0"
    seedless = [w for w in now if w != "seed=0"]  # the workflow digests a config without its seed
    _, old_digest = migrate._digests(tuple(seedless))

    def record(target: str, digest: str) -> Path:
        meta = tmp_path / ".snakemake" / "metadata"
        meta.mkdir(parents=True, exist_ok=True)
        f = meta / base64.urlsafe_b64encode(target.encode()).decode()
        params = sorted(map(repr, (data, out, old, digest)))
        f.write_text(json.dumps({"rule": "train", "params": params, "record_format_version": 6}))
        return f

    same = record(f"{out}/record.json", old_digest)
    changed = record("results/runs/listops/hkt/levels1/seed1/record.json", "0" * 32)
    elsewhere = record("other/runs/listops/hkt/levels1/seed0/record.json", old_digest)
    untouched = {p: p.read_text() for p in (changed, elsewhere)}
    assert migrate.main([str(results)]) == 0
    want = sorted(Persistence._serialize_param_builtin(None, v)
                  for v in (data, out, now, "smoke", train_config_digest(seedless)))
    assert json.loads(same.read_text())["params"] == want
    assert {p: p.read_text() for p in untouched} == untouched
    assert migrate.main(["--check", str(results)]) == 0  # once


def test_the_publications_hold_the_current_names(migrate, capsys):
    """docs/results/ was migrated (0.2.0): nothing in a publication is left to change."""
    pubs = sorted(str(p) for p in (ROOT / "docs" / "results").iterdir() if p.is_dir())
    assert migrate.main(["--check", "--snakemake-dir", str(ROOT / "docs"), *pubs]) == 0, \
        capsys.readouterr().out


def test_a_results_directory_a_workflow_is_running_in_is_refused(migrate, tmp_path, capsys):
    import subprocess

    results = old_results(tmp_path / "results")
    lock = results / ".workflow.lock"
    lock.write_text("{}")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = published_text(results)
        assert migrate.main([str(results)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "migrate it when the workflow has stopped" in err
        assert published_text(results) == before
    finally:
        holder.kill()
        holder.wait()
    assert migrate.main([str(results)]) == 0  # the lock released: migrated
