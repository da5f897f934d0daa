"""``hkt doctor``: the report, the exit status, and the pieces other commands reuse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hkt.mixers.sdpa import AttentionCall
from hkt.suite.doctor import StepTiming, load_suite, sdpa_verdict, suite_jobs

# The tiniest suite worth checking: one task, both attention models, the largest HKT ablation,
# no GPU asked for.
TINY_SUITE = """\
profile: smoke
main: {tasks: [listops], models: [mha, hkt]}
ablation: {enabled: true, task: listops, include: [levels4]}
lra: {enabled: false}
resources: {train: {threads: 1, gpu: 0, mem_mb: 2000, runtime: 30}}
"""
TINY = ["train.batch_size.cpu=2", "train.steps.cpu=1", "train.warmup.cpu=0",
        "equivalence.seq_len=32", "device=cpu"]


def doctor(tmp_path: Path, suite_text: str, tracking_uri: str, *extra: str):
    suite = tmp_path / "suite.yaml"
    suite.write_text(suite_text)
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri}
    return subprocess.run(
        [sys.executable, "-m", "hkt.cli.main", "doctor", "--suite", str(suite), *TINY, *extra],
        capture_output=True, text=True, env=env, timeout=600)


def test_doctor_reports_every_check_and_passes(tmp_path):
    proc = doctor(tmp_path, TINY_SUITE, f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    checks = [line.split()[1:3] for line in lines[1:-1]]
    assert [c[0] for c in checks] == ["device", "sdpa", "sdpa", "sdpa", "hkt", "hkt", "hkt",
                                      "hkt", "train", "train", "train", "memory", "estimate",
                                      "mlflow"], proc.stdout
    # the memory check sees the whole suite's largest job, the L = 4 ablation
    assert "memory                 largest job listops/hkt/levels4 at batch 8" in proc.stdout
    assert all(line.lstrip().startswith("ok") for line in lines[1:-1]), proc.stdout
    assert "train listops/hkt" in proc.stdout and "ms/step" in proc.stdout
    # the CPU flash kernel needs V padded to the q/k width; this torch's narrow call would be math
    assert "masked: V 8 padded to 24 -> flash; padding needed here: V 8 -> math" in proc.stdout
    # the suite's wall time, hkt plan's figure: 3 seeds of mha, hkt and levels4
    assert re.search(r"estimate +the suite here: about \d+ (s|min) \(9 training jobs, \d+ "
                     r"training jobs at once; as `hkt plan` and `hkt status` count it\)",
                     proc.stdout), proc.stdout
    assert lines[-1].startswith("hkt doctor: all 14 checks passed")
    assert (tmp_path / "mlflow.db").is_file()


def test_failing_checks_give_nonzero_exit(tmp_path):
    """A suite that asks for GPUs on this CPU machine and an MLflow store that cannot be created
    (its directory would be inside a regular file) fail; the other checks still run."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    suite = TINY_SUITE.replace("gpu: 0", "gpu: 1")
    proc = doctor(tmp_path, suite, f"sqlite:///{blocker / 'mlflow.db'}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [line.split()[1] for line in proc.stdout.splitlines() if line.lstrip().startswith("FAIL")]
    assert failed == ["device", "mlflow"], proc.stdout
    assert "none is visible" in proc.stdout
    assert "train listops/mha" in proc.stdout  # the checks after the failure ran
    assert "2 of 14 checks FAILED (device, mlflow)" in proc.stdout.splitlines()[-1]


def test_bad_setting_is_a_config_error(tmp_path):
    """An unknown suite lists the suites; the key's spelling of before 0.2.0 (suite.file) is an
    unknown key, in one line."""
    proc = subprocess.run([sys.executable, "-m", "hkt.cli.main", "doctor", "suite=no-such-suite"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "hkt: error: suite 'no-such-suite' has no config/suites/no-such-suite.yaml" in proc.stderr
    assert "smoke" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "hkt.cli.main", "doctor", "suite.file=smoke"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("hkt: error: unknown config key 'suite.file'")


def test_the_doctor_checks_the_suite_it_is_given():
    """--suite (as `hkt plan` takes it) names the suite, suite_profile replaces its profile;
    the Suite is made once and every check reads it."""
    from hkt.config_compose import compose
    from hkt.suite.doctor import doctor_suite

    suite = doctor_suite(compose("doctor", ["suite=smoke", "suite_profile=cpu"]))
    assert suite.name == "smoke" and suite.grid.profile == suite.config["profile"] == "cpu"
    assert doctor_suite(compose("doctor", ["suite=quick"])).grid.profile == "cpu"
    assert compose("doctor", []).suite == "auto"


def test_suite_merges_over_the_workflow_config(tmp_path):
    """A suite file replaces lists and merges dictionaries, as Snakemake's --configfile does;
    its jobs are the workflow's: the main grid, the LRA grid when enabled, the ablations."""
    path = tmp_path / "s.yaml"
    path.write_text("main: {models: [mha]}\nlra: {enabled: true, models: [hkt]}\n"
                    "ablation: {enabled: false}\n")
    suite = load_suite(str(path))
    assert suite.config["profile"] == "paper"
    assert suite.config["main"]["tasks"] == ["listops", "cifar10", "imdb"]
    assert [(j.task, j.model, j.variant) for j in suite_jobs(suite)] == [
        ("listops", "mha", "main"), ("cifar10", "mha", "main"), ("imdb", "mha", "main"),
        ("listops_lra", "hkt", "main"), ("imdb_lra", "hkt", "main")]


def test_doctor_plan_and_workflow_share_one_job_list():
    """Doctor times one config per distinct job of the workflow's list (hkt.workflow.grid),
    ablations included: its memory check sees levels4, the largest HKT (it did not)."""
    for name in ("smoke", "cpu", "paper"):
        suite = load_suite(name)
        grid = suite.grid
        want = list(dict.fromkeys((j.task, j.model, j.variant) for j in grid.train_jobs()))
        assert [(j.task, j.model, j.variant) for j in suite_jobs(suite)] == want, name
    jobs = suite_jobs(load_suite("smoke"))
    assert ("listops", "hkt", "levels4") in {(j.task, j.model, j.variant) for j in jobs}
    levels4 = next(c for j, c in jobs.items() if j.variant == "levels4")
    assert levels4.model.mixer.levels == 4


def test_memory_need_scales_activations_not_state():
    t = StepTiming(seq_len=512, batch_size=2, n_params=10, ms_per_step=1.0, loss=1.0,
                   peak_bytes=100.0, state_bytes=40)
    assert t.bytes_needed(2) == 140
    assert t.bytes_needed(32) == 40 + 1600


def test_named_suite_resolves_in_config_suites():
    assert load_suite("smoke").grid.profile == "smoke"


def test_fused_path_meets_the_bf16_tolerance_under_autocast():
    """The doctor's bf16 tolerance holds for HKT's fused path under (CPU) bf16 autocast, for
    every HKT geometry of the paper profile, and a zero tolerance fails."""
    from hkt.config_compose import compose
    from hkt.suite.doctor.context import Context
    from hkt.suite.doctor.equivalence import check_equivalence

    suite = load_suite("paper")  # not auto: that is the CPU suite here, with one HKT geometry
    configs = {j: c for j, c in suite_jobs(suite).items()
               if j.model == "hkt" and j.variant == "main"}
    cfg = compose("doctor", ["equivalence.seq_len=64"])
    ctx = Context(cfg, suite, torch.device("cpu"), amp=torch.bfloat16, configs=configs)
    checks = list(check_equivalence(ctx))
    assert len(checks) == 4 and all(c.ok for c in checks), checks  # two HKT geometries
    strict = compose("doctor", ["equivalence.seq_len=64", "equivalence.tolerance.bf16=0.0"])
    ctx = Context(strict, suite, torch.device("cpu"), amp=torch.bfloat16, configs=configs)
    assert not any(c.ok for c in check_equivalence(ctx) if c.name == "hkt fused")


def test_a_copied_model_is_checked_by_the_mixer_it_builds():
    """A model file copied under another name (``mymha.yaml``, ``myhkt.yaml``) builds the same
    mixer, so the doctor's sdpa and equivalence checks cover it: they key on ``model.name``,
    not on the job's label."""
    import dataclasses

    from hkt.config_compose import compose
    from hkt.suite.doctor.context import Context
    from hkt.suite.doctor.equivalence import check_equivalence
    from hkt.suite.doctor.sdpa import check_sdpa

    suite = load_suite("smoke")
    jobs = suite_jobs(suite)
    copies = {dataclasses.replace(j, model=f"my{j.model}"): c for j, c in jobs.items()
              if j.model in ("mha", "hkt") and j.variant == "main"}
    assert {j.model for j in copies} == {"mymha", "myhkt"}
    cfg = compose("doctor", ["equivalence.seq_len=32"])
    ctx = Context(cfg, suite, torch.device("cpu"), configs=copies)
    sdpa = [c.name for c in check_sdpa(ctx)]
    assert sdpa and all(n.split("/")[1] in ("mymha", "myhkt") for n in sdpa), sdpa
    assert any("/myhkt/" in n for n in sdpa), sdpa
    eq = list(check_equivalence(ctx))
    assert [c.name for c in eq] == ["hkt fused", "hkt levels=1"] and all(c.ok for c in eq), eq


# ------------------------------------------------------------- the SDPA verdict, each answer
def cuda_call(qk: int, v: int, masked: bool = True) -> AttentionCall:
    """A bf16 call on an sm90 GPU (an H100/H200), faked: no GPU needed."""
    return AttentionCall("cuda", torch.bfloat16, qk, v, masked, capability=(9, 0))


def answers(choice: str):
    """PyTorch's pick simulated: ``choice`` for every call, and the calls it was asked about."""
    asked = []

    def pick(call):
        asked.append((call.qk_width, call.v_width))
        return choice

    return pick, asked


@pytest.mark.parametrize("call, choice, line", [
    (cuda_call(32, 32, masked=False), "flash", "-> flash"),  # MHA without a mask
    (cuda_call(96, 32), "efficient", "V 32 -> efficient"),  # HKT at ListOps' shape
    (cuda_call(96, 32), "cudnn", "V 32 -> cudnn"),
    # the H200's answer at imdb/hkt/main (torch 2.11): cuDNN, where sdpa.py's rules say
    # memory-efficient; both are fused, so nothing is wrong
    (cuda_call(192, 64), "cudnn", "V 64 -> cudnn (fused; sdpa.py's rules expected efficient)"),
])
def test_any_fused_kernel_passes_and_is_named(call, choice, line):
    pick, asked = answers(choice)
    assert sdpa_verdict(call, pick) == (True, line)
    assert asked == [(call.qk_width, call.v_width)]  # narrow V: sdpa.py does not pad on CUDA


@pytest.mark.parametrize("call, choice, line", [
    (cuda_call(96, 32), "math",
     "V 32 -> math (the math fallback, T×T memory; sdpa.py expected efficient, cudnn)"),
    (cuda_call(192, 64), "none",
     "V 64 -> none (no SDPA backend accepts this call; sdpa.py expected efficient)"),
    (AttentionCall("cuda", torch.bfloat16, 96, 32, True, capability=(13, 0)), "math",
     "V 32 -> math (the math fallback, T×T memory: no fused kernel takes this call here)"),
])
def test_the_math_fallback_and_no_backend_fail(call, choice, line):
    assert sdpa_verdict(call, answers(choice)[0]) == (False, line)


def test_padded_v_says_whether_this_torch_needed_it():
    """On CPU sdpa.py pads V (the flash kernel wants equal widths); the doctor asks PyTorch
    about the padded call, which runs, and about the narrow one, to say if padding paid."""
    call = AttentionCall("cpu", torch.float32, 96, 32, True)
    asked = []

    def needs_equal_widths(c):
        asked.append(c.v_width)
        return "flash" if c.v_width == c.qk_width else "math"

    assert sdpa_verdict(call, needs_equal_widths) == (
        True, "V 32 padded to 96 -> flash; padding needed here: V 32 -> math")
    assert asked == [96, 32]
    pick, _ = answers("flash")  # a torch whose CPU flash takes a narrower V
    assert sdpa_verdict(call, pick) == (
        True, "V 32 padded to 96 -> flash; padding not needed on this torch: V 32 -> flash")
    pick, _ = answers("math")  # padded or not, the math fallback: fails
    assert sdpa_verdict(call, pick) == (
        False, "V 32 padded to 96 -> math (the math fallback, T×T memory; sdpa.py expected "
               "flash); padding needed here: V 32 -> math")


def test_torch_pick_names_this_machines_choice():
    """The doctor's question to PyTorch, on this CPU: flash for equal widths, math for a
    narrower V, none where every enabled backend refuses."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from hkt.suite.doctor.sdpa import torch_pick

    pick = torch_pick(2, 2, 16, torch.device("cpu"), torch.float32)
    equal, narrow = AttentionCall("cpu", torch.float32, 24, 24, True), AttentionCall("cpu", torch.float32, 24, 8, True)
    assert (pick(equal), pick(narrow)) == ("flash", "math")
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        assert pick(narrow) == "none"


# The H200's own doctor (issue 38, ../shared/gpu-h200/doctor.log): ms per step of each job at its batch
H200_MS = {"listops/mha/main": 6, "listops/hkt/main": 16, "listops/conv/main": 7,
           "cifar10/mha/main": 12, "cifar10/hkt/main": 24, "cifar10/conv/main": 19,
           "imdb/mha/main": 14, "imdb/hkt/main": 42, "imdb/conv/main": 19,
           "listops/hkt/levels1": 8, "listops/hkt/levels2": 13, "listops/hkt/levels4": 29,
           "listops/hkt/static_fusion": 20, "listops/hkt/linear_upsample": 20,
           "listops/hkt/stride4": 20, "listops/mha/mha_matched": 7}


def h200(check, jobs_per_gpu: int = 9, free_gib: float = 139.0):
    """``check`` of the paper suite on a 16-core machine with one GPU (faked: no GPU needed),
    from the H200 doctor's step times and its largest job's need (imdb/hkt/main, 2.52 GiB)."""
    from hkt.config_compose import compose
    from hkt.suite.doctor.context import Context, job_name

    # the paper suite's models as the H200 doctor timed them (S4D joined main.models after it)
    suite = load_suite("paper", overrides={"node": {"gpus": 1, "cpus": 16},
                                           "jobs_per_gpu": jobs_per_gpu,
                                           "main": {"models": ["mha", "hkt", "conv"]}})
    configs = suite_jobs(suite)
    timings = {j: StepTiming(seq_len=int(c.task.max_length), batch_size=int(c.train.batch_size),
                             n_params=1, ms_per_step=H200_MS[job_name(j)], loss=1.0,
                             peak_bytes=(2.52 if job_name(j) == "imdb/hkt/main" else 1.0) * 2**30,
                             state_bytes=0) for j, c in configs.items()}
    ctx = Context(compose("doctor", []), suite, torch.device("cuda"), configs=configs,
                   timings=timings)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.cuda, "device_count", lambda: 1)
        mp.setattr("hkt.suite.doctor.free_memory_bytes", lambda device: free_gib * 2**30)
        (result,) = check(ctx)
    return result


def h200_estimate(jobs_per_gpu: int) -> str:
    """The doctor's estimate of the paper suite from the H200's step times: the calibration
    (hkt.suite.estimate.cached_timer) answers each shape with its own H200 time, nothing is timed."""
    from hkt.suite.doctor import _check_estimate

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("hkt.suite.estimate.cached_timer", lambda *a, **k: (
            lambda cfg, shape: H200_MS[shape.label] / 1000, {"cached": 0, "untimed": []}))
        mp.setattr("hkt.device.describe_device", lambda device: "one H200 (faked)")
        check = h200(_check_estimate, jobs_per_gpu)
    assert check.ok and check.name == "estimate"
    return check.detail


def test_memory_counts_the_jobs_that_share_a_gpu_and_says_how_many_fit():
    from hkt.suite.doctor import _check_memory

    ok = h200(_check_memory)
    assert ok.ok and ok.detail == (
        "largest job imdb/hkt/main at batch 32 needs 2.52 GiB; x 9 jobs on a GPU (jobs_per_gpu) "
        "x 1.5 margin = 34.02 GiB; free 139.00 GiB")
    small = h200(_check_memory, free_gib=24.0)  # a 24 GB card: 6 such jobs fit, not 9
    assert not small.ok and small.detail.endswith(
        "free 24.00 GiB: set jobs_per_gpu=6 (--config jobs_per_gpu=6)")
    assert h200(_check_memory, jobs_per_gpu=1, free_gib=24.0).ok


def test_the_estimate_packs_the_paper_suite_on_one_gpu():
    """From the H200's step times the doctor puts the paper suite's 48 training jobs 9 at a time
    on the one GPU, each step 1.83x slower (config/plan.yaml), well under one job at a time."""
    packed, alone = h200_estimate(9), h200_estimate(1)
    assert "(48 training jobs, 9 training jobs at once, 9 per GPU, each step 1.83x its time alone;" in packed
    assert "(48 training jobs, 1 training jobs at once;" in alone
    # the H200's steps with each job's start-up, data and tracking (config/plan.yaml
    # job_overhead), packed with the other rules' measured costs and the GPU slots a local run
    # shares out (the benchmark waits for a GPU of its own); one GPU job at a time (analyses too):
    # 4.5x longer
    assert packed.startswith("the suite here: about 68 min")
    assert alone.startswith("the suite here: about 5.1 h")
