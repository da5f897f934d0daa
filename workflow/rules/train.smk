# train: one (task, model, variant, seed) run with `hkt train`; its output is the run record.
#
# Rerun triggers: the job's Hydra overrides and a digest of the config files it is composed from
# are params, and those files are inputs, so editing config/model/hkt.yaml re-runs the HKT jobs
# only. A run directory left by an interrupted job with the same config is resumed from its last
# checkpoint; one whose config or data changed is started over (`hkt train --restart-if-changed`).


wildcard_constraints:
    task=r"[A-Za-z0-9_]+",
    variant=r"[A-Za-z0-9_]+",
    seed=r"\d+",


def _train_extra_file(wc):
    return match_file(wc.task, wc.variant) if needs_match(wc.model, wc.variant) else ""


rule train:
    input:
        data=lambda wc: data_files(wc.task),
        configs=lambda wc: train_config_files(wc.task, wc.model, wc.variant),
        extra=lambda wc: [_train_extra_file(wc)] if _train_extra_file(wc) else [],
    output:
        record=f"{R}/runs/{{task}}/{{model}}/{{variant}}/seed{{seed}}/record.json",
    wildcard_constraints:
        model="|".join(MODELS),
    params:
        overrides=lambda wc: shell_words(train_overrides(wc.task, wc.model, wc.variant, wc.seed)),
        # not used by the command: a changed digest of the composed config files re-runs the job
        stamp=lambda wc: config_stamp(wc.task, wc.model, wc.variant, wc.seed),
        extra_file=_train_extra_file,
        run_dir=lambda wc: run_dir(wc.task, wc.model, wc.variant, wc.seed),
        data_dir=lambda wc: data_dir(wc.task),
    log:
        f"{R}/logs/train/{{task}}/{{model}}/{{variant}}/seed{{seed}}.log",
    threads: res("train", "threads", 1)
    resources:
        mem_mb=res("train", "mem_mb", 16000),
        runtime=res("train", "runtime", 720),
        gpu=res("train", "gpu", 0),
    shell:
        """
        {ENV}
        export OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads}
        extra=""
        if [ -n "{params.extra_file}" ]; then extra=$(cat "{params.extra_file}"); fi
        {HKT} train --data {params.data_dir} --out {params.run_dir} --no-progress --restart-if-changed \
            {params.overrides} $extra > {log} 2>&1 \
            || {{ s=$?; echo "--- end of {log}:" >&2; tail -n 20 {log} >&2; exit $s; }}
        """


# The size-matched MHA: the FFN width that gives MHA as many parameters as the main HKT.
rule match_params:
    input:
        configs=lambda wc: train_config_files(wc.task, "hkt") + train_config_files(wc.task, "mha"),
    output:
        f"{R}/params/{{task}}/{{variant}}.override",
    params:
        overrides=lambda wc: shell_words([f"task={task_config_name(wc.task)}",
                                          f"profile={config['profile']}",
                                          *config.get("train_overrides", []),
                                          *variant_spec("mha", wc.variant).get("overrides", [])]),
    log:
        f"{R}/logs/match_params/{{task}}/{{variant}}.log",
    shell:
        """
        {ENV}
        {PY} -m hkt.baselines.matched --out {output} {params.overrides} > {log} 2>&1 \
            || {{ s=$?; tail -n 20 {log} >&2; exit $s; }}
        """
