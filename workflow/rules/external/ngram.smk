# External baseline `ngram`: hashed n-gram logistic regression (`hkt baseline ngram --method
# ngram`; its options: external.ngram.options in config/config.yaml). One baseline per file:
# majority.smk explains the parts of such a rule.


rule ngram_baseline:
    input: lambda wc: data_files(wc.task)
    output: GRID.pattern("run", "record.json")
    wildcard_constraints: model="ngram"
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
