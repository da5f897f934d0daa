"""Bring a results directory or a publication written before 0.2.0 to the current config names,
once. Since 0.2.0 the code reads current names only (there is no old-name layer); this script is
the one place that still knows the old ones.

    .venv/bin/python scripts/migrate_results.py DIR [DIR ...]          # migrate in place
    .venv/bin/python scripts/migrate_results.py --check DIR [DIR ...]  # list what would change

DIR is a results directory (``results_dir``) or a publication (``docs/results/NAME``). What
changes, in every run record (``record.json``: its ``config``, and its ``variant``), composed
run config (``config.yaml``) and checkpoint (``*.pt``: its ``config`` and its model's keys):

- renamed keys: ``model.attention`` -> ``model.mixer``, ``model.attn_dropout`` ->
  ``model.mixer_dropout``, ``task.name`` -> ``task.family``; the variant label ``default`` ->
  ``main``; a checkpoint's ``blocks.N.attn.…`` -> ``blocks.N.mixer.…``;
- keys added later (:data:`ADDED_KEYS`) are filled in at the value that means what the run did
  without them (``model.norm: layer``, ``model.norm_place: pre``, S4D's ``n_ssm``, …);
- no suite: a record's ``suite`` and an MLflow run's ``suite`` tag held ``custom`` (config files
  naming no suite), ``mixed`` (a suite run over several) or nothing for it; a record is null there
  now (the tag ``none``), and a record of before records named their suite gets it from its
  config's ``tracking.suite``;
- the MLflow store ``DIR/mlflow.db``: the runs' renamed params, ``variant`` and ``suite`` tags,
  and their validation metrics (the curve ``val_acc`` -> ``val_accuracy``; the best, metric
  ``val_accuracy`` logged once -> tag ``best_val_accuracy``);
- Snakemake's record of the training jobs' rerun triggers (``.snakemake/metadata`` of the
  checkout the workflow ran from, ``--snakemake-dir``, default the current directory): a finished
  training job whose config is unchanged but for the names is recorded under the current
  spelling, so the workflow sees it as up to date instead of rerunning it.

Idempotent (a migrated directory has nothing left to change); a results directory a workflow is
running in is refused (its ``.workflow.lock`` is held while migrating); each file is replaced atomically
(:mod:`hkt.fileio`), and every file is read and checked before any is written, so a file that
cannot be read stops the script with one line naming it and nothing changed. Exit status: 0 when
done (or, with ``--check``, when nothing would change), 1 when ``--check`` lists changes, 2 on an
error.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import json
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hkt.errors import HKTError
from hkt.fileio import atomic_write_text
from hkt.mlflow_store import BEST_VAL_TAG, SERIES_METRICS
from hkt.provenance import NO_SUITE, SUITE_TAG

#: old dotted key -> current one (a rename within one node)
RENAMED_KEYS = {"model.attention": "model.mixer", "model.attn_dropout": "model.mixer_dropout",
                "task.name": "task.family"}
#: top-level key -> {old value: current one}: the unablated run was ``default`` when `hkt train`
#: had no variant, ``main`` in the workflow (config/variant/main.yaml changes nothing)
RENAMED_VALUES = {"variant": {"default": "main"}}
#: the config group ``experiment`` is ``variant`` now (an override ``experiment=NAME``)
RENAMED_GROUPS = {"experiment": "variant"}
#: key added later -> (the value that means what a run without it did, the model it belongs to
#: or None for every encoder); a baseline's record has no encoder keys and gets none
ADDED_KEYS = {"model.norm": ("layer", None), "model.norm_place": ("pre", None),
              "model.mixer.n_ssm": (None, "s4d"), "model.mixer.train_B": (False, "s4d"),
              "model.mixer.dt_lr": (None, "s4d"), "model.mixer.D_weight_decay": (None, "s4d")}
#: a block's mixer in a state_dict before it was ``mixer``
OLD_STATE_KEY = re.compile(r"^(blocks\.\d+\.)attn\.")
#: the ``tracking.suite=NAME`` word the train rule's overrides spelled before 0.2.0; the suite is
#: its own rerun trigger now
OLD_SUITE_WORD = re.compile(r"^tracking\.suite=(.*)$")
#: what stood for "no suite" before 0.2.0 (a record's ``suite``, a ``suite`` tag, a config's
#: ``tracking.suite``): nothing, ``custom`` (config files naming no suite) and ``mixed`` (a suite
#: run over the records of several); now a record holds null and a tag ``none``
OLD_NO_SUITE = ("", "custom", "mixed")
#: the validation curve's MLflow metric before 0.2.0, and now (when ``val_accuracy`` was the best,
#: logged once at the end; the best is now the tag ``best_val_accuracy``)
OLD_CURVE_METRIC, CURVE_METRIC = "val_acc", SERIES_METRICS["val_acc"]


class MigrationError(HKTError):
    """A file that cannot be read or migrated: nothing was written."""


# --- configs and records: plain mappings -> plain mappings (copies, order kept) ----------------


def _rename_key(cfg: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``cfg`` with the dotted ``old`` key under the name ``new`` (same node), in its place."""
    *parents, old_leaf = old.split(".")
    new_leaf = new.split(".")[-1]

    def walk(node: Any, path: list[str]) -> Any:
        if not isinstance(node, dict):
            return node
        if not path:
            if old_leaf not in node:
                return node
            if new_leaf in node:  # both: the current one wins
                return {k: v for k, v in node.items() if k != old_leaf}
            return {new_leaf if k == old_leaf else k: v for k, v in node.items()}
        head, *rest = path
        if head not in node:
            return node
        return {**node, head: walk(node[head], rest)}

    return walk(cfg, parents)


def _added_keys_of(cfg: dict[str, Any]) -> list[tuple[list[str], str, Any, Any]]:
    """``(parents, leaf, value of before, the node that holds the leaf or None)`` of each
    :data:`ADDED_KEYS` key that applies to ``cfg``'s model: an encoder's (one with ``d_model``),
    and for a key of one mixer only, that mixer's; none for a baseline's record."""
    model = cfg.get("model")
    if not isinstance(model, dict) or "d_model" not in model:
        return []
    found = []
    for key, (before, name) in ADDED_KEYS.items():
        if name is not None and model.get("name") != name:
            continue
        *parents, leaf = key.split(".")
        node: Any = cfg
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        found.append((parents, leaf, before, node))
    return found


def _field_order(cfg: dict[str, Any], parents: list[str]) -> list[str]:
    """The keys of the node at ``parents`` in the order the current code writes them: the fields
    of its dataclass (``model``: the encoder's, ``model.mixer``: the model's mixer's)."""
    import dataclasses

    from hkt.mixers.catalog import mixer_class
    from hkt.models.encoder import EncoderConfig

    cls = EncoderConfig if parents == ["model"] else mixer_class(cfg["model"]["name"]).config_class
    return [f.name for f in dataclasses.fields(cls)]


def _insert(node: dict[str, Any], leaf: str, value: Any, order: list[str]) -> dict[str, Any]:
    """``node`` with ``leaf`` where ``order`` puts it: after the last key of ``node`` that comes
    before it there (first when none does), so a migrated file reads as the current code writes."""
    earlier = set(order[:order.index(leaf)])
    items = list(node.items())
    items.insert(max((i + 1 for i, (k, _) in enumerate(items) if k in earlier), default=0),
                 (leaf, value))
    return dict(items)


def _add_missing(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with each :data:`ADDED_KEYS` key that an encoder's config lacks, at its value of
    before it existed, in the place the current code writes it (:func:`_field_order`)."""
    for parents, leaf, before, _ in _added_keys_of(cfg):
        node: Any = cfg
        for p in parents:  # as it is now, with the keys added before this one
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf not in node:
            placed = _insert(node, leaf, before, _field_order(cfg, parents))
            cfg = _set(cfg, parents[:-1], parents[-1], placed)
    return cfg


def _set(cfg: dict[str, Any], parents: list[str], leaf: str, value: Any) -> dict[str, Any]:
    if not parents:
        return {**cfg, leaf: value}
    return {**cfg, parents[0]: _set(cfg[parents[0]], parents[1:], leaf, value)}


def migrate_config(cfg: Any) -> Any:
    """A saved training config in the current names, with the added keys filled in; anything
    that is not a mapping as it is."""
    if not isinstance(cfg, dict):
        return cfg
    for key, values in RENAMED_VALUES.items():
        if isinstance(cfg.get(key), str) and cfg[key] in values:
            cfg = {**cfg, key: values[cfg[key]]}
    for old, new in RENAMED_KEYS.items():
        cfg = _rename_key(cfg, old, new)
    return _add_missing(cfg)


def migrate_record(record: Any) -> Any:
    """A run record in the current names: its ``config``, its ``variant`` and its ``suite``."""
    if not isinstance(record, dict):
        return record
    out = dict(record)
    if "config" in out:
        out["config"] = migrate_config(out["config"])
    tracking = out["config"].get("tracking") if isinstance(out.get("config"), dict) else None
    if SUITE_TAG not in out and isinstance(tracking, dict) and SUITE_TAG in tracking:
        out[SUITE_TAG] = tracking[SUITE_TAG]  # before records named their suite
    if out.get(SUITE_TAG) in OLD_NO_SUITE:
        out[SUITE_TAG] = None
    for key, values in RENAMED_VALUES.items():
        if isinstance(out.get(key), str) and out[key] in values:
            out[key] = values[out[key]]
    return out


def migrate_overrides(words: list[str]) -> list[str]:
    """``hkt train`` overrides in the current names (``experiment=X`` -> ``variant=X``,
    ``model.attention.levels=2`` -> ``model.mixer.levels=2``)."""
    out = []
    for word in words:
        prefix = word[:len(word) - len(word.lstrip("+~"))]
        key, eq, value = word[len(prefix):].partition("=")
        group, at, package = key.partition("@")
        if group in RENAMED_GROUPS:
            key = f"{RENAMED_GROUPS[group]}{at}{package}"
        for old, new in RENAMED_KEYS.items():
            if key == old or key.startswith(old + "."):
                key = new + key[len(old):]
        if key in RENAMED_VALUES and value in RENAMED_VALUES[key]:
            value = RENAMED_VALUES[key][value]
        out.append(f"{prefix}{key}{eq}{value}")
    return out


# --- the files ---------------------------------------------------------------------------------


@dataclass
class Change:
    """One file (or store) to rewrite: what, and how (``write`` is called only after every
    file was read)."""

    path: Path
    what: str
    write: Callable[[], None]

    def apply(self) -> None:
        """Write, keeping the file's modification time: the content means what it meant, and the
        workflow (which reruns what is older than its inputs) must see nothing new."""
        times = self.path.stat()
        self.write()
        os.utime(self.path, ns=(times.st_atime_ns, times.st_mtime_ns))


def _json_change(path: Path) -> Change | None:
    try:
        record = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MigrationError(f"cannot read run record {path}: {exc}; restore it (or remove its "
                             "run directory) and migrate again") from None
    new = migrate_record(record)
    if new == record and list(_flat(new)) == list(_flat(record)):
        return None
    text = json.dumps(new, indent=2, sort_keys=False) + "\n"  # as hkt.run_record.write_record
    return Change(path, "run record", lambda: atomic_write_text(path, text))


def _flat(obj: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key of ``obj``, in order (a rename that keeps equal values still counts)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + str(k)
            yield from _flat(v, f"{prefix}{k}.")


def _yaml_change(path: Path) -> Change | None:
    from omegaconf import OmegaConf

    try:
        cfg = OmegaConf.to_container(OmegaConf.load(path))
    except Exception as exc:  # OmegaConf raises several kinds for a broken file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MigrationError(f"cannot read run config {path}: {first}; restore it (or remove its "
                             "run directory) and migrate again") from None
    if not (isinstance(cfg, dict) and isinstance(cfg.get("model"), dict)
            and isinstance(cfg.get("task"), dict)):  # not a training run's config
        return None
    new = migrate_config(cfg)
    if list(_flat(new)) == list(_flat(cfg)) and new == cfg:
        return None
    text = OmegaConf.to_yaml(OmegaConf.create(new))  # as hkt.train.rundir writes it
    return Change(path, "run config", lambda: atomic_write_text(path, text))


def _migrate_checkpoint(ck: Any) -> tuple[Any, bool]:
    """A checkpoint's mapping in the current names, and whether anything changed."""
    if not isinstance(ck, dict):
        return ck, False
    changed = False
    if isinstance(ck.get("config"), dict):
        cfg = migrate_config(ck["config"])
        if list(_flat(cfg)) != list(_flat(ck["config"])) or cfg != ck["config"]:
            ck, changed = {**ck, "config": cfg}, True
    model = ck.get("model")
    if isinstance(model, dict) and any(OLD_STATE_KEY.match(k) for k in model):
        ck = {**ck, "model": {OLD_STATE_KEY.sub(r"\1mixer.", k): v for k, v in model.items()}}
        changed = True
    return ck, changed


def _load_checkpoint(path: Path) -> Any:
    """:func:`hkt.train.checkpoint.load_checkpoint`, its error (empty, truncated, foreign file)
    as this script's."""
    from hkt.train.checkpoint import load_checkpoint

    try:
        return load_checkpoint(path)
    except HKTError as exc:
        raise MigrationError(f"{exc}; then migrate again") from None


def _checkpoint_change(path: Path) -> Change | None:
    if not _migrate_checkpoint(_load_checkpoint(path))[1]:
        return None

    def write() -> None:  # read again: a results directory's checkpoints need not all fit in memory
        from hkt.train.checkpoint import save_checkpoint

        save_checkpoint(_migrate_checkpoint(_load_checkpoint(path))[0], path)

    return Change(path, "checkpoint", write)


def _old_best_runs(db: sqlite3.Connection) -> list[tuple[str, float]]:
    """The finished runs of before 0.2.0 (``test_accuracy`` logged, no tag
    :data:`~hkt.mlflow_store.BEST_VAL_TAG`) and their best validation accuracy, which they logged
    as metric ``val_accuracy``, once, at the end."""
    return db.execute(
        "SELECT v.run_uuid, v.value FROM latest_metrics v JOIN latest_metrics t"
        " ON t.run_uuid = v.run_uuid AND t.key = 'test_accuracy' WHERE v.key = ? AND NOT EXISTS"
        " (SELECT 1 FROM tags g WHERE g.run_uuid = v.run_uuid AND g.key = ?)",
        (CURVE_METRIC, BEST_VAL_TAG)).fetchall()


def _mlflow_change(path: Path) -> Change | None:
    """An MLflow SQLite store's renamed params, ``variant`` and ``suite`` tags, and its runs'
    validation metrics: the best (metric ``val_accuracy`` before 0.2.0) becomes the tag
    ``best_val_accuracy``, the curve (``val_acc``) metric ``val_accuracy``."""
    values = {**RENAMED_VALUES, SUITE_TAG: dict.fromkeys(OLD_NO_SUITE, NO_SUITE)}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            count = 0
            for old in RENAMED_KEYS:
                count += db.execute("SELECT COUNT(*) FROM params WHERE key = ? OR key LIKE ?",
                                    (old, old + ".%")).fetchone()[0]
            for key, renamed in values.items():
                for old_value in renamed:
                    count += db.execute("SELECT COUNT(*) FROM tags WHERE key = ? AND value = ?",
                                        (key, old_value)).fetchone()[0]
            count += len(_old_best_runs(db))
            count += db.execute("SELECT COUNT(*) FROM latest_metrics WHERE key = ?",
                                (OLD_CURVE_METRIC,)).fetchone()[0]
    except sqlite3.Error as exc:
        raise MigrationError(f"cannot read the MLflow store {path}: {exc}; stop whatever is "
                             "using it (an MLflow server, a workflow) and migrate again") from None
    if not count:
        return None

    def write() -> None:
        with contextlib.closing(sqlite3.connect(path)) as db, db:  # one transaction
            for old, new in RENAMED_KEYS.items():  # the key itself, then those below it
                db.execute("UPDATE OR IGNORE params SET key = ? WHERE key = ?", (new, old))
                db.execute("UPDATE OR IGNORE params SET key = ? || substr(key, ?) WHERE key LIKE ?",
                           (new, len(old) + 1, old + ".%"))
            for key, renamed in values.items():
                for old_value, new_value in renamed.items():
                    db.execute("UPDATE tags SET value = ? WHERE key = ? AND value = ?",
                               (new_value, key, old_value))
            for run, best in _old_best_runs(db):
                db.execute("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                           (BEST_VAL_TAG, repr(float(best)), run))
                for table in ("metrics", "latest_metrics"):
                    db.execute(f"DELETE FROM {table} WHERE run_uuid = ? AND key = ?",
                               (run, CURVE_METRIC))
            # the curve under its name; where a run resumed across 0.2.0 logged both, the
            # latest value is the newer name's
            for table in ("metrics", "latest_metrics"):
                db.execute(f"UPDATE OR IGNORE {table} SET key = ? WHERE key = ?",
                           (CURVE_METRIC, OLD_CURVE_METRIC))
                db.execute(f"DELETE FROM {table} WHERE key = ?", (OLD_CURVE_METRIC,))

    return Change(path, f"MLflow store ({count} params, tags and validation metrics)", write)


# --- Snakemake's rerun triggers ------------------------------------------------------------------


def _old_digest_form(cfg: dict[str, Any]) -> dict[str, Any]:
    """How a config was digested before 0.2.0: renamed keys under their old names, added keys
    left out at their value of before."""
    for parents, leaf, before, node in _added_keys_of(cfg):
        if (isinstance(node, dict) and leaf in node and node[leaf] == before
                and type(node[leaf]) is type(before)):
            cfg = _drop(cfg, parents, leaf)
    for old, new in RENAMED_KEYS.items():
        cfg = _rename_key(cfg, new, old)
    return cfg


def _drop(cfg: dict[str, Any], parents: list[str], leaf: str) -> dict[str, Any]:
    if not parents:
        return {k: v for k, v in cfg.items() if k != leaf}
    return {**cfg, parents[0]: _drop(cfg[parents[0]], parents[1:], leaf)}


def _digests(words: tuple[str, ...]) -> tuple[str, str]:
    """The config digest of ``hkt train`` overrides as the workflow takes it now, and as it took
    it before 0.2.0."""
    from hkt.train.run_config import load_config, strip_for_compare
    from hkt.workflow.job_configs import config_digest

    cfg = strip_for_compare(load_config(list(words)))
    return config_digest(cfg), config_digest(_old_digest_form(cfg))


def _metadata_target(meta: Path, f: Path) -> str | None:
    """The output path whose Snakemake record ``f`` is (its name is the path in URL-safe
    base64, split into folders of ``@``-prefixed chunks when long); None for another file."""
    b64 = "".join(p[1:] if p.startswith("@") else p for p in f.relative_to(meta).parts)
    try:
        return base64.urlsafe_b64decode(b64.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def _snakemake_changes(results: list[Path], snakemake_dir: Path) -> list[Change]:
    """Snakemake's records of the finished training jobs under ``results`` whose config is the
    same but for the names: their params (the overrides, the suite and the config digest, the
    train rule's rerun triggers) as the workflow spells them now."""
    meta = snakemake_dir / ".snakemake" / "metadata"
    if not meta.is_dir():
        return []
    roots = [str(r.resolve()) for r in results]
    digests: dict[tuple[str, ...], tuple[str, str]] = {}
    changes = []
    for f in sorted(p for p in meta.rglob("*") if p.is_file()):
        target = _metadata_target(meta, f)
        if target is None or not target.endswith("record.json"):
            continue
        full = str((snakemake_dir / target).resolve())
        if not any(full.startswith(r + "/") for r in roots):
            continue
        try:
            data = json.loads(f.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MigrationError(f"cannot read Snakemake's record {f} (of {target}): {exc}; "
                                 "delete it (Snakemake then reruns that job) and migrate "
                                 "again") from None
        if not isinstance(data, dict) or data.get("rule") != "train":
            continue
        new = _train_params(data.get("params") or [], digests)
        if new is None:
            continue
        text = json.dumps({**data, "params": new})
        changes.append(Change(f, f"Snakemake's record of {target}",
                              lambda f=f, text=text: atomic_write_text(f, text)))
    return changes


def _train_params(params: list[Any], digests: dict) -> list[str] | None:
    """The train rule's recorded params (each a ``repr``) in the current spelling, or None when
    they are not the old spelling or the job's config changed beyond the names (then it reruns,
    as it should)."""
    from hkt.workflow.job_configs import seedless

    words = digest = None
    for p in params:
        with contextlib.suppress(ValueError, SyntaxError, TypeError):
            value = ast.literal_eval(p)
            if isinstance(value, list) and any(OLD_SUITE_WORD.match(str(w)) for w in value):
                words = [str(w) for w in value]
            elif isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value):
                digest = p
    if words is None or digest is None:
        return None
    suite = next(m.group(1) for w in words if (m := OLD_SUITE_WORD.match(w)))
    current = migrate_overrides([w for w in words if not OLD_SUITE_WORD.match(w)])
    key = tuple(seedless(current))
    if key not in digests:
        try:
            digests[key] = _digests(key)
        except HKTError:
            return None  # no longer composes: the workflow says why when it starts
    new_digest, old_digest = digests[key]
    if repr(old_digest) != digest:
        return None
    rest = [p for p in params if p != digest and p != repr(words)]
    return sorted([*rest, repr(current), repr(NO_SUITE if suite in OLD_NO_SUITE else suite),
                   repr(new_digest)])


# --- the command ---------------------------------------------------------------------------------


def plan(dirs: list[Path], snakemake_dir: Path) -> list[Change]:
    """Every change the migration of ``dirs`` makes, each file read and checked (nothing
    written)."""
    changes: list[Change] = []
    for d in dirs:
        if not d.is_dir():
            raise MigrationError(f"{d} is not a directory: give a results directory or a "
                                 "publication (docs/results/NAME)")
        for path in sorted(d.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            change = None
            if path.name == "record.json":
                change = _json_change(path)
            elif path.name == "config.yaml":
                change = _yaml_change(path)
            elif path.suffix == ".pt" and path.parent.name == "checkpoints":
                change = _checkpoint_change(path)
            elif path.name == "mlflow.db" and path.parent == d:
                change = _mlflow_change(path)
            if change:
                changes.append(change)
    return changes + _snakemake_changes(dirs, snakemake_dir)


def claim(dirs: list[Path], checkout: Path) -> None:
    """Hold each results directory a workflow has run in (it has a ``.workflow.lock``) as a
    workflow does (:mod:`hkt.workflow.results_lock`), so that none runs there while it is migrated."""
    from hkt.workflow.results_lock import LOCK_NAME, ResultsInUse, claim_results_dir

    for d in dirs:
        if (d / LOCK_NAME).exists():
            try:
                claim_results_dir(d, checkout)
            except ResultsInUse as exc:
                raise MigrationError(f"{exc}; migrate it when the workflow has stopped") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                    help="results directories or publications (docs/results/NAME)")
    ap.add_argument("--check", action="store_true",
                    help="list what would change and write nothing (exit 1 if anything would)")
    ap.add_argument("--snakemake-dir", type=Path, default=Path("."),
                    help="the checkout the workflow ran from, whose .snakemake/metadata records "
                         "the training jobs' rerun triggers (default: the current directory)")
    args = ap.parse_args(argv)
    try:
        if not args.check:
            claim(args.dirs, args.snakemake_dir)
        changes = plan(args.dirs, args.snakemake_dir)
        for c in changes:
            print(f"{'would migrate' if args.check else 'migrating'} {c.what}: {c.path}")
            if not args.check:
                c.apply()
    except MigrationError as exc:
        print(f"migrate_results: error: {exc}", file=sys.stderr)
        return 2
    where = ", ".join(map(str, args.dirs))
    if args.check:
        print(f"{len(changes)} file(s) would change in {where}" if changes
              else f"nothing to migrate in {where}")
        return 1 if changes else 0
    print(f"migrated {len(changes)} file(s) in {where}" if changes
          else f"nothing to migrate in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
