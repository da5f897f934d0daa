# aggregate: tables (Markdown, CSV, LaTeX), figures and results summary from every run record of
# the suite (--suite: the workflow's, which each record must name), logged to MLflow as one suite
# run (experiment hkt-suite-<suite>), and the MLflow audit (every record's MLflow run exists and
# holds the same final metrics).
# The CSV tables and the figures go into `snakemake --report` with the captions in report/.


rule check_mlflow:
    input: GRID.records()
    output: mlflow_check_outputs()
    params: out=lambda wc, output: Path(output[0]).parent.parent  # results_dir (above tables/)
    log: GRID.log("aggregate", "check_mlflow")
    conda: CONDA_ENV
    shell: "hkt --log {log:q} aggregate {input:q} --out {params.out:q} --check-mlflow --no-tables"


rule aggregate:
    input: **aggregate_inputs()
    output: aggregate_outputs(), summary=f"{R}/{SUMMARY}"
    params: **aggregate_params()
    log: GRID.log("aggregate", "aggregate")
    conda: CONDA_ENV
    threads: threads("aggregate")
    resources: **resources("aggregate")
    shell:
        "hkt --log {log:q} aggregate {input.records:q} --out {params.out:q} --main-variant {params.main}"
        " {params.ablation:q} {params.borrow:q} {params.analyses:q} {params.bench:q}"
        " {params.leaderboard:q}"
        " --suite {params.suite:q} --suite-run --tracking-uri {params.tracking_uri:q}"
