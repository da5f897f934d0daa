# analyze: the analyses of one trained run (`hkt analyze RUN_DIR --out DIR`): Mardia kurtosis
# per level, the symmetric/antisymmetric decomposition and PSD check, the Gram rank, fusion
# weights, level truncation and the approximation residual per level (the last three for HKT).
# `analyze.models` picks the models (HKT, and MHA for comparison), `analyze.variants` the
# variants (null = all).


rule analyze:
    input: GRID.pattern("run", "record.json"), lambda wc: GRID.data_files(wc.task),
           CONFIG_DIR / "analysis.yaml"  # its settings: an edit re-runs the analyses
    output: GRID.pattern("analysis", "analysis.parquet"), GRID.pattern("analysis", "kappa_per_level.png")
    params: **analyze_params()
    log: GRID.job_log("analyze")
    conda: CONDA_ENV
    threads: threads("analyze")
    resources: **resources("analyze")
    shell: "hkt --log {log:q} analyze {params.run:q} --out {params.out:q} {params.args:q}"


# bench: the attention benchmark whose measured ratios enter the cost table. It runs last, alone,
# so that its ratios are not measured beside training jobs: it waits for `bench_queue`, which
# waits for every other job's output but the aggregate's. That input is ancient (its time is not
# compared), so a new record (a model or a baseline added) reruns the queue's touch, not the
# benchmark; its settings and the HKT layer under test do rerun it.
rule bench_queue:
    input: bench_after()
    output: f"{R}/bench/queue.done"
    log: GRID.log("bench", "queue")
    conda: CONDA_ENV
    shell: "touch {output:q} 2> {log:q}"


rule bench_attention:
    input: CONFIG_DIR / "bench" / "attention.yaml", CONFIG_DIR / "model" / "hkt.yaml",
           ancient(f"{R}/bench/queue.done")
    output: f"{R}/bench/attention.csv", f"{R}/bench/attention.md"
    params: out=lambda wc, output: Path(output[0]).parent, args=GRID.bench_args()
    log: GRID.log("bench", "attention")
    conda: CONDA_ENV
    threads: threads("bench")
    resources: **resources("bench")
    shell: "hkt --log {log:q} bench attention --out {params.out:q} {params.args:q}"
