"""``hkt analyze``: the paper's analyses of one trained run, as one tidy table plus figures.

Sections (docs/design.md §4), each a set of rows ``(section, layer, head, level, quantity,
metric, value)``:

- ``kurtosis``: Mardia's κ and test of the per-level score entries (d = 1) and of the
  per-level query and key vectors (d = head width), on a fixed sample of the split.
- ``kernel``: M = W_Q W_Kᵀ/√d per layer, head and level; antisymmetric share, spectrum of M_s,
  whether the paper's PSD sufficient condition holds.
- ``gram``: numerical rank of the symmetrised fused Gram on real inputs vs Σ_l rank(M_s^(l)).
- ``fusion``: distribution of λ per level over real tokens (HKT only).
- ``truncation``: accuracy when only levels < L′ are kept, L′ = 1..L (HKT only).
- ``approximation``: how far the fused scores, attention rows and outputs with levels < L′ are
  from the full model's, and their geometric decay in L′, trained and at initialisation (HKT only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hkt.analysis.approximation import approximation_rows
from hkt.analysis.capture import capture_internals
from hkt.analysis.fusion import lambda_stats
from hkt.analysis.kernel import as_float64, decompose_bilinear, gram_rank_report, head_columns, psd_condition
from hkt.analysis.kurtosis import mardia_test, take_rows
from hkt.mixers.hkt import truncate_levels
from hkt.mixers.upsample import Upsampler
from hkt.data.load import TokenDataset, read_split_metadata
from hkt.errors import DataError, HKTError
from hkt.models import build_model
from hkt.run_record import load_record
from hkt.train.checkpoint import load_checkpoint
from hkt.train.data import RunData


def levels_of(attn: nn.Module) -> int:
    """The number of levels an attention module has (its ``levels`` setting; 1 without one)."""
    return int(getattr(attn, "levels", 1))


def is_multilevel(attn: nn.Module) -> bool:
    """Whether ``attn`` is a pyramid of levels fused by learned weights λ (it has a ``levels``
    setting, even L = 1): the fusion and truncation sections apply to it."""
    return hasattr(attn, "levels")


@dataclass
class TrainedRun:
    """A finished run: its record, its best-validation model and where its data are."""

    run_dir: Path
    record: dict[str, Any]
    model: nn.Module
    data_dir: Path


def load_trained_run(run_dir: str | Path, *, data_dir: str | Path | None = None,
                     device: torch.device | str = "cpu") -> TrainedRun:
    """Load ``RUN_DIR/record.json`` and the best checkpoint into a model in eval mode."""
    run_dir = Path(run_dir)
    record = load_record(run_dir)
    ckpt_path = run_dir / "checkpoints" / "best.pt"
    if not ckpt_path.is_file():
        raise HKTError(f"{ckpt_path} is missing: the run has a record but no best checkpoint; "
                       "re-run `hkt train` for it")
    data = Path(data_dir or record["data_dir"])
    if not data.is_dir():
        raise DataError(f"the run's data directory {data} does not exist; pass --data DIR")
    # --data: other data than the run's own must be of the run's task (family, task file, T);
    # every split's metadata and ranges are checked before a split is read (RunData)
    RunData(data, (record.get("config") or {}).get("task") or {})
    model = initial_model(record, data)
    model.load_state_dict(load_checkpoint(ckpt_path)["model"])
    return TrainedRun(run_dir, record, model.to(device).eval(), data)


def initial_model(record: dict[str, Any], data_dir: Path) -> nn.Module:
    """The run's architecture as its training started: its config and seed, no steps taken
    (training seeds torch with the run's seed right before building the model)."""
    meta = read_split_metadata(data_dir, "train")
    cfg = record["config"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(record["seed"]))
        return build_model(cfg["model"], vocab_size=int(meta["vocab_size"]),
                           num_classes=int(meta["num_classes"]),
                           max_length=int(cfg["task"]["max_length"])).eval()


def _sample_rows(n: int, k: int | None, seed: int) -> np.ndarray:
    """A sorted, seeded sample of k of n row numbers (all of them when k is None or ≥ n)."""
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def _batches(dataset: TokenDataset, rows: np.ndarray, batch_size: int, device: torch.device):
    """Padded batches of the given rows, in order."""
    for start in range(0, len(rows), batch_size):
        batch = dataset.batch(rows[start : start + batch_size])
        yield {k: v.to(device) for k, v in batch.items()}


class _Collector:
    """Accumulates, batch by batch, the samples each statistic needs (bounded memory)."""

    def __init__(self, cfg: Any, n_batches: int) -> None:
        self.quota = max(1, math.ceil(int(cfg.kurtosis_max_samples) / max(1, n_batches)))
        self.gen = np.random.default_rng(int(cfg.seed))
        self.samples: dict[tuple[str, int, int, int], list[np.ndarray]] = {}
        self.lambdas: dict[tuple[int, int], list[np.ndarray]] = {}

    def add(self, key: tuple[str, int, int, int], x: torch.Tensor) -> None:
        """Keep a seeded sample of at most ``quota`` rows of x; only those leave the device."""
        self.samples.setdefault(key, []).append(take_rows(x, self.quota, self.gen))

    def collect(self, layer: int, internals, attn: nn.Module, mask: torch.Tensor) -> None:
        n_levels, n_heads = len(internals.queries), internals.queries[0].shape[1]
        causal = bool(getattr(attn, "causal", False))
        for level in range(n_levels):
            lmask = internals.level_masks[level]
            q, k, s = internals.queries[level], internals.keys[level], internals.scores[level]
            t_l = q.shape[2]
            real = lmask if lmask is not None else torch.ones(q.shape[0], t_l, dtype=torch.bool, device=q.device)
            pair = real[:, :, None] & real[:, None, :]
            if causal:
                pair = pair & torch.ones(t_l, t_l, dtype=torch.bool, device=q.device).tril()
            for h in range(n_heads):
                self.add(("queries", layer, h, level), q[:, h][real])
                self.add(("keys", layer, h, level), k[:, h][real])
                self.add(("scores", layer, h, level), s[:, h][pair])
        if is_multilevel(attn):  # single-level attention's λ is constant ones: nothing to summarise
            lam = as_float64(internals.lambdas.transpose(1, 2)[mask])  # (B, H, T, L) -> (N, H, L)
            for h in range(n_heads):
                self.lambdas.setdefault((layer, h), []).append(lam[:, h])

    def statistics(self, cfg: Any) -> list[dict[str, Any]]:
        rows = []
        for (quantity, layer, head, level), parts in sorted(self.samples.items()):
            x = np.concatenate(parts)
            if quantity == "scores":
                x = x.reshape(-1)
            res = mardia_test(x, max_samples=int(cfg.kurtosis_max_samples), seed=int(cfg.seed),
                              rank_rtol=float(cfg.kurtosis_rank_rtol))
            for metric in ("kappa", "b2", "z", "p_value", "n", "d"):
                rows.append(_row("kurtosis", layer, head, level, quantity, metric, getattr(res, metric)))
            rows.append(_row("kurtosis", layer, head, level, quantity, "singular", float(res.singular)))
        return rows


def _row(section: str, layer: int, head: int, level: int, quantity: str, metric: str, value: Any) -> dict[str, Any]:
    return {"section": section, "layer": int(layer), "head": int(head), "level": int(level),
            "quantity": quantity, "metric": metric, "value": float(value)}


def _projections(attn: nn.Module, level: int) -> tuple[torch.Tensor, torch.Tensor]:
    """W_Q, W_K of ``level``: one projection per level, or one for a single-level module."""
    q, k = attn.q_proj, attn.k_proj
    if isinstance(q, nn.ModuleList):
        q, k = q[level], k[level]
    return q.weight, k.weight


def kernel_rows(model: nn.Module, rtol: float | None) -> tuple[list[dict[str, Any]], dict]:
    """Decomposition of M^(l) per layer, head and level; returns rows and the parts."""
    rows, parts = [], {}
    for layer, attn in enumerate(model.mixer_modules()):
        n_levels = levels_of(attn)
        d = attn.head_dim
        for head in range(attn.n_heads):
            for level in range(n_levels):
                w_q, w_k = _projections(attn, level)
                p = decompose_bilinear(head_columns(w_q, head, d), head_columns(w_k, head, d), d, rtol=rtol)
                parts[(layer, head, level)] = p
                for metric, value in p.summary().items():
                    rows.append(_row("kernel", layer, head, level, "M", metric, value))
            levels = [parts[(layer, head, lv)] for lv in range(n_levels)]
            cond = psd_condition(levels, np.full(n_levels, 1.0 / n_levels), rtol=rtol)
            rows.append(_row("kernel", layer, head, -1, "M", "psd_condition", float(bool(cond))))
    return rows, parts


def _upsampled(attn: nn.Module, z: torch.Tensor, level: int, n: int) -> torch.Tensor:
    """U_l z on the first n tokens, z (B, H, T_l, D) being level l's cropped features.

    The internals hold the T_l = ceil(T / s^l) positions of the unpadded input, not the model's
    padded grid, so linear interpolation is taken on that cropped grid (T_l · s^l points): at the
    sequence's last block it uses the cropped grid's edge rather than the padded neighbour.
    MHA has level 0 only, where U_0 is the identity.
    """
    stride = getattr(attn, "stride", 1)
    grid = z.shape[2] * stride**level
    return Upsampler(getattr(attn, "upsample", "nearest"), stride, n, grid).up(z, level)


def gram_rows(model: nn.Module, captured_first: list, parts: dict, cfg: Any,
              mask: torch.Tensor) -> list[dict[str, Any]]:
    """Rank of the symmetrised Gram on the first sequences of the sample vs the rank bound."""
    rows = []
    n_seq = min(int(cfg.gram_examples), mask.shape[0])
    rtol = cfg.rank_rtol
    for layer, (attn, internals) in enumerate(zip(model.mixer_modules(), captured_first)):
        n_levels = len(internals.features)
        for i in range(n_seq):
            n = min(int(mask[i].sum()), int(cfg.gram_max_length))
            feats = [as_float64(_upsampled(attn, x[i : i + 1, None], level, n)[0, 0])
                     for level, x in enumerate(internals.features)]
            for head in range(attn.n_heads):
                lam = as_float64(internals.lambdas[i, head, :n])
                levels = [parts[(layer, head, lv)] for lv in range(n_levels)]
                rep = gram_rank_report(feats, levels, lam if n_levels > 1 else lam[:, :1], rtol=rtol)
                for metric, value in (("rank", rep.rank), ("rank_bound", rep.rank_bound),
                                      ("lambda_min", rep.lambda_min), ("psd", float(rep.psd)),
                                      ("length", n)):
                    rows.append(_row("gram", layer, head, -1, f"example{i}", metric, value))
    return rows


def fusion_rows(collector: _Collector) -> list[dict[str, Any]]:
    rows = []
    for (layer, head), parts in sorted(collector.lambdas.items()):
        stats = lambda_stats(np.concatenate(parts))
        for r in stats.rows():
            level = int(r.pop("level"))
            for metric, value in r.items():
                rows.append(_row("fusion", layer, head, level, "lambda", metric, value))
        rows.append(_row("fusion", layer, head, -1, "lambda", "mean_entropy", stats.mean_entropy))
        rows.append(_row("fusion", layer, head, -1, "lambda", "max_entropy", stats.max_entropy))
    return rows


@torch.no_grad()
def accuracy(model: nn.Module, dataset: TokenDataset, rows: np.ndarray, batch_size: int,
             device: torch.device) -> float:
    correct = 0
    for batch in _batches(dataset, rows, batch_size, device):
        correct += int((model(batch["tokens"], batch["mask"]).argmax(-1) == batch["labels"]).sum())
    return correct / max(1, len(rows))


def truncation_rows(model: nn.Module, dataset: TokenDataset, rows: np.ndarray, cfg: Any,
                    device: torch.device) -> list[dict[str, Any]]:
    """Accuracy with levels < L′ kept (λ renormalised over them), L′ = 1..L."""
    modules = [m for m in model.mixer_modules() if is_multilevel(m)]
    if not modules:
        return []
    out = []
    for keep in range(1, max(m.levels for m in modules) + 1):
        with truncate_levels(model, keep):
            acc = accuracy(model, dataset, rows, int(cfg.batch_size), device)
        out.append(_row("truncation", -1, -1, keep, "accuracy", "accuracy", acc))
        out.append(_row("truncation", -1, -1, keep, "accuracy", "examples", len(rows)))
    return out


@torch.no_grad()
def analyze_run(run: TrainedRun, cfg: Any, device: torch.device) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """All sections for one run. Returns the rows and what the figures need."""
    attn0 = run.model.mixer_modules()[0]
    if not getattr(attn0, "supports_internals", False):
        raise HKTError(f"hkt analyze reads attention internals; model '{run.record['model']}' uses "
                       f"{type(attn0).__name__}, which exposes none (analyse mha or hkt runs)")
    path = run.data_dir / f"{cfg.split}.parquet"
    if not path.is_file():
        raise DataError(f"{path} is missing: the analyses read the '{cfg.split}' split")
    dataset = TokenDataset(path)
    sample = _sample_rows(len(dataset), int(cfg.examples), int(cfg.seed))
    n_batches = math.ceil(len(sample) / int(cfg.batch_size))
    collector = _Collector(cfg, n_batches)
    first = None
    for b, batch in enumerate(_batches(dataset, sample, int(cfg.batch_size), device)):
        with capture_internals(run.model) as captured:
            run.model(batch["tokens"], batch["mask"])
        pooled_mask = batch["mask"]
        if run.model.cls is not None:  # internals see the prepended CLS token
            pooled_mask = F.pad(pooled_mask, (1, 0), value=True)
        for layer, (attn, calls) in enumerate(zip(run.model.mixer_modules(), captured)):
            collector.collect(layer, calls[0], attn, pooled_mask)
        if b == 0:
            first = ([calls[0] for calls in captured], pooled_mask)
    rows = collector.statistics(cfg)
    krows, parts = kernel_rows(run.model, cfg.rank_rtol)
    rows += krows
    rows += gram_rows(run.model, first[0], parts, cfg, first[1])
    multilevel = is_multilevel(attn0)
    if multilevel:
        rows += fusion_rows(collector)
        trunc = _sample_rows(len(dataset), cfg.truncation_examples, int(cfg.seed))
        rows += truncation_rows(run.model, dataset, trunc, cfg, device)
        approx = sample[_sample_rows(len(sample), cfg.approximation_examples, int(cfg.seed))]
        rows += approximation_rows({"trained": run.model, "init": initial_model(run.record, run.data_dir).to(device)},
                                   _batches(dataset, approx, 1, device), float(cfg.approximation_chunk_mib))
    example = min(int(cfg.figure_example), first[1].shape[0] - 1)
    n = int(first[1][example].sum())
    figures = {
        "example_lambdas": first[0][0].lambdas[example, :, :n].double().cpu().numpy() if multilevel else None,
        "lambda_samples": {k: np.concatenate(v) for k, v in collector.lambdas.items()} if multilevel else {},
    }
    return rows, figures
