"""The runs frame: one row per run, read from run records (docs/contracts.md "Runs").

Shared by the report (tables, figures) and the analyses (a run's identity, :data:`KEY`), so it
sits below both. :func:`load_records` + :func:`runs_from_records` give the frame
(:data:`RUN_COLUMNS`), :func:`curves_from_records` the validation curves
(:data:`CURVE_COLUMNS`; :func:`unreadable_histories` the runs whose history lost theirs);
:func:`record_row` is one row. A model's mixer columns
(:data:`MIXER_FIELDS`: levels, stride, …) come from the fields of its token-mixer config present
in the record (``config.model.mixer``), whatever the model: a field the model lacks is null. The MLflow reader
(:mod:`hkt.report.mlflow_runs`) builds the same frame from MLflow. Accuracies are fractions here
and percentages in the tables. :func:`paper_caveat` and :func:`examples_note` say
what a table or figure of runs must tell its reader (which rows are not at the paper's budget;
the test examples behind each accuracy).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from hkt import paper
from hkt.errors import HKTError
from hkt.provenance import RESULTS_DIR_TAG, SUITE_TAG, SuiteRun
from hkt.run_record import HISTORY_NAME, RECORD_NAME, load_record

#: The token-mixer settings that the ablations change (runs-frame columns, read from
#: ``config.model.mixer``; null where a model's mixer has no such field).
MIXER_FIELDS: dict[str, Any] = {"levels": pl.Int64, "stride": pl.Int64,
                                "kernel_size": pl.Int64, "fusion": pl.String,
                                "upsample": pl.String}

#: The runs frame: one row per run. ``external`` names the program of an external baseline's run
#: (null: trained by ``hkt train``); ``budget`` says in words what the run trained for
#: (:func:`run_budget`). ``suite`` and ``results_dir`` name its suite run
#: (:class:`hkt.provenance.SuiteRun`; null: no suite, or not recorded); ``data_warning`` is the
#: provenance warning of its data, if any (:func:`hkt.data.parquet.provenance_warning`: an MLflow
#: tag; for a record the report reads it from the data's metadata, a layer above this module).
RUN_COLUMNS: dict[str, Any] = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "variant": pl.String,
    "seed": pl.Int64, "profile": pl.String, "external": pl.String, "budget": pl.String,
    SUITE_TAG: pl.String, RESULTS_DIR_TAG: pl.String,
    "n_params": pl.Int64, "steps": pl.Int64,
    "best_step": pl.Int64, "val_accuracy": pl.Float64, "test_accuracy": pl.Float64,
    "test_examples": pl.Int64, "train_examples": pl.Int64, "batch_size": pl.Int64, "lr": pl.Float64,
    "ms_per_step": pl.Float64, "wall_time_s": pl.Float64, "device": pl.String,
    "precision": pl.String,
    "d_model": pl.Int64, "n_layers": pl.Int64, "d_ffn": pl.Int64,
    **MIXER_FIELDS,
    "mlflow_run_id": pl.String, "mlflow_tracking_uri": pl.String, "mlflow_experiment": pl.String,
    "created_at": pl.String, "source": pl.String,
    "env_digest": pl.String, "git_commit": pl.String,  # provenance (hkt.report.environments)
    "data_warning": pl.String,
}

#: Validation curves: one row per (run, evaluation).
CURVE_COLUMNS: dict[str, Any] = {
    "task": pl.String, "length": pl.Int64, "model": pl.String, "variant": pl.String,
    "seed": pl.Int64, "step": pl.Int64, "val_accuracy": pl.Float64, "source": pl.String,
}

#: A run's identity: records must hold one run each (:func:`check_unique`); MLflow runs with the
#: same key are reruns of one run (the latest one counts: :func:`latest`).
KEY = ["task", "length", "model", "variant", "seed"]

#: Display order of models; others follow alphabetically.
MODEL_ORDER = ("mha", "hkt", "conv", "s4d", "ngram", "majority", "root_op_prior", "depth1_rule",
               "depth2_rule", "depth3_rule", "exact_rule")  # the rule references (hkt.rule_references)
#: Display order of tasks; others follow alphabetically.
TASK_ORDER = ("listops", "cifar10", "imdb")


class AggregateError(HKTError):
    """No runs to aggregate, or a source that cannot be read."""


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
            found.extend(sorted(_files_in(p, name, p.resolve(), frozenset())))
        else:
            raise AggregateError(f"{p}: no such file or directory")
    seen, out = set(), []
    for f in found:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            out.append(f)
    return out


def _files_in(d: Path, name: str, top: Path, chain: frozenset[Path]) -> list[Path]:
    """Files called ``name`` under folder ``d`` of tree ``top``, through the folders linked
    into the tree from inside it (a link back up the path it is reached by adds nothing); a
    link out of the tree or to nothing is refused in one line: ``Path.rglob`` skips linked
    folders, so a run folder linked in was left out of the tables without a word."""
    chain = chain | {d.resolve()}
    found = []
    for entry in sorted(d.iterdir()):
        if entry.is_symlink() and (not entry.exists() or entry.is_dir()):
            target = Path(os.path.realpath(entry))
            if not entry.exists() or not target.is_relative_to(top):
                raise AggregateError(
                    f"{entry} is a link to {target}, "
                    f"{'outside ' + str(top) if entry.exists() else 'which does not exist'}: "
                    "a run folder is read where it lies; pass the folder it links to as a "
                    "source of its own, or remove the link")
            if target in chain:
                continue
        if entry.is_dir():
            found += _files_in(entry, name, top, chain)
        elif entry.name == name and entry.is_file():
            found.append(entry)
    return found


def load_records(paths: Iterable[str | Path], *, validate: bool = True) -> list[dict[str, Any]]:
    """Read (and validate against the run-record schema) every record under ``paths``.

    Each record gets a ``_path`` key: where it was read from. A record in a run directory of
    the workflow's layout (:func:`check_place`) must be the run that directory is.
    """
    records = []
    for f in find_records(paths):
        if validate:
            rec = dict(load_record(f))
        else:
            try:
                rec = json.loads(f.read_text("utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise AggregateError(f"{f}: cannot read the run record: {exc}") from None
        check_place(rec, f)
        rec["_path"] = str(f)
        records.append(rec)
    return records


#: A run directory of the workflow's layout: ``runs/TASK/MODEL/VARIANT/seedK`` (TASK: the task
#: file's id, which the record's ``config.task.id`` names; a record's ``task`` is its family).
RUN_PLACE = re.compile(r"(?:^|/)runs/(?P<task>[^/]+)/(?P<model>[^/]+)/(?P<variant>[^/]+)/"
                       r"seed(?P<seed>\d+)/" + re.escape(RECORD_NAME) + "$")


def check_place(rec: dict[str, Any], path: str | Path) -> None:
    """Refuse (:class:`AggregateError`) a record whose place in a results directory's ``runs/``
    says another run than the record does (a record copied under another model's folder, and
    perhaps edited): the folders name the task, model, variant and seed. Records elsewhere are
    not checked."""
    m = RUN_PLACE.search(Path(path).as_posix())
    if m is None:
        return
    task_ids = {rec.get("task"), get_path(rec.get("config") or {}, "task.id")}
    said = {"task": m["task"] in task_ids, "model": m["model"] == rec.get("model"),
            "variant": m["variant"] == rec.get("variant"),
            "seed": as_int(rec.get("seed")) == int(m["seed"])}
    wrong = [k for k, ok in said.items() if not ok]
    if wrong:
        raise AggregateError(
            f"{path} lies in the run directory of {m['task']}/{m['model']}/{m['variant']}/"
            f"seed{m['seed']} but is the record of {rec.get('task')}/{rec.get('model')}/"
            f"{rec.get('variant')}/seed{rec.get('seed')} (its {', '.join(wrong)} differ): a record "
            "copied or edited by hand; delete it, or put back the record of the run this "
            "directory holds")


def check_unique(rows: Sequence[dict[str, Any]]) -> None:
    """Refuse (:class:`AggregateError`) two records of one run (:data:`KEY`): which of them the
    tables showed would depend on the order they were read in."""
    seen: dict[tuple[Any, ...], Any] = {}
    for row in rows:
        key = tuple(row.get(k) for k in KEY)
        if key in seen:
            task, length, model, variant, seed = key
            raise AggregateError(
                f"two records of one run ({task} T={length} {model}/{variant} seed {seed}): "
                f"{seen[key]} and {row.get('source')}; aggregate one of them (the records of "
                "one results directory, or of one rerun) and move the other away")
        seen[key] = row.get("source")


def get_path(d: Any, dotted: str) -> Any:
    """``d["a"]["b"]`` for ``"a.b"``; None where a level is missing."""
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def as_int(v: Any) -> int | None:
    """An int from a record or MLflow value (MLflow params are strings); None if absent."""
    if v is None or v == "" or v == "None":
        return None
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def as_float(v: Any) -> float | None:
    """A float from a record or MLflow value; None if absent or NaN."""
    if v is None or v == "" or v == "None":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def as_str(v: Any) -> str | None:
    return None if v is None or v == "None" else str(v)


def as_column(value: Any, dtype: Any) -> Any:
    """``value`` converted for a runs-frame column of ``dtype``."""
    return as_int(value) if dtype == pl.Int64 else as_float(value) if dtype == pl.Float64 \
        else as_str(value)


def frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """A frame with exactly ``schema``'s columns (missing keys are null)."""
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def record_length(rec: dict[str, Any]) -> int | None:
    """A run record's sequence length T: its config's task.max_length, else a top-level length."""
    return as_int(get_path(rec.get("config") or {}, "task.max_length")) or as_int(rec.get("length"))


#: How an external baseline's budget begins (:func:`run_budget`): a rule reference's, another's.
EXTERNAL_BUDGETS = ("rule reference: ", "own settings: ")


def run_budget(*, profile: str | None, steps: int | None, batch_size: int | None,
               train_examples: int | None, external: str | None = None,
               settings: dict[str, Any] | None = None) -> str:
    """What a run trained for, in words. A run of ``hkt train``: its profile (``paper``: the
    paper's budget; any other, ours), steps and what they are in epochs of its training split
    ("paper: 10,000 steps, 3.33 epochs"). An external baseline: its own ``settings`` (the
    numbers of its model and training config; it has no profile's budget) and its steps."""
    epochs = steps * batch_size / train_examples if steps and batch_size and train_examples else None
    rule, own_settings = EXTERNAL_BUDGETS
    if external and isinstance((settings or {}).get("rule"), str):  # a rule reference
        return f"{rule}{settings['rule']}"
    if external:
        own = [f"{k} {_setting(v)}" for k, v in (settings or {}).items()
               if isinstance(v, (int, float, list)) and not isinstance(v, bool)]
        if steps:
            own.append(f"{steps:,} steps")
        return f"{own_settings}{', '.join(own) or 'none (no training steps)'}"
    if not steps:
        return profile or ""
    return f"{profile}: {steps:,} steps" + (f", {epochs:.2f} epochs" if epochs is not None else "")


def _setting(value: Any) -> str:
    if isinstance(value, list):
        return "/".join(map(_setting, value))
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def external_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """An external baseline's own settings in its record's config: its model's (the name aside),
    then its training's epochs."""
    model = {k: v for k, v in (get_path(cfg, "model") or {}).items() if k != "name"}
    epochs = get_path(cfg, "train.epochs")
    return {**model, **({"epochs": epochs} if epochs is not None else {})}


def run_precision(recorded: Any, asked: Any, device: Any) -> str | None:
    """The precision a run trained in (``fp32``, ``bf16 autocast``): the one its record or
    MLflow run names (``recorded``), or for a run from before they named it, what its config's
    ``train.precision`` (``asked``) gives on its ``device`` where that is certain (``auto`` on a
    CPU is fp32; on a GPU it depends on the GPU's bf16 support, not recorded: None)."""
    if recorded:
        return str(recorded)
    on_cpu = str(device or "").startswith("cpu")
    if asked == "fp32" or (asked == "auto" and on_cpu):
        return "fp32"
    return "bf16 autocast" if asked == "bf16" and on_cpu else None


def record_row(rec: dict[str, Any]) -> dict[str, Any]:
    """One runs-frame row from a run record."""
    cfg = rec.get("config") or {}
    mixer = get_path(cfg, "model.mixer") or {}
    steps, batch = as_int(rec.get("steps")), as_int(get_path(cfg, "train.batch_size"))
    return {
        "task": rec["task"], "length": record_length(rec), "model": rec["model"],
        "variant": rec["variant"],
        "seed": as_int(rec["seed"]), "profile": rec.get("profile"),
        "external": rec.get("external"),
        "budget": run_budget(profile=rec.get("profile"), steps=steps, batch_size=batch,
                             train_examples=as_int(rec.get("train_examples")),
                             external=rec.get("external"), settings=external_settings(cfg)),
        **SuiteRun.from_record(rec).fields(),  # null: no suite, as in records
        "n_params": as_int(rec.get("n_params")), "steps": steps,
        "best_step": as_int(rec.get("best_step")),
        "val_accuracy": as_float(rec.get("val_accuracy")),
        "test_accuracy": as_float(rec.get("test_accuracy")),
        "test_examples": as_int(rec.get("test_examples")),
        "train_examples": as_int(rec.get("train_examples")),
        "batch_size": batch, "lr": as_float(get_path(cfg, "optim.lr")),
        "ms_per_step": as_float(rec.get("ms_per_step")),
        "wall_time_s": as_float(rec.get("wall_time_s")),
        "device": rec.get("device"),
        "precision": run_precision(rec.get("precision"), get_path(cfg, "train.precision"),
                                   rec.get("device")),
        "d_model": as_int(get_path(cfg, "model.d_model")),
        "n_layers": as_int(get_path(cfg, "model.n_layers")),
        "d_ffn": as_int(get_path(cfg, "model.d_ffn")),
        **{k: as_column(mixer.get(k), dtype) for k, dtype in MIXER_FIELDS.items()},
        "mlflow_run_id": rec.get("mlflow_run_id"),
        "mlflow_tracking_uri": rec.get("mlflow_tracking_uri"),
        "mlflow_experiment": rec.get("mlflow_experiment"),
        "created_at": rec.get("created_at"), "source": rec.get("_path"),
        "env_digest": rec.get("env_digest"), "git_commit": rec.get("git_commit"),
        "data_warning": rec.get("data_warning"),
    }


def latest(runs: pl.DataFrame) -> pl.DataFrame:
    """One run per :data:`KEY`: the latest one (reruns replace older runs)."""
    if runs.is_empty():
        return runs
    return (runs.sort("created_at", nulls_last=False)
                .unique(subset=KEY, keep="last", maintain_order=True))


def runs_from_records(records: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """The runs frame of ``records`` (see :func:`load_records`): one record per run, or an
    :class:`AggregateError` naming two of one run (:func:`check_unique`)."""
    rows = [record_row(r) for r in records]
    check_unique(rows)
    return latest(frame(rows, RUN_COLUMNS))  # one per run already: in the order it gives


def curves_from_records(records: Sequence[dict[str, Any]],
                        runs: pl.DataFrame | None = None) -> pl.DataFrame:
    """Validation curves of the trained runs in ``runs`` (default: ``runs_from_records(records)``).

    Each curve is read from the ``history.csv`` beside the run's record (its ``source``); one
    that does not read as the run's history has no curve here: :func:`unreadable_histories`
    names them, for a warning and the tables' notes.
    """
    if runs is None:
        runs = runs_from_records(records)
    rows = []
    for run, rec in _trained(records, runs):
        try:
            curve = read_curve(Path(run["source"]).parent / HISTORY_NAME, rec)
        except ValueError:
            continue
        for step, acc in curve.iter_rows():
            rows.append({**run, "step": step, "val_accuracy": acc})
    return frame(rows, CURVE_COLUMNS)


def unreadable_histories(records: Sequence[dict[str, Any]],
                         runs: pl.DataFrame | None = None) -> pl.DataFrame:
    """The trained runs of ``runs`` whose ``history.csv`` is missing or damaged (no curve of
    theirs is drawn or counted): :data:`KEY`, ``history`` (its path) and ``why``."""
    if runs is None:
        runs = runs_from_records(records)
    rows = []
    for run, rec in _trained(records, runs):
        hist = Path(run["source"]).parent / HISTORY_NAME
        try:
            read_curve(hist, rec)
        except ValueError as exc:
            rows.append({**{k: run[k] for k in KEY}, "history": str(hist), "why": str(exc)})
    return pl.DataFrame(rows, schema={**{k: RUN_COLUMNS[k] for k in KEY},
                                      "history": pl.String, "why": pl.String})


def _trained(records: Sequence[dict[str, Any]], runs: pl.DataFrame
             ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The runs of ``runs`` read from a record of ``hkt train`` (external baselines have no
    training curve comparable to the models'), each with its record."""
    by_path = {r.get("_path"): r for r in records}
    return [(run, by_path[run["source"]])
            for run in runs.select(*KEY, "source").iter_rows(named=True)
            if run["source"] in by_path and not by_path[run["source"]].get("external")]


def read_curve(hist: Path, rec: dict[str, Any]) -> pl.DataFrame:
    """The validation curve (``step``, ``val_acc``) of the run of record ``rec`` from its
    ``history.csv``; a ``ValueError`` saying why where it is missing, does not parse, or is not
    that run's whole history (it ends before the record's last step, or its best validation is
    not the record's: a file cut short or from another run)."""
    if not hist.is_file():
        raise ValueError("missing")
    try:
        h = pl.read_csv(hist, infer_schema_length=None)
        if "step" not in h.columns or "val_acc" not in h.columns:
            raise ValueError("it has no step or val_acc column")
        h = h.select(pl.col("step").cast(pl.Int64), pl.col("val_acc").cast(pl.Float64))
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc).strip().splitlines()[0] if str(exc).strip() else
                         type(exc).__name__) from None
    curve = h.drop_nulls()
    steps, best = as_int(rec.get("steps")), as_float(rec.get("val_accuracy"))
    last = h["step"].max()
    if steps is not None and last != steps:
        raise ValueError(f"it ends at step {last}, the run at step {steps}")
    if h.filter(pl.col("step") == last)["val_acc"].is_null().all():
        raise ValueError(f"its last row (step {last}) has no validation accuracy")
    if best is not None and not curve.is_empty() and curve["val_acc"].max() != best:
        raise ValueError(f"its best validation accuracy {curve['val_acc'].max()} is not the "
                         f"record's {best}")
    return curve


def most_common_length(runs: pl.DataFrame) -> int | None:
    """The sequence length most of ``runs`` have (ties: the shortest), None without runs.

    The default T of the per-task ablation table and levels figure.
    """
    counts = runs.drop_nulls("length").group_by("length").len()
    if counts.is_empty():
        return None
    return counts.sort(["len", "length"], descending=[True, False])["length"][0]


def order_key(col: str, order: Sequence[str]) -> pl.Expr:
    """Sort key: position in ``order``, then the others after it."""
    return pl.col(col).replace_strict(list(order), list(range(len(order))),
                                      default=len(order), return_dtype=pl.Int64)


def ordered(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """``values`` in display ``order`` (others after it, alphabetically)."""
    return sorted(values, key=lambda v: (order.index(v) if v in order else len(order), v))


def task_keys(df: pl.DataFrame) -> list[tuple[str, int]]:
    """The (task, T) pairs of ``df`` in display order."""
    keys = df.select("task", "length").unique().rows()
    return sorted(keys, key=lambda k: (TASK_ORDER.index(k[0]) if k[0] in TASK_ORDER
                                        else len(TASK_ORDER), k[0], k[1] or 0))


# -- what a table or figure of runs must say about them (its caption or footnote) --------------

def paper_caveat(runs: pl.DataFrame) -> str:
    """A sentence for any table or figure that puts the paper's figures beside ``runs``: which
    rows (task, T, models) are not at the paper's budget, with their budgets, so that only those
    are read for shape rather than value; empty when every trained run is at the paper's
    budget. External baselines are named as at their own settings, never the paper's."""
    if "profile" not in runs.columns or runs.is_empty():
        return ""
    external = runs["external"].is_not_null() if "external" in runs.columns else pl.lit(False)
    trained, baselines = runs.filter(~external), runs.filter(external)
    off = trained.filter(pl.col("profile").is_null() | (pl.col("profile") != paper.PROFILE))
    rows = []
    for task, length in task_keys(off):
        sel = off.filter((pl.col("task") == task) & (pl.col("length") == length))
        models = ordered(set(sel["model"].to_list()), MODEL_ORDER)
        every = set(models) == set(trained.filter((pl.col("task") == task)
                                                  & (pl.col("length") == length))["model"].to_list())
        budgets = sorted(set(sel["budget"].drop_nulls().to_list()) if "budget" in sel.columns else [])
        rows.append(f"{task} T={length} ({'every model' if every else ', '.join(models)}"
                    f"{': ' + '; '.join(budgets) if budgets else ''})")
    caveat = (f"Not at the paper's budget: {', '.join(rows)}; compare these rows with the paper's "
              "figures in shape (which model leads, how accuracy moves), not in value." if rows else "")
    if not baselines.is_empty():
        caveat += (" " if caveat else "") + ("External baselines run at their own settings (column "
                                             "'budget'), not at a profile's budget.")
    return caveat


def examples_note(runs: pl.DataFrame) -> str:
    """How many test examples the accuracies rest on, and the step that gives one run's
    accuracy (one example = 100/n percentage points)."""
    n = sorted({v for v in runs["test_examples"].to_list() if v}) \
        if "test_examples" in runs.columns else []
    if not n:
        return "The number of test examples behind the accuracies is unknown."
    shown = str(n[0]) if len(n) == 1 else f"{n[0]}–{n[-1]}"
    return (f"Each run's test accuracy rests on {shown} test examples (column 'test examples'): "
            f"one example is {100 / n[0]:.3g} points{' at most' if len(n) > 1 else ''}.")
