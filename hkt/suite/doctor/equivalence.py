"""``hkt doctor``'s ``hkt fused`` and ``hkt levels=1`` checks: HKT's fused path against the fp64
materialised path, and HKT with one level against MHA with the same weights (outputs and input
gradients, within the precision's tolerance)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from omegaconf import DictConfig, OmegaConf

from hkt.suite.doctor.context import Check, Context

__all__ = ["check_equivalence"]


def _relative_error(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def _forward_backward(module: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor,
                      weights: torch.Tensor, amp: torch.dtype | None) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.detach().clone().requires_grad_(True)
    with torch.autocast(x.device.type, dtype=amp or torch.float32, enabled=amp is not None):
        y = module(x, mask)
    (y.to(weights.dtype) * weights).sum().backward()
    return y.detach(), x.grad


def check_equivalence(ctx: Context) -> Iterator[Check]:
    """Per distinct HKT geometry of the suite (the head widths decide the SDPA backend). A job
    is HKT by the mixer its config builds (``model.name``), not by its label: a copy of
    ``hkt.yaml`` under another name is checked too."""
    geometries: dict[str, DictConfig] = {}
    for cfg in ctx.configs.values():
        if cfg.model.name == "hkt":
            key = f"D={cfg.model.d_model}, H={cfg.model.n_heads}, causal={cfg.model.causal}, " \
                  f"{OmegaConf.to_container(cfg.model.mixer, resolve=True)}"
            geometries.setdefault(key, cfg)
    for cfg in geometries.values():
        yield from _equivalence(ctx, cfg)


def _equivalence(ctx: Context, cfg: DictConfig) -> Iterator[Check]:
    from hkt.mixers import build_mixer

    eq, dev = ctx.cfg.equivalence, ctx.device
    tol = float(eq.tolerance[ctx.precision])
    b, t, width, heads = int(eq.batch), int(eq.seq_len), int(cfg.model.d_model), int(cfg.model.n_heads)
    mixer = dict(OmegaConf.to_container(cfg.model.mixer, resolve=True))
    common = dict(d_model=width, n_heads=heads, causal=bool(cfg.model.causal), dropout=0.0)
    g = torch.Generator().manual_seed(int(ctx.cfg.train.seed))
    x = torch.randn(b, t, width, generator=g).to(dev)
    mask = (torch.arange(t)[None, :] < torch.tensor([t, t // 2 + 1])[:, None]).to(dev)
    w = torch.randn(b, t, width, generator=g, dtype=torch.float64).to(dev)
    shape = f"L={mixer.get('levels')}, D={width}, H={heads}, T={t}, {ctx.precision}"

    torch.manual_seed(int(ctx.cfg.train.seed))
    fused = build_mixer("hkt", **common, **{**mixer, "impl": "fused"}).to(dev).eval()
    materialised = build_mixer("hkt", **common, **{**mixer, "impl": "materialised"}).to(dev).eval()
    materialised.load_state_dict(fused.state_dict())  # the same weights, in fp64
    materialised.double()
    y, gx = _forward_backward(fused, x, mask, w, ctx.amp)
    y_ref, gx_ref = _forward_backward(materialised, x.double(), mask, w, None)
    err = max(_relative_error(y, y_ref), _relative_error(gx, gx_ref))
    yield Check("hkt fused", err <= tol,
                f"{shape}: relative error {err:.1e} vs the fp64 materialised path (tolerance {tol:.0e})")

    torch.manual_seed(int(ctx.cfg.train.seed))
    mha = build_mixer("mha", **common).to(dev).eval()
    one = build_mixer("hkt", **common, **{**mixer, "levels": 1}).to(dev).eval()
    one.q_proj[0].load_state_dict(mha.q_proj.state_dict())
    one.k_proj[0].load_state_dict(mha.k_proj.state_dict())
    one.v_proj.load_state_dict(mha.v_proj.state_dict())
    one.out_proj.load_state_dict(mha.out_proj.state_dict())
    y_mha, gx_mha = _forward_backward(mha, x, mask, w, ctx.amp)
    y_one, gx_one = _forward_backward(one, x, mask, w, ctx.amp)
    err = max(_relative_error(y_one, y_mha.double()), _relative_error(gx_one, gx_mha.double()))
    yield Check("hkt levels=1", err <= tol,
                f"D={width}, H={heads}, T={t}, {ctx.precision}: HKT with one level vs MHA with its "
                f"weights: relative error {err:.1e} (tolerance {tol:.0e})")
