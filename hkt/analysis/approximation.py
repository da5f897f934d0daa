"""The paper's approximation claim, measured: does truncating HKT's levels cost geometrically less
as levels are added (issue 16, docs/design.md §2 and §4)?

For one layer, head and example, keeping levels < L′ with λ renormalised over them (what level
truncation does to the model) gives the fused scores

    S_{L′}[i, j] = Σ_{l<L′} λ′_l(i) Ŝ^(l)[i, j],   λ′_l(i) = λ_l(i) / Σ_{l′<L′} λ_{l′}(i),
    Ŝ^(l)[i, j] = (U_l Q^(l))_i · (U_l K^(l))_j / √d          (the fused factorisation)

Against the full S_L, over the real (unmasked, and in causal mode allowed) query–key pairs:

- score residual ‖S_{L′} − S_L‖_F / ‖S_L‖_F;
- KL(softmax(S_L) ‖ softmax(S_{L′})) per real query row, averaged;
- output residual ‖Y_{L′} − Y_L‖_F / ‖Y_L‖_F, Y = softmax(S) V the head's output before the
  output projection.

At L′ = L every one is exactly 0. Over the examples of a sample, the geometric fit
log r_{e,L′} = a_e + L′ log ρ (one intercept per example, L′ = 1..L−1) gives the per-level decay
ratio ρ with its ordinary-least-squares standard error; the paper's proviso, that each added
level reduces the residual, is checked on the per-level geometric means.

Memory: one example and one head at a time, and the T×T matrices only as blocks of query rows
(``chunk_mib``), so that T = 1024 or 4000 needs no more than a few blocks of rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import torch
from torch import Tensor, nn

from hkt.mixers import HKTAttention
from hkt.mixers.hkt import truncate_levels
from hkt.mixers.base import split_heads
from hkt.mixers.upsample import Upsampler
from hkt.run_record import APPROXIMATION_SECTION, APPROXIMATION_STATES

SECTION = APPROXIMATION_SECTION
#: The models compared: the trained run and the same architecture at initialisation.
STATES = APPROXIMATION_STATES

__all__ = ["summary_lines", "GeometricFit", "HeadErrors", "LevelTerms", "SECTION", "STATES", "approximation_rows",
           "fused_scores", "geometric_fit", "head_errors", "layer_inputs", "level_terms"]


@contextmanager
def layer_inputs(model: nn.Module) -> Iterator[list[tuple[Tensor, Tensor | None] | None]]:
    """While active, records each attention module's input ``(x, key_mask)`` of the last
    forward pass, one entry per ``model.mixer_modules()``."""
    modules = list(model.mixer_modules())
    captured: list[tuple[Tensor, Tensor | None] | None] = [None] * len(modules)

    def recorder(i: int):
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            key_mask = args[1] if len(args) > 1 else kwargs.get("key_mask")
            captured[i] = (args[0], key_mask)
        return hook

    handles = [m.register_forward_pre_hook(recorder(i), with_kwargs=True)
               for i, m in enumerate(modules)]
    try:
        yield captured
    finally:
        for h in handles:
            h.remove()


@dataclass
class LevelTerms:
    """One example's per-level factors in one HKT layer, on its n real tokens, float64.

    ``queries[l, h]`` = U_l Q^(l) and ``keys[l, h]`` = U_l K^(l) of head h: (L, H, n, d);
    ``lambdas``: λ (H, n, L); ``values``: V (H, n, d); ``scale`` = 1/√d.
    """

    queries: Tensor
    keys: Tensor
    lambdas: Tensor
    values: Tensor
    scale: float
    causal: bool

    @property
    def levels(self) -> int:
        return self.queries.shape[0]


@torch.no_grad()
def level_terms(attn: HKTAttention, x: Tensor, key_mask: Tensor | None = None) -> LevelTerms:
    """The factors of S = Σ_l λ_l Ŝ^(l) for one example as the layer computes them.

    x: (1, T, D), the layer's input; key_mask: (1, T) bool (True = real token) or None. Runs
    the layer's own pyramid, projections, fusion and upsampling on its padded grid with all L
    levels, and keeps the real tokens. The layer's own methods (``_pyramid``,
    ``_fusion_weights``) are used, not copies of them, so that the section follows the model.
    """
    if x.shape[0] != 1:
        raise ValueError(f"level_terms takes one example at a time, got a batch of {x.shape[0]}")
    with truncate_levels(attn, attn.levels):
        t, h, n_levels = x.shape[1], attn.n_heads, attn.levels
        features, _, t_pad = attn._pyramid(x, key_mask, n_levels)
        lam = attn._fusion_weights(x, n_levels)
        ups = Upsampler(attn.upsample, attn.stride, t, t_pad)
        real = (key_mask[0] if key_mask is not None
                else torch.ones(t, dtype=torch.bool, device=x.device)).nonzero().squeeze(-1)

        def up(proj: nn.ModuleList) -> Tensor:
            return torch.stack([ups.up(split_heads(proj[l](features[l]), h), l)[0][:, real]
                                for l in range(n_levels)]).double()

        return LevelTerms(
            queries=up(attn.q_proj), keys=up(attn.k_proj),
            lambdas=lam.expand(1, h, t, n_levels)[0][:, real].double(),
            values=split_heads(attn.v_proj(x), h)[0][:, real].double(),
            scale=1.0 / math.sqrt(attn.head_dim), causal=bool(attn.causal),
        )


def _level_scores(terms: LevelTerms, head: int, rows: slice) -> Tensor:
    """Ŝ^(l)[i, j] for the query rows ``rows``, every level: (L, rows, n)."""
    q, k = terms.queries[:, head, rows], terms.keys[:, head]
    return (q @ k.transpose(-1, -2)) * terms.scale


def fused_scores(terms: LevelTerms, head: int, keep: int) -> Tensor:
    """S_{keep} of one head over the real tokens, (n, n), as :func:`head_errors` forms it
    (T×T at once: for tests and small inputs)."""
    n, lam = terms.queries.shape[2], terms.lambdas[head]
    partial = list(_partial_sums(_level_scores(terms, head, slice(0, n)), lam))[keep - 1]
    return _renormalised(partial, lam, keep)


def _renormalised(partial: Tensor, lam: Tensor, keep: int) -> Tensor:
    """S_{keep} = P_{keep} / Σ_{l<keep} λ_l per query row; with every level kept, P_L itself
    (λ as the untruncated layer uses it)."""
    if keep == lam.shape[-1]:
        return partial
    return partial / lam[:, :keep].sum(-1, keepdim=True)


@dataclass(frozen=True)
class HeadErrors:
    """One example and head: per L′ = 1..L, the sums the section's statistics pool."""

    score_sq: np.ndarray  # Σ (S_{L′} − S_L)² over real pairs
    score_ref_sq: float  # Σ S_L²
    kl_sum: np.ndarray  # Σ over real queries of KL(softmax(S_L) ‖ softmax(S_{L′}))
    output_sq: np.ndarray  # Σ (Y_{L′} − Y_L)²
    output_ref_sq: float  # Σ Y_L²
    queries: int

    @property
    def score_residual(self) -> np.ndarray:
        return _ratio(self.score_sq, self.score_ref_sq)

    @property
    def output_residual(self) -> np.ndarray:
        return _ratio(self.output_sq, self.output_ref_sq)

    @property
    def kl(self) -> np.ndarray:
        return self.kl_sum / max(1, self.queries)


def _ratio(sq: np.ndarray, ref_sq: float) -> np.ndarray:
    """√(sq / ref_sq); NaN where ``ref_sq`` (the full scores' square) is 0 (no relative residual exists)."""
    if ref_sq <= 0:
        return np.full_like(sq, np.nan)
    return np.sqrt(sq / ref_sq)


def head_errors(terms: LevelTerms, head: int, chunk_bytes: float) -> HeadErrors:
    """Residuals and KL of every truncation L′ = 1..L for one head, in blocks of query rows.

    S_{L′} is built up level by level, P_{L′} = P_{L′−1} + λ_{L′−1} ⊙ Ŝ^(L′−1) and
    S_{L′} = P_{L′} / Σ_{l<L′} λ_l; the full S_L = P_L is the same sum, so L′ = L
    reproduces it bit for bit. KL(p_L ‖ p_{L′}) = lse(S_{L′}) − lse(S_L) − Σ_j p_L (S_{L′} − S_L)
    per row. A block holds about L + 8 float64 matrices of (rows × n); ``chunk_bytes`` bounds them.
    """
    n_levels, n = terms.levels, terms.queries.shape[2]
    lam, v = terms.lambdas[head], terms.values[head]
    block = max(1, int(chunk_bytes // (8 * max(1, n) * (n_levels + 8))))
    score_sq, kl_sum, output_sq = (torch.zeros(n_levels, dtype=torch.float64, device=v.device)
                                   for _ in range(3))
    score_ref = output_ref = v.new_zeros(())
    for start in range(0, n, block):
        rows = slice(start, min(n, start + block))
        allowed = None
        if terms.causal:  # real tokens keep their order, so j ≤ i among them is causality
            i = torch.arange(rows.start, rows.stop, device=v.device)[:, None]
            allowed = torch.arange(n, device=v.device)[None, :] <= i
        scores, lam_r = _level_scores(terms, head, rows), lam[rows]
        *_, full = _partial_sums(scores, lam_r)
        p_full, lse_full, y_full = _attend(full, allowed, v)
        score_ref = score_ref + _sq(_masked(full, allowed))
        output_ref = output_ref + _sq(y_full)
        for keep, partial in enumerate(_partial_sums(scores, lam_r), start=1):
            s = _renormalised(partial, lam_r, keep)
            diff = s - full
            score_sq[keep - 1] += _sq(_masked(diff, allowed))
            _, lse, y = _attend(s, allowed, v)
            kl_sum[keep - 1] += (lse - lse_full - torch.linalg.vecdot(p_full, diff)).sum()
            output_sq[keep - 1] += _sq(y - y_full)
    return HeadErrors(score_sq.cpu().numpy(), float(score_ref), kl_sum.cpu().numpy(),
                      output_sq.cpu().numpy(), float(output_ref), n)


def _partial_sums(scores: Tensor, lam: Tensor) -> Iterator[Tensor]:
    """P_{L′} = Σ_{l<L′} λ_l ⊙ Ŝ^(l) for L′ = 1..L, from per-level rows (L, b, n), λ rows (b, L)."""
    partial = torch.zeros_like(scores[0])
    for level in range(scores.shape[0]):
        partial = torch.addcmul(partial, scores[level], lam[:, level : level + 1])
        yield partial


def _sq(x: Tensor) -> Tensor:
    """Σ x² in one pass."""
    flat = x.reshape(-1)
    return flat @ flat


def _masked(x: Tensor, allowed: Tensor | None) -> Tensor:
    return x if allowed is None else torch.where(allowed, x, 0.0)


def _attend(s: Tensor, allowed: Tensor | None, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """softmax(s) over allowed keys, its row log-sum-exp, and softmax(s) V."""
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    top = s.amax(-1, keepdim=True)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / z, (top + z.log()).squeeze(-1), (e @ v) / z


@dataclass(frozen=True)
class GeometricFit:
    """log r = a_e + L′ log ρ by least squares: slope log ρ, ρ = e^slope and their standard
    errors (ρ's by the delta method, ρ · se(log ρ)); NaN where the data do not determine them."""

    log_rho: float
    log_rho_se: float
    rho: float
    rho_se: float
    points: int  # (example, L′) points used
    examples: int  # examples with at least two usable points
    dof: int  # residual degrees of freedom: points − examples − 1


def geometric_fit(residuals: Any) -> GeometricFit:
    """Fit the per-level decay ratio ρ to residuals r[e, L′−1] (examples × L, L′ = 1..L).

    The last column, L′ = L, is 0 by definition and left out; so are non-positive or non-finite
    residuals (no logarithm). Each example keeps its own intercept a_e (its overall error level)
    and shares the slope: ordinary least squares after removing each example's means, with the
    textbook standard error √(SSR / dof / Σ(x − x̄_e)²). With two levels per example this is the
    mean of the per-example log ratios and its standard error.
    """
    r = np.asarray(residuals, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"residuals must be (examples, levels), got shape {r.shape}")
    r = r[:, :-1]
    kept = np.arange(1, r.shape[1] + 1, dtype=np.float64)
    xs, ys = [], []
    for row in r:
        ok = np.isfinite(row) & (row > 0)
        if ok.sum() >= 2:
            x, y = kept[ok], np.log(row[ok])
            xs.append(x - x.mean())
            ys.append(y - y.mean())
    nan = float("nan")
    if not xs:
        return GeometricFit(nan, nan, nan, nan, 0, 0, 0)
    x, y = np.concatenate(xs), np.concatenate(ys)
    sxx = float(x @ x)
    slope = float(x @ y) / sxx
    dof = x.size - len(xs) - 1
    ssr = float(np.sum((y - slope * x) ** 2))
    se = math.sqrt(ssr / dof / sxx) if dof > 0 else nan
    rho = math.exp(slope)
    return GeometricFit(slope, se, rho, rho * se, int(x.size), len(xs), int(dof))


def _geometric_mean(r: np.ndarray) -> np.ndarray:
    """Per column over examples (rows); 0 where any example is 0, NaN ignored."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.nanmean(np.log(r), axis=0))


def _row(layer: int, head: int, level: int, state: str, metric: str, value: Any) -> dict[str, Any]:
    return {"section": SECTION, "layer": int(layer), "head": int(head), "level": int(level),
            "quantity": state, "metric": metric, "value": float(value)}


def summary_rows(state: str, layer: int, head: int, errors: list[HeadErrors]) -> list[dict[str, Any]]:
    """Rows of one (model state, layer, head) from its examples' errors.

    Per L′ (``level``): ``score_residual`` and ``output_residual`` (geometric means over
    examples), ``kl`` (mean over every real query), ``reduced`` (L′ ≥ 2: the mean residual fell
    from L′ − 1). Per head (``level`` −1): the fits ``rho``, ``rho_se``, ``log_rho``,
    ``log_rho_se``, ``fit_points``, ``fit_dof`` (scores) and ``output_rho``, ``output_rho_se``;
    ``all_reduced`` (each added level reduced the mean residual), ``all_reduced_share`` (share of
    examples where it did so on their own) and ``examples``.
    """
    score = np.stack([e.score_residual for e in errors])
    output = np.stack([e.output_residual for e in errors])
    kl = sum(e.kl_sum for e in errors) / max(1, sum(e.queries for e in errors))
    mean_score, mean_output = _geometric_mean(score), _geometric_mean(output)
    rows = []
    for level in range(1, score.shape[1] + 1):
        i = level - 1
        rows += [_row(layer, head, level, state, "score_residual", mean_score[i]),
                 _row(layer, head, level, state, "kl", kl[i]),
                 _row(layer, head, level, state, "output_residual", mean_output[i])]
        if level >= 2:
            rows.append(_row(layer, head, level, state, "reduced", mean_score[i] < mean_score[i - 1]))
    fit, out_fit = geometric_fit(score), geometric_fit(output)
    per_example = (np.diff(score, axis=1) < 0).all(axis=1)
    for metric, value in (("rho", fit.rho), ("rho_se", fit.rho_se), ("log_rho", fit.log_rho),
                          ("log_rho_se", fit.log_rho_se), ("fit_points", fit.points),
                          ("fit_dof", fit.dof), ("output_rho", out_fit.rho),
                          ("output_rho_se", out_fit.rho_se),
                          ("all_reduced", bool((np.diff(mean_score) < 0).all())),
                          ("all_reduced_share", per_example.mean()), ("examples", len(errors))):
        rows.append(_row(layer, head, -1, state, metric, value))
    return rows


@torch.no_grad()
def approximation_rows(models: Mapping[str, nn.Module], batches: Iterable[dict[str, Tensor]],
                       chunk_mib: float) -> list[dict[str, Any]]:
    """The section's rows for each model (``{"trained": …, "init": …}``) on the same examples.

    ``batches`` yield ``tokens`` and ``mask`` (B, T); examples are taken one at a time, with
    whatever padding their batch gave them. Layers without HKT attention contribute nothing.
    """
    if chunk_mib <= 0:
        raise ValueError(f"approximation_chunk_mib must be > 0, got {chunk_mib}")
    errors: dict[tuple[str, int, int], list[HeadErrors]] = {}
    for batch in batches:
        for i in range(batch["tokens"].shape[0]):
            tokens, mask = batch["tokens"][i : i + 1], batch["mask"][i : i + 1]
            for state, model in models.items():
                with layer_inputs(model) as inputs:
                    model(tokens, mask)
                for layer, (attn, (x, key_mask)) in enumerate(zip(model.mixer_modules(), inputs)):
                    if not isinstance(attn, HKTAttention):
                        continue
                    terms = level_terms(attn, x, key_mask)
                    for head in range(attn.n_heads):
                        errors.setdefault((state, layer, head), []).append(
                            head_errors(terms, head, chunk_mib * 2**20))
    order = {s: i for i, s in enumerate(STATES)}
    rows: list[dict[str, Any]] = []
    for (state, layer, head), errs in sorted(errors.items(),
                                             key=lambda kv: (order.get(kv[0][0], 99), *kv[0])):
        rows += summary_rows(state, layer, head, errs)
    return rows


def summary_lines(table: pl.DataFrame) -> list[str]:
    """Lines of one run's ``hkt analyze`` summary: ρ per state, pooled over layers and heads."""
    heads = table.filter((pl.col("section") == SECTION) & (pl.col("level") < 0))
    lines = []
    for state in STATES:
        sub = heads.filter(pl.col("quantity") == state)
        rho = sub.filter(pl.col("metric") == "rho")["value"].drop_nans()
        reduced = sub.filter(pl.col("metric") == "all_reduced")["value"]
        if not rho.is_empty():
            lines.append(f"approximation ({state}): per-level decay ρ of the score residual "
                         f"{rho.mean():.2f} ± {(rho.std() or 0.0):.2f} over {rho.len()} (layer, head); "
                         f"every added level reduced it in {int(reduced.sum())}/{reduced.len()}")
    return lines
