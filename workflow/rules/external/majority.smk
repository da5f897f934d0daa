# External baseline `majority`: the most frequent training label (`hkt baseline ngram --method
# majority`). One file per baseline: every *.smk in this folder is included, so this file is the
# whole registration of its rule (README "Adding a baseline", recipe (b); docs/contracts.md for
# the run record). A new external baseline NAME is a copy of this file, NAME.smk, whose rule
#   - takes the prepared data as input:    data_files(wildcards.task)
#   - writes exactly this record:           GRID.pattern("run", "record.json"), with model="NAME"
#   - runs any command that writes it,
# plus `NAME: {enabled: true, tasks: null, seeds: [0]}` under `external:` in config/config.yaml.
# The aggregation then includes its records. external_params() (common.smk) gives what the
# command needs: data and run directory, options (external.NAME.options as `--key value`), the
# task's budget profile, and the MLflow store and experiment
# of the suite's trained models (hkt-<profile>-<task>; HKT_MLFLOW_EXPERIMENT below). The shell
# text is the one the two baselines shared in one rule before (`--method {wildcards.model}`):
# Snakemake reruns a job whose rule's shell text changed. The suite run reaches the command as
# it reaches every job: $HKT_SUITE and $HKT_RESULTS_DIR (hkt.provenance.SuiteRun.of_job).


rule majority_baseline:
    input: lambda wc: data_files(wc.task)
    output: GRID.pattern("run", "record.json")
    wildcard_constraints: model="majority"
    params: **external_params()
    log: GRID.job_log("external")
    conda: CONDA_ENV
    threads: threads("external")
    resources: **resources("external")
    shell:
        "HKT_MLFLOW_EXPERIMENT={params.experiment:q} hkt --log {log:q} baseline ngram --data {params.data:q} --out {params.out:q}"
        " --method {wildcards.model} --seed {wildcards.seed} --variant {wildcards.variant}"
        " --profile {params.profile:q} {params.options:q}"
        " --tracking-uri {params.tracking_uri:q}"
