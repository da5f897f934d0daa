# aggregate: tables (Markdown, CSV, LaTeX), figures and results summary from every run record,
# and the MLflow audit (every record's MLflow run exists and holds the same final metrics).

TABLES = ("main", "gap", "ablation")
FIGURES = ("val_curves", "accuracy_vs_levels", "main_bar")


def aggregate_outputs():
    return ([f"{R}/tables/{t}.{ext}" for t in TABLES for ext in ("md", "csv", "tex")]
            + [f"{R}/tables/runs.csv"] + [f"{R}/figures/{f}.png" for f in FIGURES])


def mlflow_check_outputs():
    return [f"{R}/tables/mlflow_check.{ext}" for ext in ("md", "csv", "tex")]


def _ablation_args():
    task = ABL_TASK
    if task not in TASKS:
        return f"--ablation-task {q(task)}"
    family, length = task_info(task)
    return f"--ablation-task {q(family)} --ablation-length {length}"


rule check_mlflow:
    input:
        records=all_records(),
    output:
        report(f"{R}/tables/mlflow_check.csv", caption="../report/mlflow_check.rst",
               category="Audit"),
        f"{R}/tables/mlflow_check.md",
        f"{R}/tables/mlflow_check.tex",
    log:
        f"{R}/logs/aggregate/check_mlflow.log",
    shell:
        """
        {ENV}
        {HKT} aggregate {input.records} --out {R} --check-mlflow --no-tables > {log} 2>&1 \
            || {{ s=$?; tail -n 20 {log} >&2; exit $s; }}
        """


def analysis_table_outputs():
    names = (["kurtosis", "kernel", "truncation", "approximation"] if all_analyses() else []) + ["cost"]
    out = []
    for t in names:
        out.append(report(f"{R}/tables/{t}.csv", caption=f"../report/{t}_table.rst", category="Analyses"))
        out += [f"{R}/tables/{t}.{ext}" for ext in ("md", "tex")]
    return out


def analysis_figure_outputs():
    if not all_analyses():
        return []
    figures = {"kappa_by_level": "kappa_by_level.rst", "truncation": "truncation_curve.rst",
               "approximation": "approximation_figure.rst"}
    return [report(f"{R}/figures/{name}.png", caption=f"../report/{rst}", category="Analyses")
            for name, rst in figures.items()]


rule aggregate:
    input:
        records=all_records(),
        analysis=all_analyses(),
        bench=bench_outputs(),
        check=f"{R}/tables/mlflow_check.csv",
    output:
        report(f"{R}/tables/main.csv", caption="../report/main_table.rst", category="Tables"),
        report(f"{R}/tables/gap.csv", caption="../report/gap_table.rst", category="Tables"),
        report(f"{R}/tables/ablation.csv", caption="../report/ablation_table.rst",
               category="Tables"),
        report(f"{R}/tables/runs.csv", caption="../report/runs_table.rst", category="Tables"),
        [f"{R}/tables/{t}.{ext}" for t in TABLES for ext in ("md", "tex")],
        report(f"{R}/figures/val_curves.png", caption="../report/val_curves.rst",
               category="Figures"),
        report(f"{R}/figures/accuracy_vs_levels.png", caption="../report/accuracy_vs_levels.rst",
               category="Figures"),
        report(f"{R}/figures/main_bar.png", caption="../report/main_bar.rst", category="Figures"),
        analysis_tables=analysis_table_outputs(),
        analysis_figures=analysis_figure_outputs(),
        summary=f"{R}/summary.md",
    params:
        ablation=_ablation_args(),
        analyses=lambda wc, input: f"--analyses {' '.join(map(q, input.analysis))}" if input.analysis else "",
        bench=lambda wc, input: f"--bench {q(input.bench[0])}" if input.bench else "",
    log:
        f"{R}/logs/aggregate/aggregate.log",
    threads: res("aggregate", "threads", 1)
    resources:
        mem_mb=res("aggregate", "mem_mb", 4000),
        runtime=res("aggregate", "runtime", 30),
    shell:
        """
        {ENV}
        {HKT} aggregate {input.records} --out {R} --main-variant {MAIN} {params.ablation} \
            {params.analyses} {params.bench} > {log} 2>&1 || {{ s=$?; tail -n 20 {log} >&2; exit $s; }}
        """
