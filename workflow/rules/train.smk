# train: one (task, model, variant, seed) run; variant = the variant file (config/variant/NAME.yaml).
#
# Rerun trigger: the digest of the job's composed config (a param), so editing
# config/model/hkt.yaml re-runs the HKT jobs only. A run directory left by an interrupted job with
# the same config is resumed from its last checkpoint; one whose config or data changed is
# started over (`hkt train --restart-if-changed`). Priority: the job's estimated seconds (the
# plan's), so the longest jobs start first; a job with a checkpoint before every fresh one.


wildcard_constraints:
    task=r"[A-Za-z0-9_]+",
    variant=r"[A-Za-z0-9_]+",
    seed=r"\d+",


rule train:
    input: run_inputs
    output: GRID.pattern("run", "record.json")
    wildcard_constraints: model="|".join(GRID.models)
    params: **train_params()
    log: GRID.job_log("train")
    conda: CONDA_ENV
    threads: threads("train")
    resources: **resources("train")
    priority: train_priority
    shell:
        "hkt --log {log:q} train --data {params.data:q} --out {params.out:q}"
        " --restart-if-changed {params.overrides:q}"
