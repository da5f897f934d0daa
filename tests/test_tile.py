"""impl='tile' (hkt/mixers/tile_attention.py): the Triton tile kernels compute the materialised path's
numbers, forward and backward, in Triton's CPU interpreter; they compile for a GPU; and every
setting or
machine they cannot serve gets a clear error.

Triton reads TRITON_INTERPRET when it is first imported, for the whole process, so the
interpreter runs in one child process (tests/tile_interpreter.py) with the variable set, and
this process never sees it. Shapes are tiny (the interpreter runs every program in Python):
tiles of 4 and 8 with T = 19 or 21 leave partial tiles, and s^l up to 64 gives coarse positions
wider than a tile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hkt.mixers import HKTAttention
from hkt.mixers.tile_attention import TileSizes
from hkt.errors import ConfigValueError

D, H = 16, 2
ROOT = Path(__file__).resolve().parent.parent
NEEDS_TRITON = "impl='tile' needs Triton (the dev extra installs it on Linux)"

# (levels, stride, causal, masked, fusion, T, query tile, key tile, batch): every level count
# with both strides; masks, causality and fusions spread over them; T never a multiple of a tile
# or of s^(L-1); f = s^l below, equal to and above the tile sizes
CASES = [
    (1, 2, False, False, "dynamic", 19, 8, 8, 1),
    (1, 4, True, True, "dynamic", 19, 8, 8, 2),
    (2, 2, True, True, "static", 19, 8, 4, 2),
    (2, 4, False, True, "dynamic", 19, 8, 8, 1),
    (2, 4, True, False, "static", 19, 4, 4, 1),
    (3, 2, False, True, "dynamic", 19, 8, 8, 2),
    (3, 2, True, False, "dynamic", 21, 4, 8, 1),
    (3, 4, True, True, "dynamic", 19, 8, 8, 2),
    (4, 2, True, True, "dynamic", 19, 8, 8, 1),
    (4, 2, False, False, "static", 19, 8, 8, 1),
    (4, 4, False, False, "dynamic", 19, 8, 8, 1),
    (4, 4, True, True, "static", 19, 8, 4, 1),
]


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory) -> dict:
    """Both layers' outputs and gradients for every case (and internals), from the child."""
    pytest.importorskip("triton", reason=NEEDS_TRITON)
    out = tmp_path_factory.mktemp("tile") / "results.pt"
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "tile_interpreter.py"),
                           json.dumps(CASES), str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return torch.load(out)


def assert_same(results: dict) -> None:
    ref, tile = results["materialised"], results["tile"]
    assert tile.keys() == ref.keys()  # the same parameters receive gradients
    for name in ref:
        torch.testing.assert_close(tile[name], ref[name], atol=2e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(map(str, case)))
def test_tile_equals_materialised(interpreted, case):
    """Outputs, input gradients and every parameter's gradient, in float32."""
    assert_same(interpreted["-".join(map(str, case))])


def test_tile_internals_are_the_materialised_ones(interpreted):
    """return_internals works on the tile path, with the materialised path's per-level scores and λ."""
    assert_same(interpreted["internals"])


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# on a GPU: causal and masked, masked only, neither; a key tile narrower than the query tile
CUDA_CASES = [(3, 2, True, True, "dynamic", 300, 64, 64, 2),
              (4, 4, False, True, "static", 300, 64, 32, 2),
              (2, 2, False, False, "dynamic", 1000, 64, 64, 1)]
NEEDS_CUDA = "needs a CUDA device (the compiled kernels, not the interpreter)"


@pytest.mark.skipif(not torch.cuda.is_available() or interpreting(), reason=NEEDS_CUDA)
@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda case: "-".join(map(str, case)))
def test_compiled_tile_equals_materialised_on_cuda(case):
    """The compiled kernels on a GPU, float32 (IEEE dot products, as torch's default)."""
    pytest.importorskip("triton", reason=NEEDS_TRITON)
    from tile_interpreter import run_case  # tests/ is on sys.path under pytest

    assert_same({impl: {k: v.cpu() for k, v in out.items()}
                 for impl, out in run_case(*case, device="cuda").items()})


@pytest.mark.skipif(not torch.cuda.is_available() or interpreting(), reason=NEEDS_CUDA)
@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda case: "-".join(map(str, case)))
def test_compiled_tile_in_bf16_is_as_close_to_float32_as_the_materialised_in_bf16(case):
    """Under bf16 autocast (how training runs on CUDA), the tile kernel's output and gradients
    are no further from the float32 answer than the materialised path's own bf16 ones, within 2x."""
    pytest.importorskip("triton", reason=NEEDS_TRITON)
    from tile_interpreter import run_case  # tests/ is on sys.path under pytest

    exact = run_case(*case, device="cuda")["materialised"]
    low = run_case(*case, device="cuda", autocast=torch.bfloat16)
    assert low["tile"].keys() == exact.keys()
    for name, want in exact.items():
        ref_err = (low["materialised"][name].float() - want).abs().max().item()
        tile_err = (low["tile"][name].float() - want).abs().max().item()
        assert tile_err <= 2 * ref_err + 1e-3 * want.abs().max().item(), (
            f"{name}: tile in bf16 is {tile_err:.3g} from float32, the materialised path {ref_err:.3g}")


@pytest.mark.skipif(torch.cuda.is_available() or interpreting(),
                    reason="the kernel can run here (CUDA or TRITON_INTERPRET)")
def test_tile_without_cuda_says_what_to_use():
    pytest.importorskip("triton", reason=NEEDS_TRITON)
    layer = HKTAttention(D, H, impl="tile")
    with pytest.raises(ConfigValueError, match=r"CUDA device, and this input is on cpu; use impl='fused'"):
        layer(torch.randn(1, 8, D))


def test_tile_without_triton_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    layer = HKTAttention(D, H, impl="tile")
    with pytest.raises(ConfigValueError, match=r"needs Triton, which is not installed.*use impl='fused'"):
        layer(torch.randn(1, 8, D))


@pytest.mark.parametrize("settings,match", [
    (dict(upsample="linear"), r"upsample.*nearest upsampling only"),
    (dict(stride=3, kernel_size=3), r"stride.*power-of-two stride"),
    (dict(levels=5), r"levels.*at most 4 levels"),
    (dict(dropout=0.1), r"dropout .*impl='tile'"),
])
def test_tile_refuses_what_it_does_not_compute(settings, match):
    with pytest.raises(ValueError, match=match):
        HKTAttention(D, H, impl="tile", **settings)


@pytest.mark.parametrize("sizes,match", [(dict(queries=12), r"tile.queries.*power of two"),
                                         (dict(keys=0), r"tile.keys.*>= 1")])
def test_tile_sizes_are_powers_of_two(sizes, match):
    with pytest.raises(ConfigValueError, match=match):
        TileSizes(**sizes)


@pytest.mark.skipif(interpreting(), reason="TRITON_INTERPRET is set: this process interprets")
def test_kernels_compile_for_a_gpu():
    """Triton's own compiler takes the kernels to an sm_90 binary (no GPU needed): the
    interpreter runs any Python, so this is what checks the shapes, dot sizes and constexpr
    scoping the GPU needs. bf16, L = 3, causal with a key mask, 64 × 64 tiles, d = 32."""
    pytest.importorskip("triton.backends.nvidia", reason="needs Triton's CUDA backend")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from hkt.mixers.tile_attention import kernels

    k = kernels()
    consts = dict(LEVELS=3, STRIDE=2, D=32, BD=32, BM=64, BN=64, CAUSAL=True, HAS_MASK=True,
                  PRECISION="tf32")
    pointers = {"LAM": "*fp32", "MASK": "*u8", "LSE": "*fp32", "DELTA": "*fp32", "DQ": "*fp32",
                "DLAM": "*fp32", "DK": "*fp32", "H": "i32", "scale": "fp32", "scale_log2": "fp32"}
    for fn in (k.hkt_tile_forward, k.hkt_tile_backward_query, k.hkt_tile_backward_key):
        signature = {name: "constexpr" if name in consts else pointers.get(
            name, "*bf16" if name.isupper() else "i32") for name in fn.arg_names}
        compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts),
                                  target=GPUTarget("cuda", 90, 32))
        assert compiled.asm["cubin"]
