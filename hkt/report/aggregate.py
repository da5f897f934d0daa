"""Tables from run records (or from an MLflow experiment), with polars.

Two sources give the same tidy frame of runs, one row per run (:data:`RUN_COLUMNS`):

* :func:`load_records` + :func:`runs_from_records`: the ``record.json`` files the workflow's
  jobs write (docs/contracts.md "Runs"); any command that writes a valid record joins.
* :func:`runs_from_mlflow`: the finished runs of MLflow experiments (``hkt-<task>`` by default),
  for runs logged elsewhere, e.g. on a cluster against a tracking server.

From that frame: :func:`main_table` (per task, T and model: mean ± std over seeds of validation
and test accuracy, parameters, time per step; the paper's figure beside ours and the
difference), :func:`gap_table` (HKT − MHA, ours and the paper's), :func:`ablation_table`
(variants on one task against the full HKT, with the paper's L=1 figure), and
:func:`check_mlflow` (every record's MLflow run exists and holds the same final metrics).
Accuracies are fractions in the runs frame and percentages in the tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from hkt.errors import HKTError
from hkt.report import paper
from hkt.train.record import RECORD_NAME


#: The runs frame: one row per run.
RUN_COLUMNS: dict[str, Any] = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "variant": pl.String,
    "seed": pl.Int64, "profile": pl.String, "n_params": pl.Int64, "steps": pl.Int64,
    "best_step": pl.Int64, "val_accuracy": pl.Float64, "test_accuracy": pl.Float64,
    "ms_per_step": pl.Float64, "wall_time_s": pl.Float64, "device": pl.String,
    "d_model": pl.Int64, "n_layers": pl.Int64, "d_ffn": pl.Int64,
    "levels": pl.Int64, "stride": pl.Int64, "kernel_size": pl.Int64,
    "fusion": pl.String, "upsample": pl.String,
    "mlflow_run_id": pl.String, "mlflow_tracking_uri": pl.String, "mlflow_experiment": pl.String,
    "created_at": pl.String, "source": pl.String,
    "env_digest": pl.String, "git_commit": pl.String,  # provenance (hkt.report.environments)
}

#: Validation curves: one row per (run, evaluation).
CURVE_COLUMNS: dict[str, Any] = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "variant": pl.String,
    "seed": pl.Int64, "step": pl.Int64, "val_accuracy": pl.Float64, "source": pl.String,
}

#: Display order of models; others follow alphabetically.
MODEL_ORDER = ("mha", "hkt", "conv", "ngram", "majority")
#: Display order of tasks; others follow alphabetically.
TASK_ORDER = ("listops", "cifar10", "imdb")

KEY = ["task", "length", "model", "variant", "seed"]


class AggregateError(HKTError):
    """No runs to aggregate, or a source that cannot be read."""


# ---------------------------------------------------------------------------------------------
# sources


def find_records(paths: Iterable[str | Path], name: str = RECORD_NAME) -> list[Path]:
    """Files called ``name`` (run records by default): each path is such a file, a directory
    holding one, or a tree to search; each file once, a missing path is an error."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif (p / name).is_file():
            found.append(p / name)
        elif p.is_dir():
            found.extend(sorted(p.rglob(name)))
        else:
            raise AggregateError(f"{p}: no such file or directory")
    seen, out = set(), []
    for f in found:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            out.append(f)
    return out


def load_records(paths: Iterable[str | Path], *, validate: bool = True) -> list[dict[str, Any]]:
    """Read (and validate against the run-record schema) every record under ``paths``.

    Each record gets a ``_path`` key: where it was read from.
    """
    records = []
    for f in find_records(paths):
        if validate:
            from hkt.train.record import load_record

            rec = dict(load_record(f))
        else:
            try:
                rec = json.loads(f.read_text("utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise AggregateError(f"{f}: cannot read the run record: {exc}") from None
        rec["_path"] = str(f)
        records.append(rec)
    return records


def _get(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _int(v: Any) -> int | None:
    if v is None or v == "" or v == "None":
        return None
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def _float(v: Any) -> float | None:
    if v is None or v == "" or v == "None":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _str(v: Any) -> str | None:
    return None if v is None or v == "None" else str(v)


def _frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def record_length(rec: dict[str, Any]) -> int | None:
    """A run record's sequence length T: its config's task.max_length, else a top-level length."""
    return _int(_get(rec.get("config") or {}, "task.max_length")) or _int(rec.get("length"))


def record_row(rec: dict[str, Any]) -> dict[str, Any]:
    """One runs-frame row from a run record."""
    cfg = rec.get("config") or {}
    att = _get(cfg, "model.attention") or {}
    model = rec["model"]
    return {
        "task": rec["task"], "length": record_length(rec), "model": model,
        "variant": rec["variant"],
        "seed": _int(rec["seed"]), "profile": rec.get("profile"),
        "n_params": _int(rec.get("n_params")), "steps": _int(rec.get("steps")),
        "best_step": _int(rec.get("best_step")),
        "val_accuracy": _float(rec.get("val_accuracy")),
        "test_accuracy": _float(rec.get("test_accuracy")),
        "ms_per_step": _float(rec.get("ms_per_step")), "wall_time_s": _float(rec.get("wall_time_s")),
        "device": rec.get("device"),
        "d_model": _int(_get(cfg, "model.d_model")), "n_layers": _int(_get(cfg, "model.n_layers")),
        "d_ffn": _int(_get(cfg, "model.d_ffn")),
        "levels": _int(att.get("levels")) if model == "hkt" else None,
        "stride": _int(att.get("stride")) if model == "hkt" else None,
        "kernel_size": _int(att.get("kernel_size")),
        "fusion": _str(att.get("fusion")) if model == "hkt" else None,
        "upsample": _str(att.get("upsample")) if model == "hkt" else None,
        "mlflow_run_id": rec.get("mlflow_run_id"),
        "mlflow_tracking_uri": rec.get("mlflow_tracking_uri"),
        "mlflow_experiment": rec.get("mlflow_experiment"),
        "created_at": rec.get("created_at"), "source": rec.get("_path"),
        "env_digest": rec.get("env_digest"), "git_commit": rec.get("git_commit"),
    }


def runs_from_records(records: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """The runs frame of ``records`` (see :func:`load_records`)."""
    return _dedupe(_frame([record_row(r) for r in records], RUN_COLUMNS))


def curves_from_records(records: Sequence[dict[str, Any]],
                        runs: pl.DataFrame | None = None) -> pl.DataFrame:
    """Validation curves of the runs kept in ``runs`` (default: ``runs_from_records(records)``).

    Each curve is read from the ``history.csv`` beside the run's record (its ``source``), so a
    rerun's superseded record, dropped from ``runs``, contributes no curve either.
    """
    if runs is None:
        runs = runs_from_records(records)
    external = {r.get("_path") for r in records if r.get("external")}
    rows = []
    for run in runs.select(*KEY, "source").iter_rows(named=True):
        if not run["source"] or run["source"] in external:
            continue  # external baselines: no training curve comparable to the models'
        hist = Path(run["source"]).parent / "history.csv"
        if not hist.is_file():
            continue
        try:
            h = pl.read_csv(hist, infer_schema_length=None)
        except Exception:  # noqa: BLE001 - a broken history only loses its curve
            continue
        if "step" not in h.columns or "val_acc" not in h.columns:
            continue
        h = h.select(pl.col("step").cast(pl.Int64), pl.col("val_acc").cast(pl.Float64, strict=False))
        for step, acc in h.drop_nulls().iter_rows():
            rows.append({**run, "step": step, "val_accuracy": acc})
    return _frame(rows, CURVE_COLUMNS)


def _dedupe(runs: pl.DataFrame) -> pl.DataFrame:
    """One run per (task, T, model, variant, seed): the latest one (reruns replace older runs)."""
    if runs.is_empty():
        return runs
    return (runs.sort("created_at", nulls_last=False)
                .unique(subset=KEY, keep="last", maintain_order=True))


def mlflow_experiments(client: Any, names: Sequence[str] | None) -> list[Any]:
    """The experiments named (all ``hkt-*`` ones when ``names`` is empty)."""
    if names:
        exps = []
        for name in names:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise AggregateError(f"no MLflow experiment named '{name}' in the tracking store")
            exps.append(exp)
        return exps
    return [e for e in client.search_experiments() if e.name.startswith("hkt-")]


def _search_runs(client: Any, experiment_ids: list[str]) -> list[Any]:
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string="attributes.status = 'FINISHED'",
                                  max_results=1000, page_token=token)
        runs.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return runs


def mlflow_row(run: Any, uri: str, experiment: str) -> dict[str, Any] | None:
    """One runs-frame row from a finished MLflow run (None if it lacks the final metrics)."""
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    if "test_accuracy" not in metrics or "task" not in tags or "model" not in tags:
        return None
    model = tags["model"]
    hkt = model == "hkt"
    p = lambda k: params.get(k)  # noqa: E731
    return {
        "task": tags["task"], "length": _int(p("task.max_length")), "model": model,
        "variant": tags.get("variant", "default"), "seed": _int(tags.get("seed", p("seed"))),
        "profile": tags.get("profile"),
        "n_params": _int(metrics.get("n_params", p("n_params"))),
        "steps": _int(p("train.max_steps")), "best_step": _int(metrics.get("best_step")),
        "val_accuracy": _float(metrics.get("val_accuracy")),
        "test_accuracy": _float(metrics.get("test_accuracy")),
        "ms_per_step": _float(metrics.get("ms_per_step")),
        "wall_time_s": _float(metrics.get("wall_time_s")), "device": tags.get("device"),
        "d_model": _int(p("model.d_model")), "n_layers": _int(p("model.n_layers")),
        "d_ffn": _int(p("model.d_ffn")),
        "levels": _int(p("model.attention.levels")) if hkt else None,
        "stride": _int(p("model.attention.stride")) if hkt else None,
        "kernel_size": _int(p("model.attention.kernel_size")),
        "fusion": _str(p("model.attention.fusion")) if hkt else None,
        "upsample": _str(p("model.attention.upsample")) if hkt else None,
        "mlflow_run_id": run.info.run_id, "mlflow_tracking_uri": uri,
        "mlflow_experiment": experiment,
        "created_at": _ms_iso(run.info.start_time), "source": f"mlflow:{run.info.run_id}",
        "env_digest": tags.get("env_digest"), "git_commit": tags.get("git_commit"),
    }


def _ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_from_mlflow(uri: str, experiments: Sequence[str] | None = None, *,
                     curves: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The runs frame and validation curves of the finished runs in MLflow ``experiments``.

    ``uri`` is a tracking URI (``sqlite:///results/mlflow.db``, ``http://server:5000``);
    ``experiments`` defaults to every experiment whose name starts with ``hkt-``. A run counts
    when it finished and logged ``test_accuracy`` (what ``hkt train`` logs last).
    """
    client = _client(uri)
    try:
        exps = mlflow_experiments(client, experiments)
    except AggregateError:
        raise
    except Exception as exc:  # noqa: BLE001 - any store error: say where
        raise AggregateError(f"cannot read MLflow experiments at {uri}: "
                             f"{str(exc).splitlines()[0]}") from None
    rows, curve_rows = [], []
    for exp in exps:
        for run in _search_runs(client, [exp.experiment_id]):
            row = mlflow_row(run, uri, exp.name)
            if row is None:
                continue
            rows.append(row)
            if curves and not run.data.tags.get("external"):
                for m in client.get_metric_history(run.info.run_id, "val_acc"):
                    curve_rows.append({**{k: row[k] for k in (*KEY, "source")},
                                       "step": int(m.step), "val_accuracy": float(m.value)})
    runs = _dedupe(_frame(rows, RUN_COLUMNS))
    curves_df = _frame(curve_rows, CURVE_COLUMNS)
    if not runs.is_empty() and not curves_df.is_empty():
        # keep only the curves of the runs kept (a rerun replaces an older run)
        curves_df = curves_df.join(runs.select("source"), on="source", how="semi")
    return runs, curves_df


# ---------------------------------------------------------------------------------------------
# tables


def _order(col: str, order: Sequence[str]) -> pl.Expr:
    """Sort key: position in ``order``, then the others after it."""
    return pl.col(col).replace_strict(list(order), list(range(len(order))),
                                      default=len(order), return_dtype=pl.Int64)


def _seed_stats(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    return runs.group_by(by, maintain_order=True).agg(
        pl.col("seed").n_unique().alias("seeds"),
        (pl.col("val_accuracy").mean() * 100).alias("val_mean"),
        (pl.col("val_accuracy").std(ddof=1) * 100).alias("val_std"),
        (pl.col("test_accuracy").mean() * 100).alias("test_mean"),
        (pl.col("test_accuracy").std(ddof=1) * 100).alias("test_std"),
        pl.col("n_params").mean().round(0).cast(pl.Int64).alias("n_params"),
        pl.col("ms_per_step").mean().alias("ms_per_step"),
        pl.col("profile").unique().sort().str.join(",").alias("profile"),
    )


def main_table(runs: pl.DataFrame, variants: Sequence[str] = ("main",)) -> pl.DataFrame:
    """Per task, T and model: mean ± std over seeds, with the paper's figure and our difference.

    Columns: task, length, model, seeds, val_mean, val_std, test_mean, test_std, n_params,
    ms_per_step, profile, paper_mean, paper_std, delta_vs_paper (ours − paper, pp),
    lra_transformer (the LRA paper's vanilla Transformer at that T, for context).
    """
    sel = runs.filter(pl.col("variant").is_in(list(variants)))
    if sel.is_empty():
        return _empty_main()
    t = _seed_stats(sel, ["task", "length", "model"])
    pm, ps, lra = [], [], []
    for task, length, model in t.select("task", "length", "model").iter_rows():
        ref = paper.paper_accuracy(task, length or -1, model)
        pm.append(ref.mean if ref else None)
        ps.append(ref.std if ref else None)
        ctx = paper.lra_reference(task, length or -1) if model == "mha" else None
        lra.append(ctx.mean if ctx else None)
    t = t.with_columns(pl.Series("paper_mean", pm, dtype=pl.Float64),
                       pl.Series("paper_std", ps, dtype=pl.Float64),
                       pl.Series("lra_transformer", lra, dtype=pl.Float64))
    t = t.with_columns((pl.col("test_mean") - pl.col("paper_mean")).alias("delta_vs_paper"))
    return t.sort(_order("task", TASK_ORDER), "task", "length", _order("model", MODEL_ORDER),
                  "model")


def _empty_main() -> pl.DataFrame:
    return pl.DataFrame(schema={
        "task": pl.String, "length": pl.Int64, "model": pl.String, "seeds": pl.UInt32,
        "val_mean": pl.Float64, "val_std": pl.Float64, "test_mean": pl.Float64,
        "test_std": pl.Float64, "n_params": pl.Int64, "ms_per_step": pl.Float64,
        "profile": pl.String, "paper_mean": pl.Float64, "paper_std": pl.Float64,
        "lra_transformer": pl.Float64, "delta_vs_paper": pl.Float64})


def gap_table(main: pl.DataFrame, a: str = "hkt", b: str = "mha") -> pl.DataFrame:
    """Per task and T: ours a − b (pp) beside the paper's a − b, and their difference."""
    cols = ["task", "length", "test_mean", "paper_mean"]
    left = main.filter(pl.col("model") == a).select(cols)
    right = main.filter(pl.col("model") == b).select(cols)
    g = left.join(right, on=["task", "length"], suffix="_b")
    return g.select(
        "task", "length",
        (pl.col("test_mean") - pl.col("test_mean_b")).alias("ours_pp"),
        (pl.col("paper_mean") - pl.col("paper_mean_b")).alias("paper_pp"),
    ).with_columns((pl.col("ours_pp") - pl.col("paper_pp")).alias("difference_pp"))


def most_common_length(runs: pl.DataFrame) -> int | None:
    """The sequence length most of ``runs`` have (ties: the shortest), None without runs.

    The default T of the per-task ablation table and levels figure.
    """
    counts = runs.drop_nulls("length").group_by("length").len()
    if counts.is_empty():
        return None
    return counts.sort(["len", "length"], descending=[True, False])["length"][0]


def describe_variant(model: str, levels: Any, stride: Any, fusion: Any, upsample: Any,
                     d_ffn: Any) -> str:
    """What an ablation row's model is, in words (its HKT settings, or MHA's FFN width)."""
    if model == "hkt":
        return f"HKT L={levels}, s={stride}, {fusion}, {upsample}"
    if model == "mha":
        return f"MHA (d_ffn={d_ffn})"
    return model


def ablation_table(runs: pl.DataFrame, task: str = "listops", length: int | None = None,
                   reference: str = "main", main_variant: str = "main",
                   models: Sequence[str] = ("hkt", "mha")) -> pl.DataFrame:
    """Variants on one task against the full HKT (``reference`` variant of model hkt).

    Rows: every run of ``models`` on (task, T) (T defaults to the most common one), grouped by
    model and variant. Columns add ``setting`` (what the variant is), ``delta_pp`` (test
    accuracy minus the full HKT's) and ``paper_delta_pp`` (the paper's −18.4 for L=1).
    """
    sel = runs.filter((pl.col("task") == task) & pl.col("model").is_in(list(models)))
    if length is None:
        length = most_common_length(sel)
    sel = sel.filter(pl.col("length") == length) if length is not None else sel.clear()
    if sel.is_empty():
        return pl.DataFrame(schema={"variant": pl.String, "model": pl.String,
                                    "setting": pl.String, "seeds": pl.UInt32,
                                    "val_mean": pl.Float64, "val_std": pl.Float64,
                                    "test_mean": pl.Float64, "test_std": pl.Float64,
                                    "n_params": pl.Int64, "ms_per_step": pl.Float64,
                                    "delta_pp": pl.Float64, "paper_delta_pp": pl.Float64,
                                    "levels": pl.Int64, "task": pl.String, "length": pl.Int64})
    t = _seed_stats(sel, ["model", "variant"]).join(
        sel.group_by(["model", "variant"]).agg(
            pl.col("levels").first(), pl.col("stride").first(), pl.col("fusion").first(),
            pl.col("upsample").first(), pl.col("d_ffn").first()),
        on=["model", "variant"])
    ref = t.filter((pl.col("model") == "hkt") & (pl.col("variant") == reference))
    ref_acc = ref["test_mean"][0] if len(ref) else None
    setting = [describe_variant(*row) for row in t.select(
        "model", "levels", "stride", "fusion", "upsample", "d_ffn").iter_rows()]
    nh = paper.ABLATION_NO_HIERARCHY
    paper_delta = [
        nh["delta_pp"] if (m == "hkt" and lv == nh["levels"] and task == nh["task"]
                           and length == nh["length"]) else None
        for m, lv in t.select("model", "levels").iter_rows()]
    t = t.with_columns(
        pl.Series("setting", setting, dtype=pl.String),
        (pl.col("test_mean") - ref_acc if ref_acc is not None
         else pl.lit(None, dtype=pl.Float64)).alias("delta_pp"),
        pl.Series("paper_delta_pp", paper_delta, dtype=pl.Float64),
        pl.lit(task).alias("task"), pl.lit(length, dtype=pl.Int64).alias("length"),
    )
    rank = (pl.when((pl.col("model") == "hkt") & (pl.col("variant") == reference)).then(0)
              .when(pl.col("model") == "hkt").then(1).otherwise(2))
    main_first = pl.when(pl.col("variant") == main_variant).then(0).otherwise(1)
    t = t.sort(rank, _order("model", MODEL_ORDER), main_first, "levels", "variant",
               nulls_last=True)
    return t.select("variant", "model", "setting", "seeds", "val_mean", "val_std", "test_mean",
                    "test_std", "n_params", "ms_per_step", "delta_pp", "paper_delta_pp",
                    "levels", "task", "length")


# ---------------------------------------------------------------------------------------------
# the MLflow audit


def check_mlflow(records: Sequence[dict[str, Any]], tracking_uri: str | None = None,
                 tol: float = 1e-9) -> pl.DataFrame:
    """Check that every record's MLflow run exists and holds the record's final metrics.

    Compares ``val_accuracy``, ``test_accuracy`` and ``n_params``. ``tracking_uri`` overrides
    the URI stored in the records (runs moved to another store). Status per record: ``ok``,
    ``missing`` (no such run), ``mismatch`` (detail names the metric), ``unreachable`` or
    ``no mlflow`` (the record has no MLflow run, e.g. an external baseline: not an error).
    """
    clients: dict[str, Any] = {}
    rows = []
    for rec in records:
        run_id = rec.get("mlflow_run_id")
        uri = tracking_uri or rec.get("mlflow_tracking_uri")
        row = {"task": rec.get("task"), "model": rec.get("model"), "variant": rec.get("variant"),
               "seed": rec.get("seed"), "mlflow_run_id": run_id, "status": "ok", "detail": "",
               "record": rec.get("_path")}
        if not run_id or not uri:
            row.update(status="no mlflow", detail="the record names no MLflow run")
            rows.append(row)
            continue
        try:
            client = clients.get(uri) or clients.setdefault(uri, _client(uri))
            run = client.get_run(run_id)
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            missing = "not found" in text.lower() or "RESOURCE_DOES_NOT_EXIST" in text
            row.update(status="missing" if missing else "unreachable",
                       detail=text.splitlines()[0][:200] if text else type(exc).__name__)
            rows.append(row)
            continue
        problems = []
        if run.info.lifecycle_stage == "deleted":
            problems.append("run is deleted")
        for key in ("val_accuracy", "test_accuracy", "n_params"):
            want, got = rec.get(key), run.data.metrics.get(key)
            if want is None:
                continue
            if got is None:
                problems.append(f"{key} not logged")
            elif abs(float(got) - float(want)) > tol:
                problems.append(f"{key}: record {want} vs MLflow {got}")
        if problems:
            row.update(status="mismatch", detail="; ".join(problems))
        rows.append(row)
    return pl.DataFrame(rows, schema={"task": pl.String, "model": pl.String, "variant": pl.String,
                                      "seed": pl.Int64, "mlflow_run_id": pl.String,
                                      "status": pl.String, "detail": pl.String,
                                      "record": pl.String}, orient="row")


# ---------------------------------------------------------------------------------------------
# writing


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _pm(mean: Any, std: Any) -> str:
    if mean is None:
        return ""
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {std:.2f}"


def _signed(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:+.2f}"


def main_display(main: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "T", "model", "seeds", "val acc (%)", "test acc (%)", "paper (%)",
              "Δ vs paper (pp)", "params", "ms/step"]
    rows = []
    for r in main.iter_rows(named=True):
        rows.append([r["task"], str(r["length"]), r["model"], str(r["seeds"]),
                     _pm(r["val_mean"], r["val_std"]), _pm(r["test_mean"], r["test_std"]),
                     _pm(r["paper_mean"], r["paper_std"]) if r["paper_mean"] is not None else
                     (f"({r['lra_transformer']:.2f} LRA)" if r["lra_transformer"] is not None else ""),
                     _signed(r["delta_vs_paper"]), _fmt(r["n_params"]),
                     _fmt(r["ms_per_step"], 1)])
    return header, rows


def gap_display(gap: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "T", "HKT − MHA, ours (pp)", "HKT − MHA, paper (pp)", "difference (pp)"]
    rows = [[r["task"], str(r["length"]), _signed(r["ours_pp"]), _signed(r["paper_pp"]),
             _signed(r["difference_pp"])] for r in gap.iter_rows(named=True)]
    return header, rows


def ablation_display(abl: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["variant", "setting", "seeds", "val acc (%)", "test acc (%)",
              "Δ vs HKT (pp)", "paper Δ (pp)", "params", "ms/step"]
    rows = [[r["variant"], r["setting"], str(r["seeds"]), _pm(r["val_mean"], r["val_std"]),
             _pm(r["test_mean"], r["test_std"]), _signed(r["delta_pp"]),
             _signed(r["paper_delta_pp"]), _fmt(r["n_params"]), _fmt(r["ms_per_step"], 1)]
            for r in abl.iter_rows(named=True)]
    return header, rows


def check_display(check: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["task", "model", "variant", "seed", "MLflow run", "status", "detail"]
    rows = [[str(r[k]) if r[k] is not None else "" for k in
             ("task", "model", "variant", "seed", "mlflow_run_id", "status", "detail")]
            for r in check.iter_rows(named=True)]
    return header, rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(map(esc, header)) + " |",
             "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    if not rows:
        lines.append("| " + " | ".join(["(no runs)"] + [""] * (len(header) - 1)) + " |")
    return "\n".join(lines) + "\n"


_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
        "±": r"$\pm$", "Δ": r"$\Delta$", "−": "--"}


def latex(header: list[str], rows: list[list[str]], caption: str = "", label: str = "") -> str:
    def esc(s: str) -> str:
        return "".join(_TEX.get(ch, ch) for ch in s)

    spec = "l" * min(3, len(header)) + "r" * max(0, len(header) - 3)
    out = [r"\begin{table}[t]", r"\centering", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
           " & ".join(esc(h) for h in header) + r" \\", r"\midrule"]
    out += [" & ".join(esc(c) for c in row) + r" \\" for row in rows]
    out += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        out.append(rf"\caption{{{esc(caption)}}}")
    if label:
        out.append(rf"\label{{{label}}}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


def write_table(df: pl.DataFrame, display: tuple[list[str], list[list[str]]], stem: Path,
                caption: str) -> list[Path]:
    """Write ``stem``.md (display), .csv (all numeric columns) and .tex (display, booktabs)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    header, rows = display
    md, csv, tex = stem.with_suffix(".md"), stem.with_suffix(".csv"), stem.with_suffix(".tex")
    md.write_text(f"{caption}\n\n" + markdown(header, rows), encoding="utf-8")
    df.write_csv(csv)
    tex.write_text(latex(header, rows, caption, f"tab:{stem.name}"), encoding="utf-8")
    return [md, csv, tex]
