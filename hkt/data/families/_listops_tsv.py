"""ListOps from Long Range Arena's official TSV files (``lra_release/listops-1000/``).

Private to :mod:`hkt.data.families.listops` (the registry skips ``_`` modules): the family
generates its data unless ``task.prepare.source`` or ``read_tsv`` points it at these files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hkt.data.families._listops_vocab import CLOSE, DIGIT0, OPERATORS, PAD, TOKENIZER, VOCAB, evaluate
from hkt.data.parquet import Prepared, SplitData
from hkt.errors import DataError
from hkt.fileio import sha256_file

_TSV_OPS = [(name, chr(1 + k)) for k, name in enumerate(OPERATORS)]
_TSV_TABLE = str.maketrans({"(": None, ")": None, " ": None, "]": chr(CLOSE),
                            **{str(d): chr(DIGIT0 + d) for d in range(10)}})
TSV_CHECKED_ROWS = 1000  # rows per file whose label is re-evaluated (a format check; all rows is slow)


def read_tsv(path: Path, split: str, max_length: int) -> SplitData:
    """Read one LRA ListOps TSV file (header ``Source\\tTarget``, parenthesised trees)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"missing ListOps TSV file {path} (expected LRA's {path.name} with a "
                        f"'Source\\tTarget' header)") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text: {exc}") from None
    if not lines or lines[0].strip().split("\t") != ["Source", "Target"]:
        raise DataError(f"{path}: expected the header 'Source\\tTarget' on line 1, "
                        f"found {lines[0][:60]!r}" if lines else f"{path} is empty")
    chunks, lens, labels, truncated = [], [], [], 0
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise DataError(f"{path}:{lineno}: expected 2 tab-separated columns, found {len(cols)}")
        src, target = cols
        s = src.strip()
        for name, code in _TSV_OPS:
            s = s.replace(name, code)
        s = s.translate(_TSV_TABLE)
        b = s.encode("latin-1", errors="replace")
        arr = np.frombuffer(b, dtype=np.uint8)
        if arr.size == 0 or arr.min() < 1 or arr.max() >= DIGIT0 + 10 or any(
                c.isdigit() and n.isdigit() for c, n in zip(src, src[1:])):
            bad = next((tok for tok in src.split() if tok.strip("()") and tok.strip("()") not in VOCAB[1:]), "?")
            raise DataError(f"{path}:{lineno}: unknown or malformed token {bad!r}; expected tokens "
                            f"{' '.join(VOCAB[1:])} and parentheses")
        try:
            label = int(target)
        except ValueError:
            raise DataError(f"{path}:{lineno}: target {target!r} is not an integer 0..9") from None
        if not 0 <= label <= 9:
            raise DataError(f"{path}:{lineno}: target {label} is not in 0..9")
        if len(labels) < TSV_CHECKED_ROWS:
            try:
                value = evaluate(arr)
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: malformed expression ({exc})") from None
            if value != label:
                raise DataError(f"{path}:{lineno}: target {label} but the expression evaluates to {value}")
        if arr.size > max_length:
            arr = arr[:max_length]
            truncated += 1
        chunks.append(arr)
        lens.append(arr.size)
        labels.append(label)
    if not labels:
        raise DataError(f"{path} has a header but no examples")
    ids = [f"{split}/{i:06d}" for i in range(len(labels))]
    return SplitData.from_lengths(ids, np.concatenate(chunks), np.asarray(lens), np.asarray(labels),
                                  {"truncated": truncated})


def from_tsv(cfg: dict[str, Any], source: Path) -> Prepared:
    """The three splits read from the TSV files named by ``task.prepare.tsv_files`` in ``source``."""
    p = cfg["prepare"]
    splits = {s: read_tsv(source / p["tsv_files"][s], s, cfg["max_length"]) for s in ("train", "val", "test")}
    src = {"kind": "lra_tsv", "files": {s: p["tsv_files"][s] for s in splits},
           "sha256": {s: sha256_file(source / p["tsv_files"][s]) for s in splits}}
    notes = ["Read from Long Range Arena's official ListOps TSV files; parentheses dropped (the fixed "
             "LRA tokenisation).",
             f"The labels of the first {TSV_CHECKED_ROWS} rows of each file were re-evaluated and match.",
             f"Examples longer than T = {cfg['max_length']} are truncated (count in the table)."]
    return Prepared(splits=splits, vocab=VOCAB, pad_id=PAD, tokenizer=TOKENIZER,
                    class_names=[str(d) for d in range(10)], source=src, notes=notes,
                    location=str(source))
