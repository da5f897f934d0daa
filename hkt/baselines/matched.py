"""An MHA with as many parameters as HKT: the FFN width that closes the gap.

HKT adds per-level query/key projections, pyramid convolutions and a fusion gate to every block,
so it has more parameters than MHA of the same width. To tell gains from size, the ablation
trains an MHA whose feed-forward width d_ffn is widened until its parameter count matches HKT's
(to within one FFN unit, 2·D + 1 parameters per block). Only the attention differs between the
two models, so the difference does not depend on the vocabulary or the sequence length.

    python -m hkt.baselines.matched --out FILE [OVERRIDES…]

composes the training config for ``model=hkt`` and ``model=mha`` with the same Hydra overrides
(task, profile, …; a ``hkt:``-prefixed override applies to the HKT side only, e.g.
``hkt:model.attention.levels=4``) and writes the override ``model.d_ffn=N`` to FILE, one line,
for ``hkt train … model=mha $(cat FILE)``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hkt.errors import ConfigError, HKTError

__all__ = ["count_params", "matched_d_ffn", "main"]


def count_params(model_cfg: dict, num_classes: int, max_length: int) -> int:
    from hkt.models import build_model

    model = build_model(model_cfg, vocab_size=2, num_classes=num_classes, max_length=max_length)
    return sum(p.numel() for p in model.parameters())


def matched_d_ffn(overrides: Sequence[str] = (), hkt_overrides: Sequence[str] = ()) -> dict:
    """The MHA ``d_ffn`` that matches HKT's parameter count under ``overrides``.

    Returns ``{"d_ffn", "hkt_params", "mha_params", "mha_params_before", "d_ffn_before"}``
    (parameter counts with a two-token vocabulary: only their difference is meaningful).
    """
    from omegaconf import OmegaConf

    from hkt.config import compose

    base = [o for o in overrides if not o.startswith("model=")]
    cfg_h = compose("train", [*base, "model=hkt", *hkt_overrides])
    cfg_m = compose("train", [*base, "model=mha"])
    mh = OmegaConf.to_container(cfg_h.model, resolve=True)
    mm = OmegaConf.to_container(cfg_m.model, resolve=True)
    for key in ("d_model", "n_layers"):
        if mh[key] != mm[key]:
            raise ConfigError(f"model.{key} differs between HKT ({mh[key]}) and MHA ({mm[key]}): "
                              "matching by FFN width needs the same width and depth")
    nc, ml = int(cfg_h.task.num_classes), int(cfg_h.task.max_length)
    p_h, p_m = count_params(mh, nc, ml), count_params(mm, nc, ml)
    per_unit = int(mm["n_layers"]) * (2 * int(mm["d_model"]) + 1)
    d_ffn = max(1, int(mm["d_ffn"]) + round((p_h - p_m) / per_unit))
    p_new = count_params({**mm, "d_ffn": d_ffn}, nc, ml)
    return {"d_ffn": d_ffn, "hkt_params": p_h, "mha_params": p_new, "mha_params_before": p_m,
            "d_ffn_before": int(mm["d_ffn"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hkt.baselines.matched",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", metavar="FILE", help="write the override here (default: stdout)")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDES",
                        help="Hydra overrides of both models (task=…, profile=…); "
                             "prefix hkt: for the HKT side only")
    args = parser.parse_args(argv)
    both = [o for o in args.overrides if not o.startswith("hkt:")]
    hkt_only = [o[len("hkt:"):] for o in args.overrides if o.startswith("hkt:")]
    try:
        m = matched_d_ffn(both, hkt_only)
    except HKTError as exc:
        print(f"hkt.baselines.matched: error: {exc}", file=sys.stderr)
        return 2
    line = f"model.d_ffn={m['d_ffn']}"
    print(f"HKT {m['hkt_params']:,} parameters; MHA d_ffn {m['d_ffn_before']} -> {m['d_ffn']}: "
          f"{m['mha_params_before']:,} -> {m['mha_params']:,} parameters "
          "(two-token vocabulary; the embedding is the same for both)", file=sys.stderr)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(line + "\n", encoding="utf-8")
    else:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
