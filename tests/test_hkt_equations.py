"""The one-page HKT of the paper's equations (hkt/mixers/hkt_equations.py) is the trained layer:
with HKTAttention's parameters loaded, it gives the ``fused`` path's outputs, in causal mode and
with either fusion, on lengths that the pyramid must pad."""

from __future__ import annotations

import pytest
import torch

from hkt.mixers import HKTAttention
from hkt.mixers.hkt_equations import HKTFromEquations

D, H = 16, 2


@pytest.mark.parametrize("fusion", ["dynamic", "static"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("levels,stride,kernel_size,t", [(3, 2, 2, 23), (3, 2, 3, 16),
                                                         (2, 4, 5, 13), (1, 2, 2, 9)])
def test_the_equations_give_the_fused_layers_outputs(fusion, causal, levels, stride,
                                                     kernel_size, t):
    torch.manual_seed(0)
    settings = dict(levels=levels, stride=stride, kernel_size=kernel_size, fusion=fusion)
    fused = HKTAttention(D, H, causal=causal, impl="fused", **settings).double().eval()
    with torch.no_grad():  # away from the zero-initialised fusion gate: λ differs per token
        for p in fused.parameters():
            p.add_(0.3 * torch.randn_like(p))
    page = HKTFromEquations(D, H, causal=causal, **settings).double()
    page.load_state_dict(fused.state_dict())  # strict: the same parameters, by the same names
    x = torch.randn(2, t, D, dtype=torch.float64)
    torch.testing.assert_close(page(x), fused(x), rtol=1e-10, atol=1e-10)
    if causal:  # and the equations keep causality: a later token changes no earlier output
        later = x.clone()
        later[:, -1] += 1.0
        torch.testing.assert_close(page(later)[:, :-1], page(x)[:, :-1], rtol=0, atol=1e-12)
