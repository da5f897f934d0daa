"""What a careless user types gets one clear line, with the fix (issue 61, items 7 and 9; issue
64, items 7 and 9): HKT levels the sequence cannot hold, a job that died of an argument error,
a list passed the Snakemake way, a suite named on the command line that does not exist, a
mistyped name (with the name it is close to), and a ``--data`` that does not exist (before the
resolved config, not after it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import write_prepared_data
from test_status import results, status_of  # noqa: F401 - results: a fixture, a suite mid-way
from test_workflow import ROOT, job_stats, snakemake

from hkt.cli.main import main
from hkt.errors import ConfigError, ConfigValueError

SUITES = ", ".join(sorted(p.stem for p in (ROOT / "config" / "suites").glob("*.yaml")))


def _run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    """``hkt ARGV`` in this process: its exit status, standard output, and its stderr lines."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err.strip().splitlines()


# --- issue 61, item 7: levels bounded by the sequence length -----------------------------------
def test_more_levels_than_the_sequence_holds_is_one_line_before_mlflow(tmp_path, capsys, monkeypatch):
    """levels=40 asked for 256 TiB (a 2^39-token padded sequence) and left a FAILED MLflow run:
    now one line at config validation, before the store or the run directory is made."""
    monkeypatch.setenv("HKT_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    data = write_prepared_data(tmp_path / "data", "listops")
    run = tmp_path / "run"
    code, out, err = _run(capsys, "train", "--data", str(data), "--out", str(run), "task=listops",
                          "model=hkt", "profile=smoke", "model.mixer.levels=40", "--no-progress")
    assert code == 2 and out == ""
    assert err == ["hkt: error: config key 'model.mixer.levels' = 40: stride^(levels-1) = 2^39 = "
                   "549,755,813,888 tokens exceeds the task's sequence length (task.max_length = "
                   "512): at most 10 levels at stride 2, whose coarsest level is already one "
                   "position per sequence; more levels add nothing but padding to their block "
                   "(and memory)"]
    assert not run.exists() and not (tmp_path / "results").exists()  # no store, no MLflow run


@pytest.mark.parametrize("stride, length, most", [(2, 512, 10), (2, 511, 9), (4, 1024, 6),
                                                  (3, 2000, 7), (2, 1, 1)])
def test_the_bound_is_stride_to_the_levels_less_one_within_the_length(stride, length, most):
    from hkt.mixers.hkt import HKTConfig, max_levels
    from hkt.train.run_config import load_config

    assert max_levels(stride, length) == most
    assert stride ** (most - 1) <= length < stride ** most
    HKTConfig(levels=most, stride=stride, kernel_size=stride).check_length(length)
    with pytest.raises(ConfigValueError, match=rf"at most {most} levels at stride {stride}"):
        HKTConfig(levels=most + 1, stride=stride, kernel_size=stride).check_length(length)
    if length >= 16:  # the same bound where the config is validated, and where a model is built
        over = [f"task.max_length={length}", f"model.mixer.stride={stride}",
                f"model.mixer.kernel_size={stride}", "model=hkt", "profile=smoke"]
        load_config([*over, f"model.mixer.levels={most}"])
        with pytest.raises(ConfigError, match=r"^config key 'model.mixer.levels' = "):
            load_config([*over, f"model.mixer.levels={most + 1}"])


def test_a_model_built_from_python_refuses_the_levels_too():
    from hkt.models import build_model

    cfg = {"name": "hkt", "mixer": {"levels": 6}}
    build_model(cfg, vocab_size=4, num_classes=2, max_length=32)
    with pytest.raises(ValueError, match=r"'mixer.levels' = 6: stride\^\(levels-1\) = 2\^5 = 32"):
        build_model(cfg, vocab_size=4, num_classes=2, max_length=31)


# --- issue 64, item 7: a bad --data is one line, without the resolved config before it ----------
def test_train_with_data_that_does_not_exist_prints_only_its_line(tmp_path, capsys):
    code, out, err = _run(capsys, "train", "--data", str(tmp_path / "nowhere"), "--out",
                          str(tmp_path / "run"), "profile=smoke")
    assert code == 2 and out == ""  # was: the 92-line resolved config, then the line
    assert err == [f"hkt: error: data directory {tmp_path / 'nowhere'} does not exist; create it "
                   "with `hkt prepare TASK --out DIR`"]
    assert not (tmp_path / "run").exists()
    data = write_prepared_data(tmp_path / "data", "listops")  # good data: the config first
    code, out, _ = _run(capsys, "train", "--data", str(data), "--out", str(tmp_path / "run"),
                        "task=listops", "model=mha", "profile=smoke", "tracking.enabled=false",
                        "train.max_steps=2", "--no-progress")
    assert code == 0 and out.startswith("# resolved config\nseed: 0\n")


# --- issue 64, item 9: a mistyped name gets the name it is close to -----------------------------
def test_did_you_mean_names_one_close_name_or_nothing():
    from hkt.errors import did_you_mean

    assert did_you_mean("smok", ["cpu", "smoke", "quick"]) == "; did you mean smoke?"
    assert did_you_mean("max_stpes", ["max_steps", "eval_every"], "train.") == \
        "; did you mean train.max_steps?"
    assert did_you_mean("foo", ["lr", "eps", "betas"]) == ""
    assert did_you_mean("levels9", ["main", "levels4", "levels1", "levels2"]) == \
        "; did you mean levels1, levels2 or levels4?"  # as close as each other: every one


@pytest.mark.parametrize("argv, line", [
    (["train", "model=mhaa"], "hkt: error: model=mhaa: no such option in config group 'model' "
                              "(available: conv, hkt, mha, s4d); did you mean mha?"),
    (["train", "train.max_stpes=3"], "hkt: error: unknown config key 'train.max_stpes' (from "
                                     "override 'train.max_stpes=3'); check the spelling, or see "
                                     "the keys with: hkt train --print-config; did you mean "
                                     "train.max_steps?"),
    (["train", "varient=levels1"], "hkt: error: unknown config key 'varient' (from override "
                                   "'varient=levels1'); check the spelling, or see the keys "
                                   "with: hkt train --print-config; did you mean variant?"),
    (["train", "optim.foo=3"], "hkt: error: unknown config key 'optim.foo' (from override "
                               "'optim.foo=3'); check the spelling, or see the keys with: hkt "
                               "train --print-config"),  # nothing close: no guess
    (["train", "model.mixer.fusion=dynamc"], "hkt: error: config key 'model.mixer.fusion' = "
                                             "'dynamc': must be one of dynamic, static; did you "
                                             "mean dynamic?"),
    (["plan", "--suite", "smok"], f"hkt: error: suite 'smok' has no config/suites/smok.yaml "
                                  f"(suites: {SUITES}, or auto: paper with CUDA, else cpu); did "
                                  "you mean smoke?"),
    (["prepare", "listop", "--out", "x"], None),
])
def test_a_mistyped_name_gets_one_line_with_the_close_name(argv, line, capsys, tmp_path):
    argv = [*argv, "--print-config"] if argv[0] == "train" else argv
    code, _, err = _run(capsys, *argv)
    assert code == 2 and len(err) == 1, err
    if line is None:  # a path in the line: its end
        assert err[0].startswith("hkt: error: unknown task 'listop': no ")
        assert err[0].endswith("(available: cifar10, imdb, imdb_lra, listops, listops_lra); "
                               "did you mean listops?")
    else:
        assert err[0] == line


def test_a_mistyped_key_in_the_workflow_config_gets_the_close_key(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("suite: mine\nmain: {modles: [mha]}\n")
    r = snakemake("-n", "--configfile", str(mine), cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith(
        "unknown key main.modles (allowed under main: models, tasks); did you mean main.models?")


# --- issue 61, item 9: lists the Snakemake way, suites named on the command line, status --------
def test_a_list_of_numbers_given_with_config_says_how_to_give_it(tmp_path):
    """Snakemake's --config reads `seeds=[0,1]` as ['0', '1']: the line says so and how to give
    the list (a config file); following it works."""
    r = snakemake("-n", "--config", "seeds=[0,1]", "suite=smoke", cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "hkt: error: workflow config (config/config.yaml + --configfile/--config): key seeds.0: "
        "'0' is not of type 'integer'; Snakemake's --config reads the items of a list as text "
        "(seeds=[0,1] gives ['0', '1']): give a list of numbers in a config file, --configfile "
        "FILE holding `seeds: [0, 1]`")
    r = snakemake("-n", "--config", "seeds=3", "suite=smoke", cwd=tmp_path, timeout=120)
    assert r.stderr.strip().splitlines()[-1].endswith(
        "key seeds: 3 is not of type 'array'; seeds is a list: give it in a config file, "
        "--configfile FILE holding `seeds: [3]` (Snakemake's --config reads a list's items as text)")
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("seeds: [0, 1]\n")
    one = job_stats(snakemake("-n", "--config", "suite=smoke", cwd=tmp_path, timeout=120).stdout)
    two = snakemake("-n", "--configfile", str(seeds), "--config", "suite=smoke", cwd=tmp_path,
                    timeout=120)
    assert two.returncode == 0, two.stderr[-2000:]
    assert "hkt: suite smoke (config/suites/smoke.yaml)" in two.stderr
    assert job_stats(two.stdout)["train"] > one["train"]


def test_a_suite_named_with_config_beside_config_files_must_exist(tmp_path):
    """`--configfile … --config suite=smok` ran as a suite labelled "smok"; a suite named on the
    command line is chosen, so it must exist. A suite of one's own is named in its file."""
    node = tmp_path / "node.yaml"
    node.write_text("node: {cpus: 2}\n")
    r = snakemake("-n", "--configfile", str(node), "--config", "suite=smok", cwd=tmp_path,
                  timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "hkt: error: workflow config (config/config.yaml + --configfile/--config): --config "
        f"suite=smok: suite 'smok' has no config/suites/smok.yaml (suites: {SUITES}, or auto: "
        "paper with CUDA, else cpu); a suite of your own is named in its config file (suite: "
        "NAME), not chosen with --config; did you mean smoke?")
    mine = tmp_path / "mine.yaml"
    mine.write_text("suite: mine\nseeds: [3]\n")
    r = snakemake("-n", "--configfile", str(mine), str(node), cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "hkt: suite mine (from the config files given)" in r.stderr
    r = snakemake("-n", "--configfile", str(node), "--config", "suite=smoke", cwd=tmp_path,
                  timeout=120)
    assert r.returncode == 0 and "hkt: suite smoke (config/suites/smoke.yaml)" in r.stderr


def test_status_shows_the_error_line_of_a_job_that_died_of_an_argument_error(results):
    """A job whose command line argparse refused ended with `hkt train: error: …`, which `hkt
    status` called "ended without a result or an error line (killed?)"."""
    log = results / "logs" / "train" / "listops" / "hkt" / "main" / "seed1.log"
    log.parent.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "hkt.cli.main", "--log", str(log), "train", "--bogus",
                           "x"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    failed = {j.name: j.detail for j in status_of(results).jobs if j.state == "failed"}
    assert failed == {"listops/hkt/main/seed1": "hkt train: error: unrecognized arguments: --bogus"}


# --- issue 74, item 7: a YAML tag that would construct Python objects ----------------------------
def test_a_python_tag_in_a_variant_file_is_one_line_and_runs_nothing(tmp_path, capsys, monkeypatch):
    """`!!python/object/apply:` in a variant file was a ConstructorError traceback (the safe loader
    ran nothing); now one line naming the file and line, through `hkt train` and the workflow's
    own reading of variant files."""
    import shutil

    from hkt.errors import GridError
    from hkt.workflow.grid import read_variant_model

    cdir = tmp_path / "config"
    shutil.copytree(ROOT / "config", cdir)
    marker = tmp_path / "ran"
    evil = cdir / "variant" / "evil.yaml"
    evil.write_text(f'# @package _global_\noptim:\n  lr: !!python/object/apply:os.system ["touch {marker}"]\n')
    monkeypatch.setenv("HKT_CONFIG_DIR", str(cdir))
    code, _, err = _run(capsys, "train", "--print-config", "variant=evil")
    assert code == 2 and err == [
        f"hkt: error: {evil}, line 3, column 7: the YAML tag "
        "'tag:yaml.org,2002:python/object/apply:os.system' is not allowed in a config (it would "
        "construct a Python object; configs are read with a safe loader, so nothing in it ran): "
        "remove the tag and write a plain value"]
    with pytest.raises(GridError, match=f"^{evil}, line 3, column 7: the YAML tag"):
        read_variant_model(evil)
    evil.write_text("# @package _global_\noptim:\n  lr: [1,\n")  # not YAML at all
    code, _, err = _run(capsys, "train", "--print-config", "variant=evil")
    assert code == 2 and len(err) == 1 and err[0].startswith(f"hkt: error: {evil}, line 4, column 1: "
                                                             "not valid YAML (while parsing a flow")
    assert not marker.exists()


def test_tracking_uri_null_given_with_config_is_refused(tmp_path, monkeypatch):
    """Issue 74, 7: Snakemake's `--config tracking_uri=null` gives the text 'null', which MLflow
    took for a folder: a store named "null" in the working directory. Now one line, and no store."""
    from hkt.mlflow_store import tracking_uri

    r = snakemake("-n", "--config", "tracking_uri=null", "suite=smoke", cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "hkt: error: tracking URI 'null' (from the config's tracking_uri or tracking.uri) is the "
        "word null, not an empty setting: MLflow would make a store in a folder of that name; for "
        "the results directory's store (sqlite:///RESULTS/mlflow.db) leave it out, or give "
        "`--config tracking_uri=` (empty) or `tracking_uri: null` in a --configfile (Snakemake's "
        "--config reads null as text); else name a store (sqlite:///…, http://…)")
    assert not (tmp_path / "null").exists()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "None")  # `hkt train`'s tracking.uri default
    with pytest.raises(ConfigError, match=r"^tracking URI 'None' \(from \$MLFLOW_TRACKING_URI\)"):
        tracking_uri(None, tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
