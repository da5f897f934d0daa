"""The `approximation` section of `hkt analyze` (issue 16): truncation residuals, KL and ρ."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import torch
import torch.nn.functional as F

from hkt.analysis.approximation import (
    approximation_rows,
    fused_scores,
    geometric_fit,
    head_errors,
    level_terms,
)
from hkt.mixers.hkt import truncate_levels
from hkt.mixers import HKTAttention
from hkt.mixers.base import merge_heads
from hkt.models import build_model

# ------------------------------------------------------------------ a case with a known answer


def _walsh(t: int, level: int) -> torch.Tensor:
    """σ_l(i) = (−1)^popcount(i >> l): constant on blocks of 2^l; mutually orthogonal over l."""
    return torch.tensor([(-1.0) ** bin(i >> level).count("1") for i in range(t)], dtype=torch.float64)


def _orthogonal_levels(levels: int, t: int, logits: list[float], gains: list[float]) -> tuple[HKTAttention, torch.Tensor]:
    """An HKT layer whose level-l score contribution is exactly λ_l g_l σ_l σ_lᵀ.

    Input token i is s(i)·u with s = σ_0 and u = (1, −1, 1, −1). Each pyramid step reads the
    even input of its pair (conv weights (0, 1)), so X^(l) at coarse position p carries the sign
    σ_0(p·2^l): LayerNorm turns ±u into ±u, and GELU(z) − GELU(−z) = z makes a zero-sum read-out
    w = u/4 return ±1/2. Queries and keys of level l read w (level 0 reads x itself, ±1), so
    (U_l Q^(l))_i = a_l κ_l σ_l(i), (U_l K^(l))_j = κ_l σ_l(j) with κ_0 = 1, κ_l = 1/2, and
    Ŝ^(l) = a_l κ_l² σ_l σ_lᵀ / √d: choose a_l so that this is g_l σ_l σ_lᵀ.
    """
    d_model = 4
    attn = HKTAttention(d_model, n_heads=1, levels=levels, stride=2, kernel_size=2, fusion="static",
                        upsample="nearest", norm_eps=1e-14).double().eval()
    u = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    with torch.no_grad():
        for step in attn.pyramid:
            step.conv.weight.zero_()
            step.conv.weight[:, 0, 1] = 1.0
            step.conv.bias.zero_()
        for level in range(levels):
            kappa = 1.0 if level == 0 else 0.5
            for proj, scale in ((attn.q_proj[level], gains[level] * math.sqrt(d_model) / kappa**2),
                                (attn.k_proj[level], 1.0)):
                proj.weight.zero_()
                proj.weight[0] = scale * u / d_model
                proj.bias.zero_()
        attn.fusion.logits.copy_(torch.tensor([logits], dtype=torch.float64))
        torch.nn.init.normal_(attn.v_proj.weight)
    x = _walsh(t, 0)[None, :, None] * u[None, None, :]
    return attn, x


def test_constructed_orthogonal_levels_give_the_closed_form_residuals_and_rho():
    levels, t, shrink = 4, 16, 0.4
    logits = [0.3, -0.2, 0.5, 0.1]
    lam = np.exp(logits) / np.exp(logits).sum()
    # level l contributes a_l = λ_l g_l σ_l σ_lᵀ with ‖a_l‖_F = λ_l g_l t = t · shrink^l
    gains = [shrink**level / lam[level] for level in range(levels)]
    attn, x = _orthogonal_levels(levels, t, logits, gains)
    norms_sq = np.array([(t * shrink**level) ** 2 for level in range(levels)])
    # S_{L'} − S_L = (1/c − 1) Σ_{l<L'} a_l − Σ_{l≥L'} a_l with c = Σ_{l<L'} λ_l; the a_l are
    # orthogonal, so the squared norms add.
    expected = []
    for keep in range(1, levels + 1):
        c = lam[:keep].sum()
        num = (1 / c - 1) ** 2 * norms_sq[:keep].sum() + norms_sq[keep:].sum()
        expected.append(math.sqrt(num / norms_sq.sum()))
    expected = np.array(expected)
    assert expected[-1] < 1e-12  # L' = L: nothing dropped

    terms = level_terms(attn, x)
    # the construction does what it claims: S_L = Σ_l λ_l g_l σ_l σ_lᵀ
    s_full = sum(lam[l] * gains[l] * torch.outer(_walsh(t, l), _walsh(t, l)) for l in range(levels))
    torch.testing.assert_close(fused_scores(terms, 0, levels), s_full, rtol=1e-10, atol=1e-10)

    errors = head_errors(terms, 0, chunk_bytes=2**20)
    np.testing.assert_allclose(errors.score_residual, expected, rtol=1e-9, atol=1e-12)
    fit = geometric_fit(errors.score_residual[None])
    slope, _ = np.polyfit(np.arange(1, levels), np.log(expected[:-1]), 1)
    assert fit.rho == pytest.approx(math.exp(slope), rel=1e-9)
    assert fit.points == levels - 1 and fit.dof == levels - 3


def test_geometric_fit_matches_a_regression_with_one_intercept_per_example():
    rng = np.random.default_rng(0)
    examples, levels, rho = 6, 5, 0.55
    offsets = rng.normal(size=(examples, 1))
    kept = np.arange(1, levels + 1)
    log_r = offsets + kept * math.log(rho) + 0.05 * rng.normal(size=(examples, levels))
    residuals = np.exp(log_r)
    residuals[:, -1] = 0.0  # L' = L, left out of the fit
    fit = geometric_fit(residuals)
    # the same model as an explicit design matrix: [L', one indicator column per example]
    x = np.tile(kept[:-1], examples).astype(float)
    y = log_r[:, :-1].ravel()
    design = np.column_stack([x, np.repeat(np.eye(examples), levels - 1, axis=0)])
    coef, ssr, *_ = np.linalg.lstsq(design, y, rcond=None)
    dof = len(y) - design.shape[1]
    cov = ssr[0] / dof * np.linalg.inv(design.T @ design)
    assert fit.log_rho == pytest.approx(coef[0], rel=1e-10)
    assert fit.log_rho_se == pytest.approx(math.sqrt(cov[0, 0]), rel=1e-8)
    assert fit.dof == dof and fit.points == len(y) and fit.examples == examples
    assert fit.rho == pytest.approx(math.exp(coef[0]))
    assert fit.rho_se == pytest.approx(fit.rho * fit.log_rho_se)
    assert abs(fit.log_rho - math.log(rho)) < 4 * fit.log_rho_se


def test_geometric_fit_without_enough_points_is_nan():
    fit = geometric_fit(np.array([[0.5, 0.0]]))  # L = 2: one usable level per example
    assert math.isnan(fit.rho) and fit.points == 0
    one = geometric_fit(np.array([[0.5, 0.2, 0.0]]))  # two points, one example: no residual dof
    assert one.rho == pytest.approx(0.4) and math.isnan(one.rho_se) and one.dof == 0


# ------------------------------------------------------------------ the section on real layers

CASES = [dict(), dict(upsample="linear"), dict(fusion="static"), dict(causal=True),
         dict(levels=4, stride=3, kernel_size=4)]


def _layer(seed: int = 0, **kwargs) -> HKTAttention:
    torch.manual_seed(seed)
    attn = HKTAttention(16, 2, **{"levels": 3, **kwargs}).eval()
    if attn.config.fusion == "dynamic":  # away from uniform λ, so that levels weigh differently
        torch.nn.init.normal_(attn.fusion.gate.weight, std=0.5)
    return attn


@pytest.mark.parametrize("kwargs", CASES)
def test_all_levels_kept_gives_exactly_zero(kwargs):
    attn = _layer(**kwargs)
    terms = level_terms(attn, torch.randn(1, 37, 16))
    for head in range(attn.n_heads):
        e = head_errors(terms, head, chunk_bytes=4096)  # several row blocks
        assert e.score_residual[-1] == 0.0 and e.kl[-1] == 0.0 and e.output_residual[-1] == 0.0
        assert (e.score_residual[:-1] > 0).all() and (e.kl[:-1] > 0).all()


@pytest.mark.parametrize("kwargs", CASES)
def test_truncation_here_equals_truncation_of_the_model(kwargs):
    """S_{L'} of this section, through softmax and the values, is the truncated layer's output."""
    attn = _layer(**kwargs)
    x = torch.randn(2, 29, 16)
    mask = torch.ones(2, 29, dtype=torch.bool)
    mask[1, 20:] = False
    for keep in range(1, attn.levels + 1):
        with truncate_levels(attn, keep), torch.no_grad():
            y_model = attn(x, mask)
        assert attn.n_levels == attn.levels  # restored
        for b in range(2):
            n = int(mask[b].sum())
            terms = level_terms(attn, x[b : b + 1], mask[b : b + 1])
            ys = []
            for head in range(attn.n_heads):
                s = fused_scores(terms, head, keep)
                if attn.causal:
                    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
                ys.append(torch.softmax(s, -1) @ terms.values[head])
            y = attn.out_proj(merge_heads(torch.stack(ys)[None]).float())
            torch.testing.assert_close(y[0], y_model[b, :n], rtol=1e-5, atol=1e-5)


def test_fused_scores_equal_the_truncated_models_per_level_scores():
    """Nearest upsampling: S_{L'} = Σ_l λ_l S^(l)[i >> l, j >> l] from the truncated model's own
    internals (its renormalised λ and its coarse scores)."""
    attn = _layer()
    x = torch.randn(1, 27, 16)
    terms = level_terms(attn, x)
    idx = torch.arange(27)
    for keep in range(1, attn.levels + 1):
        with truncate_levels(attn, keep), torch.no_grad():
            _, internals = attn(x, return_internals=True)
        for head in range(attn.n_heads):
            s = sum(internals.lambdas[0, head, :, l, None].double()
                    * internals.scores[l][0, head][(idx >> l)[:, None], (idx >> l)[None, :]].double()
                    for l in range(keep))
            torch.testing.assert_close(fused_scores(terms, head, keep), s, rtol=1e-5, atol=1e-5)


def _model(**mixer):
    torch.manual_seed(1)
    cfg = {"name": "hkt", "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ffn": 32,
           "mixer": {"levels": 3, "stride": 2, "kernel_size": 2, "fusion": "dynamic", **mixer}}
    model = build_model(cfg, vocab_size=20, num_classes=3, max_length=64).double().eval()
    for attn in model.mixer_modules():  # away from uniform λ
        torch.nn.init.normal_(next(attn.fusion.parameters()), std=0.5)
    return model


def _table(rows) -> pl.DataFrame:
    return pl.DataFrame(rows).sort("quantity", "layer", "head", "level", "metric")


@pytest.mark.parametrize("attention", [dict(), dict(upsample="linear"), dict(fusion="static")])
def test_padding_and_row_blocks_change_nothing(attention):
    model = _model(**attention)
    tokens = torch.randint(1, 20, (1, 23))
    plain = {"tokens": tokens, "mask": torch.ones_like(tokens, dtype=torch.bool)}
    padded = {"tokens": F.pad(tokens, (0, 9)), "mask": F.pad(plain["mask"], (0, 9), value=False)}
    a = _table(approximation_rows({"trained": model}, [plain], chunk_mib=64))
    b = _table(approximation_rows({"trained": model}, [padded], chunk_mib=0.01))  # 1-row blocks
    assert a.select("quantity", "layer", "head", "level", "metric").equals(
        b.select("quantity", "layer", "head", "level", "metric"))
    np.testing.assert_allclose(b["value"].to_numpy(), a["value"].to_numpy(), rtol=1e-9, atol=1e-12)


def test_rows_cover_every_layer_head_and_level_for_each_model_state():
    trained, init = _model(), _model(fusion="static")
    batch = {"tokens": torch.randint(1, 20, (3, 19)), "mask": torch.ones(3, 19, dtype=torch.bool)}
    batch["mask"][2, 12:] = False
    t = pl.DataFrame(approximation_rows({"trained": trained, "init": init}, [batch], chunk_mib=1))
    assert set(t["section"]) == {"approximation"}
    assert set(t["quantity"]) == {"trained", "init"}
    per_level = t.filter(pl.col("level") > 0)
    assert set(per_level["level"]) == {1, 2, 3}
    assert set(zip(per_level["layer"], per_level["head"])) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    at_full = per_level.filter((pl.col("level") == 3) & (pl.col("metric") != "reduced"))
    assert (at_full["value"] == 0).all()
    fits = t.filter(pl.col("metric") == "rho")
    assert fits.height == 8 and fits["value"].is_finite().all() and (fits["value"] > 0).all()
    assert (t.filter(pl.col("metric") == "examples")["value"] == 3).all()
    # every added level reduces the mean residual at L' = L (to 0), so "reduced" there is 1
    assert (per_level.filter((pl.col("metric") == "reduced") & (pl.col("level") == 3))["value"] == 1).all()


def test_examples_are_analysed_one_at_a_time():
    with pytest.raises(ValueError, match="one example at a time"):
        level_terms(_layer(), torch.randn(2, 8, 16))


def test_chunk_must_be_positive():
    with pytest.raises(ValueError, match="approximation_chunk_mib"):
        approximation_rows({"trained": _model()}, [], chunk_mib=0)


# ------------------------------------------------------------------ the report's table and figure


def _analyses() -> pl.DataFrame:
    """Two seeds of one task's HKT runs, as `hkt analyze` writes their approximation rows."""
    from hkt.runs_frame import KEY

    frames = []
    for seed in (0, 1):
        trained, init = _model(), _model(fusion="static")
        torch.manual_seed(seed)
        batch = {"tokens": torch.randint(1, 20, (2, 17)), "mask": torch.ones(2, 17, dtype=torch.bool)}
        rows = approximation_rows({"trained": trained, "init": init}, [batch], chunk_mib=1)
        ident = dict(zip(KEY, ("listops", 512, "hkt", "main", seed)))
        frames.append(pl.DataFrame(rows).with_columns(*(pl.lit(v).alias(k) for k, v in ident.items())))
    return pl.concat(frames)


def test_approximation_table_pools_heads_and_seeds_per_layer_and_state():
    from hkt.report.approximation_table import approximation_display, approximation_table

    analyses = _analyses()
    t = approximation_table(analyses)
    assert t.select("layer", "state").rows() == [(0, "trained"), (0, "init"), (1, "trained"), (1, "init")]
    assert (t["n"] == 4).all() and (t["seeds"] == 2).all() and (t["levels"] == 3).all()
    rho = analyses.filter((pl.col("metric") == "rho") & (pl.col("layer") == 1)
                          & (pl.col("quantity") == "init"))["value"]
    row = t.filter((pl.col("layer") == 1) & (pl.col("state") == "init"))
    assert row["rho_mean"][0] == pytest.approx(rho.mean())
    assert row["rho_std"][0] == pytest.approx(rho.std())
    assert row["rho_min"][0] == pytest.approx(rho.min()) and row["rho_max"][0] == pytest.approx(rho.max())
    header, rows = approximation_display(t)
    assert len(rows) == 4 and all(len(r) == len(header) for r in rows)


def test_write_approximation_adds_table_figure_and_summary_section(tmp_path):
    from hkt.report.approximation_table import CLAIM, write_approximation

    written, section, _ = write_approximation(_analyses(), tmp_path)
    assert {p.name for p in written} == {"approximation.md", "approximation.csv", "approximation.tex",
                                         "approximation.png"}
    assert (tmp_path / "figures" / "approximation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = "\n".join(section)
    assert CLAIM in summary and "listops (T=512), main, L = 3: trained ρ = " in summary
    assert "at initialisation ρ = " in summary and "figures/approximation.png" in summary


def test_write_approximation_without_hkt_analyses_still_writes_its_outputs(tmp_path):
    from hkt.report.approximation_table import findings, write_approximation

    mha = pl.DataFrame([{"section": "kernel", "layer": 0, "head": 0, "level": 0, "quantity": "M",
                         "metric": "psd", "value": 1.0, "task": "listops", "length": 512,
                         "model": "mha", "variant": "main", "seed": 0}])
    written, _, _ = write_approximation(mha, tmp_path)
    assert all(p.is_file() for p in written) and len(written) == 4
    assert "No HKT run" in findings(mha)
