# analyze: the analyses of one trained run (`hkt analyze RUN_DIR --out DIR`): Mardia kurtosis
# per level, the symmetric/antisymmetric decomposition and PSD check, the Gram rank, fusion
# weights and level truncation (the last two for HKT). `analyze.models` picks the models (HKT,
# and MHA for comparison), `analyze.variants` the variants (null = all).


rule analyze:
    input:
        record=f"{R}/runs/{{task}}/{{model}}/{{variant}}/seed{{seed}}/record.json",
        data=lambda wc: data_files(wc.task),
    output:
        f"{R}/analysis/{{task}}/{{model}}/{{variant}}/seed{{seed}}/analysis.parquet",
        f"{R}/analysis/{{task}}/{{model}}/{{variant}}/seed{{seed}}/kappa_per_level.png",
    params:
        run_dir=lambda wc: run_dir(wc.task, wc.model, wc.variant, wc.seed),
        out=lambda wc: f"{R}/analysis/{wc.task}/{wc.model}/{wc.variant}/seed{wc.seed}",
        args=shell_words(ANALYZE.get("args", [])),
    log:
        f"{R}/logs/analyze/{{task}}/{{model}}/{{variant}}/seed{{seed}}.log",
    threads: res("analyze", "threads", 1)
    resources:
        mem_mb=res("analyze", "mem_mb", 16000),
        runtime=res("analyze", "runtime", 120),
        gpu=res("analyze", "gpu", 0),
    shell:
        """
        {ENV}
        export OMP_NUM_THREADS={threads}
        {HKT} analyze {params.run_dir} --out {params.out} {params.args} > {log} 2>&1 \
            || {{ s=$?; echo "--- end of {log}:" >&2; tail -n 20 {log} >&2; exit $s; }}
        """


# bench: the attention benchmark whose measured ratios enter the cost table.
rule bench_attention:
    output:
        f"{R}/bench/attention.csv",
        f"{R}/bench/attention.md",
    input:
        settings=str(CONFIG_DIR / "bench" / "attention.yaml"),
        layer=str(CONFIG_DIR / "model" / "hkt.yaml"),  # the HKT layer under test
    params:
        args=shell_words(BENCH.get("args", [])),
    log:
        f"{R}/logs/bench/attention.log",
    threads: res("bench", "threads", 2)
    resources:
        mem_mb=res("bench", "mem_mb", 16000),
        runtime=res("bench", "runtime", 60),
        gpu=res("bench", "gpu", 0),
    shell:
        """
        {ENV}
        export OMP_NUM_THREADS={threads}
        {HKT} bench attention --out {R}/bench {params.args} > {log} 2>&1 \
            || {{ s=$?; echo "--- end of {log}:" >&2; tail -n 20 {log} >&2; exit $s; }}
        """
