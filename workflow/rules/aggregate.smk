# aggregate: tables (Markdown, CSV, LaTeX), figures and results summary from every run record,
# logged to MLflow as one suite run (experiment hkt-suite-<suite>), and the MLflow audit (every
# record's MLflow run exists and holds the same final metrics).
# The CSV tables and the figures go into `snakemake --report` with the captions in report/.


rule check_mlflow:
    input:
        GRID.records(),
    output:
        mlflow_check_outputs(),
    params:
        out=lambda wc, output: Path(output[0]).parent.parent,  # results_dir (above tables/)
    log:
        GRID.log("aggregate", "check_mlflow"),
    conda:
        CONDA_ENV
    shell:
        "hkt --log {log:q} aggregate {input:q} --out {params.out:q} --check-mlflow --no-tables"


rule aggregate:
    input:
        records=GRID.records(),
        analyses=GRID.analyses(),
        bench=[f"{R}/bench/attention.csv"] if GRID.bench_enabled else [],
        audit=declared(MLFLOW_CHECK)[0],  # first: the summary and the suite run include it
    output:
        aggregate_outputs(),
        summary=f"{R}/{SUMMARY}",
    params:
        out=lambda wc, output: Path(output.summary).parent,
        main=MAIN,
        ablation=GRID.ablation_args(),
        analyses=lambda wc, input: ["--analyses", *input.analyses] if input.analyses else [],
        bench=lambda wc, input: ["--bench", *input.bench] if input.bench else [],
        tracking_uri=TRACKING_URI,
    log:
        GRID.log("aggregate", "aggregate"),
    conda:
        CONDA_ENV
    threads: threads("aggregate")
    resources:
        **resources("aggregate"),
    shell:
        "hkt --log {log:q} aggregate {input.records:q} --out {params.out:q} --main-variant {params.main}"
        " {params.ablation:q} {params.analyses:q} {params.bench:q}"
        " --suite-run --tracking-uri {params.tracking_uri:q}"
