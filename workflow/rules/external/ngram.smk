# External baseline, the worked example of recipe (b) in README "Adding a baseline": any command
# that writes a run record (docs/contracts.md) joins the tables. This rule runs the non-neural
# references of `hkt baseline ngram` (majority class; hashed n-gram logistic regression) on the
# prepared Parquet. A new external baseline NAME is a copy of this file, NAME.smk, in this folder
# (every *.smk here is included) whose rule
#   - takes the prepared data as input:    data_files(wildcards.task)
#   - writes exactly this record:           f"{R}/runs/{{task}}/NAME/{{variant}}/seed{{seed}}/record.json"
#   - runs any command that writes it,
# plus `NAME: {enabled: true, tasks: null, seeds: [0]}` under `external:` in config/config.yaml.
# The aggregation then includes its records; its options (external.NAME.options) become
# `--key value` arguments through GRID.external_options(NAME) (in external_params(), common.smk,
# with the rest a baseline needs). The rule runs its command with
# HKT_MLFLOW_EXPERIMENT set to the experiment of the suite's trained models (hkt-<profile>-<task>),
# so that a command that logs to MLflow (at $MLFLOW_TRACKING_URI) puts its run beside theirs, and
# passes GRID.suite_args() (`--suite NAME`): with $HKT_RESULTS_DIR, also set for every job, the
# command tags its run with the suite run (hkt.provenance.SuiteRun) as `hkt train` does.


rule ngram_baseline:
    input: lambda wc: data_files(wc.task)
    output: GRID.pattern("run", "record.json")
    wildcard_constraints: model="majority|ngram"
    params: **external_params()
    log: GRID.job_log("external")
    conda: CONDA_ENV
    threads: threads("external")
    resources: **resources("external")
    shell:
        "HKT_MLFLOW_EXPERIMENT={params.experiment:q} hkt --log {log:q} baseline ngram --data {params.data:q} --out {params.out:q}"
        " --method {wildcards.model} --seed {wildcards.seed} --variant {wildcards.variant}"
        " --profile {params.profile:q} {params.suite:q} {params.options:q}"
        " --tracking-uri {params.tracking_uri:q}"
