"""hkt.dropout.Dropout: nn.Dropout's behaviour with a faster mask on CPU."""

from __future__ import annotations

import pytest
import torch

from hkt.dropout import Dropout


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keeps_each_element_with_probability_one_minus_p_scaled(p):
    torch.manual_seed(0)
    x = torch.full((1000, 1000), 2.0)
    y = Dropout(p).train()(x)
    kept = y != 0
    # 1e6 Bernoulli draws: the kept fraction is within 5 standard deviations of 1 - p
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * (p * (1 - p) / x.numel()) ** 0.5
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 2.0 / (1 - p)))


def test_gradient_is_the_scaled_mask():
    torch.manual_seed(0)
    x = torch.randn(64, 50, dtype=torch.double, requires_grad=True)
    y = Dropout(0.3).train()(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, (y != 0).double() / 0.7)


def test_seeded_repeatable_and_identity_in_eval():
    x = torch.randn(8, 16)
    layer = Dropout(0.2).train()
    torch.manual_seed(3)
    first = layer(x)
    torch.manual_seed(3)
    torch.testing.assert_close(layer(x), first, rtol=0, atol=0)
    assert not torch.equal(layer(x), first)  # the generator moved on
    assert layer.eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_edge_probabilities_and_module_contract():
    x = torch.randn(4, 5)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
    layer = Dropout(0.1)
    assert isinstance(layer, torch.nn.Dropout) and repr(layer) == repr(torch.nn.Dropout(0.1))
    assert layer.state_dict() == {}  # checkpoints of models with nn.Dropout load unchanged
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)
