"""Child process of tests/test_tile.py: runs impl='tile' beside impl='materialised' in Triton's CPU
interpreter and saves both layers' outputs and gradients for the parent to compare.

Triton reads TRITON_INTERPRET when it is first imported (its own library is decorated then), so
the interpreter needs a process of its own in which the variable is set before that import:

    TRITON_INTERPRET=1 python tests/tile_interpreter.py CASES_JSON OUT.pt
"""

from __future__ import annotations

import json
import os
import sys

import torch

from hkt.mixers import HKTAttention
from hkt.mixers.tile_attention import TileSizes

D, H = 16, 2


def layers(tile: TileSizes, **settings) -> tuple[HKTAttention, HKTAttention]:
    """A materialised layer with non-trivial weights (zero-init λ would hide fusion bugs) and a
    tile layer with the same state_dict."""
    torch.manual_seed(0)
    ref = HKTAttention(D, H, **{**settings, "impl": "materialised"})
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.3 * torch.randn_like(p))
    tile = HKTAttention(D, H, tile=tile, **{**settings, "impl": "tile"})
    assert tile.state_dict().keys() == ref.state_dict().keys()
    tile.load_state_dict(ref.state_dict())
    return ref, tile


def run_case(levels, stride, causal, masked, fusion, t, tile_q, tile_k, batch, device="cpu",
             autocast: torch.dtype | None = None) -> dict:
    """{impl: {"output", "input", "param.<name>": gradient…}} for one case, float32 (or the
    forward under autocast to ``autocast``, as training with precision bf16 runs it)."""
    ref, tile = layers(levels=levels, stride=stride, kernel_size=stride + 1, fusion=fusion,
                       causal=causal, tile=TileSizes(tile_q, tile_k))
    ref, tile = ref.to(device), tile.to(device)
    x = torch.randn(batch, t, D, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
    mask = None
    if masked:
        mask = (torch.arange(t)[None, :] < torch.tensor([13, t][:batch])[:, None]).to(device)
    out = {}
    for name, layer in (("materialised", ref), ("tile", tile)):
        x.grad = None
        with torch.autocast(device_type=torch.device(device).type, dtype=autocast,
                            enabled=autocast is not None):
            y = layer(x, mask)
        (y.float() * torch.randn(y.shape, generator=torch.Generator().manual_seed(3)).to(device)).sum().backward()
        out[name] = {"output": y.detach().float(), "input": x.grad.clone(),
                     **{f"param.{n}": p.grad for n, p in layer.named_parameters() if p.grad is not None}}
    return out


def run_internals() -> dict:
    """Per-level scores and λ of return_internals on both paths."""
    ref, tile = layers(levels=3, stride=2, kernel_size=2, tile=TileSizes(8, 8))
    x = torch.randn(1, 11, D, generator=torch.Generator().manual_seed(1))
    out = {}
    for name, layer in (("materialised", ref), ("tile", tile)):
        _, internals = layer(x, return_internals=True)
        out[name] = {**{f"scores{l}": s for l, s in enumerate(internals.scores)},
                     "lambdas": internals.lambdas}
    return out


def main(cases_json: str, out_path: str) -> None:
    from hkt.mixers.tile_attention import kernels

    assert os.environ.get("TRITON_INTERPRET") == "1" and kernels().INTERPRETED, "not interpreting"
    results = {"internals": run_internals()}
    for case in json.loads(cases_json):
        results["-".join(map(str, case))] = run_case(*case)
    torch.save(results, out_path)


if __name__ == "__main__":
    main(*sys.argv[1:])
