# external: every external baseline, one job per task and seed of each entry of `external:` in
# the config. Its command is the entry's `command`, or `hkt baseline NAME` for a baseline of ours
# (hkt/workflow/external.py fills it in). docs/extending.md, recipe (b).


rule external:
    input: run_inputs
    output: GRID.pattern("run", "record.json")
    wildcard_constraints: model="|".join(GRID.external) or "(?!)"
    params: **external_params()
    log: GRID.job_log("external")
    conda: CONDA_ENV
    threads: threads("external")
    resources: **resources("external")
    shell: "HKT_MLFLOW_EXPERIMENT={params.experiment:q} {params.command}"
