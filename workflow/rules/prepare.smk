# prepare: one task's data as Parquet (download + verify, a mirror, a local --source, or generate).
# Its Hydra task file (and the one it builds on, for the LRA tasks) is the input: editing it
# re-prepares the task. Priority: that of its longest training job (the plan's), so the longest
# jobs' data are ready first.


rule prepare:
    input: lambda wc: GRID.task_config_files(wc.task)
    output: GRID.data_files("{task}")
    params: out=lambda wc: data_dir(wc.task), args=lambda wc: GRID.prepare_args(wc.task)
    log: GRID.log("prepare", "{task}")
    conda: CONDA_ENV
    threads: threads("prepare")
    resources: **resources("prepare")
    priority: prepare_priority
    shell: "hkt --log {log:q} prepare {params.args:q} --out {params.out:q}"
