# prepare: one task's data as Parquet (download + verify, a mirror, a local --source, or generate).


def _prepare_mirror(wildcards):
    mirror = config.get("data_mirror")
    return f"export HKT_DATA_MIRROR={q(Path(mirror).resolve())};" if mirror else ""


def _prepare_source(wildcards):
    src = (TASKS[wildcards.task] or {}).get("source")
    return f"--source {q(Path(src).resolve())}" if src else ""


rule prepare:
    input:
        task_config=lambda wc: str(CONFIG_DIR / "task" / f"{task_config_name(wc.task)}.yaml"),
    output:
        data_files("{task}"),
    params:
        task_config=lambda wc: task_config_name(wc.task),
        overrides=lambda wc: shell_words((TASKS[wc.task] or {}).get("prepare", [])),
        source=_prepare_source,
        mirror=_prepare_mirror,
        out=lambda wc: data_dir(wc.task),
    log:
        f"{R}/logs/prepare/{{task}}.log",
    threads: res("prepare", "threads", 2)
    resources:
        mem_mb=res("prepare", "mem_mb", 8000),
        runtime=res("prepare", "runtime", 60),
    shell:
        """
        {ENV} {params.mirror}
        {HKT} prepare {params.task_config} {params.overrides} --out {params.out} {params.source} \
            > {log} 2>&1 || {{ s=$?; echo "--- end of {log}:" >&2; tail -n 20 {log} >&2; exit $s; }}
        """
