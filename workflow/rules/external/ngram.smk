# External baseline, the worked example of recipe (b) in README "Adding a baseline": any command
# that writes a run record (docs/contracts.md) joins the tables. This rule runs the non-neural
# references of hkt.baselines.ngram (majority class; hashed n-gram logistic regression) on the
# prepared Parquet. A new external baseline NAME is a copy of this file, NAME.smk, in this folder
# (every *.smk here is included) whose rule
#   - takes the prepared data as input:    data_files(wildcards.task)
#   - writes exactly this record:           f"{R}/runs/{{task}}/NAME/{{variant}}/seed{{seed}}/record.json"
#   - runs any command that writes it,
# plus `NAME: {enabled: true, tasks: null, seeds: [0]}` under `external:` in config/config.yaml.
# The aggregation then includes its records; options: config["external"]["NAME"]["options"].


def _ngram_options(method):
    opts = (config["external"].get(method) or {}).get("options") or {}
    words = []
    if opts.get("orders"):
        words += ["--orders", *map(str, opts["orders"])]
    for key in ("buckets", "epochs", "batch_size", "lr", "max_train"):
        if opts.get(key) is not None:
            words += [f"--{key.replace('_', '-')}", opts[key]]
    return shell_words(words)


rule ngram_baseline:
    input:
        data=lambda wc: data_files(wc.task),
    output:
        record=f"{R}/runs/{{task}}/{{method}}/{{variant}}/seed{{seed}}/record.json",
    wildcard_constraints:
        method="majority|ngram",
    params:
        run_dir=lambda wc: run_dir(wc.task, wc.method, wc.variant, wc.seed),
        data_dir=lambda wc: data_dir(wc.task),
        options=lambda wc: _ngram_options(wc.method),
        profile=config["profile"],
    log:
        f"{R}/logs/external/{{task}}/{{method}}/{{variant}}/seed{{seed}}.log",
    threads: res("external", "threads", 1)
    resources:
        mem_mb=res("external", "mem_mb", 8000),
        runtime=res("external", "runtime", 60),
    shell:
        """
        {ENV}
        export OMP_NUM_THREADS={threads}
        {PY} -m hkt.baselines.ngram --data {params.data_dir} --out {params.run_dir} \
            --method {wildcards.method} --seed {wildcards.seed} --variant {wildcards.variant} \
            --profile {params.profile} {params.options} --tracking-uri "$MLFLOW_TRACKING_URI" \
            > {log} 2>&1 || {{ s=$?; echo "--- end of {log}:" >&2; tail -n 20 {log} >&2; exit $s; }}
        """
