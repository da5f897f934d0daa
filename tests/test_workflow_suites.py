"""One suite, made in one place (hkt.workflow.suites): `auto` is the paper suite where CUDA is
available and the CPU suite elsewhere (the CUDA check injected: no GPU needed), a name is its
config/suites/ file, a file is itself; the command line's keys still win; "no suite" has one
stand-in; and a workflow process builds one Grid."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hkt.errors import ConfigError
from hkt.provenance import NO_SUITE, SUITE_ENV, SuiteRun, job_suite, suite_name
from hkt.workflow.grid import Grid
from hkt.workflow.suites import AUTO, Suite, choose, load_suite, merge, workflow_suite

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
CONFIG = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def cuda(present: bool):
    return lambda: present


def no_cuda_check():
    raise AssertionError("the CUDA check ran, though the suite was named")


def test_default_is_auto():
    assert CONFIG["suite"] == AUTO


@pytest.mark.parametrize("present, name", [(True, "paper"), (False, "cpu")])
def test_auto_picks_paper_with_cuda_and_cpu_without(present, name):
    suite = load_suite(AUTO, cuda=cuda(present), env={})
    assert isinstance(suite, Suite) and suite.name == name and suite.config["suite"] == name
    assert suite.reason.startswith(f"suite: auto, {'CUDA available' if present else 'no CUDA'}")
    cfg = suite.config
    assert cfg["profile"] == suite.grid.profile == name  # each suite runs its own profile
    if name == "cpu":
        # the paper's table on a CPU: ListOps at the paper's budget, the T = 1024 tasks beside it,
        # levels1 derived from MHA (not trained)
        assert cfg["main"]["tasks"] == ["listops", "cifar10", "imdb"]
        assert cfg["tasks"]["listops"]["profile"] == "paper"
        assert cfg["tasks"]["listops"]["config"] == "listops"  # merged, not replaced
        assert cfg["ablation"]["include"] == [] and cfg["ablation"]["derived"] == {"levels1": "mha"}
        assert cfg["resources"]["train"]["gpu"] == 0
    else:
        assert cfg["main"] == CONFIG["main"] and cfg["resources"]["train"]["gpu"] == 1


def test_hkt_suite_variable_overrides_the_device_check():
    assert choose(cuda(True), env={SUITE_ENV: "cpu"}) == ("cpu", "$HKT_SUITE=cpu")
    suite = load_suite(AUTO, cuda=no_cuda_check, env={SUITE_ENV: "smoke"})
    assert suite.name == "smoke" and suite.config["profile"] == "smoke"
    # the workflow's first line says why: the variable, not the device
    assert suite.reason.startswith("suite: auto, $HKT_SUITE=smoke")
    assert choose(cuda(True), env={}) == ("paper", "CUDA available")
    assert choose(cuda(False), env={}) == ("cpu", "no CUDA")


def test_a_name_is_its_suite_file_and_asks_no_device():
    suite = load_suite("smoke", cuda=no_cuda_check, env={SUITE_ENV: "cpu"})
    smoke = yaml.safe_load((CONFIG_DIR / "suites" / "smoke.yaml").read_text())
    assert suite.name == "smoke" and suite.reason == "config/suites/smoke.yaml"
    assert suite.config == merge(CONFIG, smoke)
    assert suite.grid.config is suite.config and suite.grid.profile == "smoke"


def test_a_file_is_the_suite_it_names_or_none(tmp_path):
    named = tmp_path / "mine.yaml"
    named.write_text("suite: smoke\nprofile: smoke\nseeds: [5]\n")
    suite = load_suite(str(named), cuda=no_cuda_check)
    assert (suite.name, suite.grid.seeds, suite.reason) == ("smoke", [5], f"the file {named}")
    unnamed = tmp_path / "lra.yaml"
    unnamed.write_text("lra: {enabled: true}\n")
    suite = load_suite(unnamed, cuda=no_cuda_check)
    assert suite.name == suite.config["suite"] == NO_SUITE and suite.config["lra"]["enabled"]
    assert suite.config["profile"] == CONFIG["profile"]
    with pytest.raises(ConfigError, match=r"suite file .*nope.yaml does not exist"):
        load_suite(str(tmp_path / "nope.yaml"))


def test_command_line_keys_win_over_the_chosen_suite():
    given = {"results_dir": "elsewhere", "seeds": [7], "resources": {"train": {"threads": 2}}}
    suite = workflow_suite(merge(CONFIG, given), CONFIG_DIR, overrides=given, cuda=cuda(False),
                           env={})
    cfg = suite.config
    assert suite.name == "cpu" and cfg["results_dir"] == "elsewhere" and cfg["seeds"] == [7]
    assert cfg["resources"]["train"] == {**cfg["resources"]["train"], "threads": 2, "gpu": 0}
    assert suite.grid.results == "elsewhere"
    # --config suite=NAME merges NAME's file, as auto's choice is merged
    named = workflow_suite(merge(CONFIG, {"suite": "smoke"}), CONFIG_DIR,
                           overrides={"suite": "smoke"}, cuda=no_cuda_check)
    assert named.name == "smoke" and named.config["profile"] == "smoke"


@pytest.mark.parametrize("snakemake_9", [True, False])
def test_a_suite_file_given_is_the_suite(snakemake_9):
    """Snakemake 9 counts the config files' keys among the command line's (overrides), 8 not."""
    smoke = yaml.safe_load((CONFIG_DIR / "suites" / "smoke.yaml").read_text())
    tweak = {"seeds": [4]}
    given = merge(merge(CONFIG, smoke), tweak)  # --configfile config/suites/smoke.yaml tweak.yaml
    overrides = merge(smoke, tweak) if snakemake_9 else {}
    suite = workflow_suite(given, CONFIG_DIR, overrides=overrides, files=True, cuda=no_cuda_check)
    assert suite.name == "smoke" and suite.config == given and suite.grid.seeds == [4]


@pytest.mark.parametrize("snakemake_9", [True, False])
def test_config_files_naming_a_suite_of_their_own_are_that_suite(snakemake_9):
    """`--configfile mine.yaml` with `suite: mine` and no config/suites/mine.yaml: the files are
    the suite (a cluster test's, a user's own), as before one place made suites."""
    mine = {"suite": "mine", "seeds": [7]}
    suite = workflow_suite(merge(CONFIG, mine), CONFIG_DIR, overrides=mine if snakemake_9 else {},
                           files=True, cuda=no_cuda_check, env={})
    assert suite.name == "mine" and suite.grid.seeds == [7]
    assert suite.env == {SUITE_ENV: "mine"}


def test_config_files_without_a_suite_name_are_the_one_no_suite():
    extra = {"lra": {"enabled": True}}
    suite = workflow_suite(merge(CONFIG, extra), CONFIG_DIR, overrides=extra, files=True,
                           cuda=no_cuda_check, env={})
    assert suite.name == suite.config["suite"] == NO_SUITE == "none"
    assert suite.env == {SUITE_ENV: NO_SUITE} and suite.config["profile"] == CONFIG["profile"]


@pytest.mark.parametrize("how", ["auto", "name"])
def test_unknown_suite_lists_the_suites(how):
    names = sorted(p.stem for p in (CONFIG_DIR / "suites").glob("*.yaml"))  # every suite file
    assert {"cpu", "paper", "quick", "smoke"} <= set(names)
    message = (r"suite 'gpu8' has no config/suites/gpu8.yaml \(suites: "
               + re.escape(", ".join(names)) + ", or auto")
    with pytest.raises(ConfigError, match=message):
        if how == "auto":
            load_suite(AUTO, cuda=cuda(False), env={SUITE_ENV: "gpu8"})
        else:
            load_suite("gpu8")


def test_a_bad_suite_config_names_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("main: {models: [nosuch]}\n")
    with pytest.raises(ConfigError, match="main.models names model 'nosuch'"):
        load_suite(bad)
    bad.write_text("seeds: seven\n")
    with pytest.raises(ConfigError, match="key seeds"):
        load_suite(bad)


def test_merge_merges_dictionaries_and_replaces_lists():
    assert merge({"a": {"x": 1, "y": [1, 2]}, "b": [1]}, {"a": {"y": [3]}, "b": [2, 3]}) == \
        {"a": {"x": 1, "y": [3]}, "b": [2, 3]}


def test_every_suite_file_names_itself_and_passes_the_schema():
    for path in sorted((CONFIG_DIR / "suites").glob("*.yaml")):
        assert yaml.safe_load(path.read_text())["suite"] == path.stem
        suite = load_suite(path.stem)  # checked against the schema, its Grid built
        assert suite.name == path.stem and isinstance(suite.grid, Grid)


def test_no_suite_has_one_stand_in(tmp_path):
    for none in (None, "", "none"):  # a record's null, an empty $HKT_SUITE, the tag
        assert suite_name(none) == NO_SUITE
    assert suite_name("cpu") == "cpu"
    # the spellings of before 0.2.0 are migrated (scripts/migrate_results.py), not read as none
    assert suite_name("custom") == "custom"
    assert job_suite({}) == NO_SUITE and job_suite({SUITE_ENV: "quick"}) == "quick"
    assert job_suite({SUITE_ENV: ""}) == NO_SUITE
    assert load_suite(NO_SUITE).name == NO_SUITE
    assert SuiteRun.from_record({"config": {"tracking": {"suite": "cpu"}}}) == SuiteRun(NO_SUITE, None)
    assert SuiteRun.from_record({"suite": "cpu", "results_dir": "/r"}) == SuiteRun("cpu", "/r")
    assert SuiteRun.of(NO_SUITE, tmp_path).fields()["suite"] is None  # records hold null


def test_a_workflow_process_builds_one_grid(tmp_path):
    """A dry run of the workflow constructs exactly one Grid (the Suite's), and the plan it
    prints is of that Grid: counted by wrapping Grid.__init__ in the Snakemake process."""
    counter = tmp_path / "count.py"
    counter.write_text(
        "import runpy, sys\n"
        "from hkt.workflow import grid\n"
        "made = []\n"
        "init = grid.Grid.__init__\n"
        "def counted(self, *a, **k):\n"
        "    made.append(1)\n"
        "    init(self, *a, **k)\n"
        "grid.Grid.__init__ = counted\n"
        "sys.argv = ['snakemake', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('snakemake', run_name='__main__')\n"
        "finally:\n"
        "    print(f'GRIDS={len(made)}', file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != SUITE_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(counter), "-n", "--quiet", "rules", "--cores", "1",
                        "--snakefile", str(ROOT / "workflow" / "Snakefile"),
                        "--configfile", str(CONFIG_DIR / "suites" / "smoke.yaml"),
                        "--config", "results_dir=res"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "hkt: suite smoke (config/suites/smoke.yaml)" in r.stderr
    assert "hkt plan: suite smoke: jobs " in r.stderr
    assert "GRIDS=1" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "config" / "suites").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_a_suite_file_states_only_what_differs_from_the_workflow_config(path):
    """A suite restating a default would hide a change of config/config.yaml from it (a mixer
    added to main.models would not reach it); lists replace, so a restated list is the worst."""
    import yaml

    base = yaml.safe_load((path.parents[1] / "config.yaml").read_text())

    def restated(suite, default, where=""):
        if isinstance(suite, dict) and isinstance(default, dict):
            return [r for k, v in suite.items() if k in default
                    for r in restated(v, default[k], f"{where}.{k}" if where else k)]
        return [where] if suite == default else []

    assert restated(yaml.safe_load(path.read_text()), base) == []
