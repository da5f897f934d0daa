"""Compose and validate the training config (``config/train.yaml``) before any work starts.

Hydra (through :func:`hkt.config.compose`) catches unknown group options, unknown keys and wrong
types; :func:`validate` catches the values that are well-typed but impossible (levels=0,
d_model not a multiple of n_heads, linear upsampling in causal mode, a probability above 1, a
zero budget …). Each failure is one :class:`hkt.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hkt.config import compose, flatten
from hkt.errors import ConfigError

__all__ = ["CONFIG_NAME", "load_config", "validate", "model_error", "strip_for_compare"]

CONFIG_NAME = "train"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def load_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``train.yaml`` with ``overrides``, resolved and validated."""
    cfg = compose(CONFIG_NAME, overrides)
    if cfg.model.get("match_params_of"):  # experiment=mha_matched (h3 scaffolding; h1's wins)
        from hkt.baselines.matched import matched_d_ffn

        base = [o for o in overrides if not o.startswith(("model=", "experiment="))]
        cfg.model.d_ffn = matched_d_ffn(base)["d_ffn"]
    validate(cfg)
    return cfg


def _get(cfg: DictConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            raise ConfigError(f"config key '{key}' is missing (the config files are incomplete)")
        node = node[part]
    return node


class _Checker:
    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    def get(self, key: str) -> Any:
        return _get(self.cfg, key)

    def fail(self, key: str, why: str) -> None:
        raise ConfigError(f"config key '{key}' = {self.get(key)!r}: {why}")

    def int_(self, key: str, lo: int | None = None, *, nullable: bool = False) -> None:
        v = self.get(key)
        if v is None and nullable:
            return
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(key, "must be an integer")
        if lo is not None and v < lo:
            self.fail(key, f"must be >= {lo}")

    def num(self, key: str, lo: float | None = None, hi: float | None = None, *,
            lo_open: bool = False, hi_open: bool = False, nullable: bool = False) -> None:
        v = self.get(key)
        if v is None and nullable:
            return
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            self.fail(key, "must be a number")
        if lo is not None and (v <= lo if lo_open else v < lo):
            self.fail(key, f"must be {'>' if lo_open else '>='} {lo}")
        if hi is not None and (v >= hi if hi_open else v > hi):
            self.fail(key, f"must be {'<' if hi_open else '<='} {hi}")

    def choice(self, key: str, options: Sequence[Any]) -> None:
        if self.get(key) not in options:
            self.fail(key, f"must be one of {', '.join(map(str, options))}")

    def bool_(self, key: str) -> None:
        if not isinstance(self.get(key), bool):
            self.fail(key, "must be true or false")

    def label(self, key: str) -> None:
        v = self.get(key)
        if not isinstance(v, str) or not _LABEL.match(v):
            self.fail(key, "must be a non-empty label of letters, digits, '_', '-', '.', '+'")


def validate(cfg: DictConfig) -> DictConfig:
    """Raise :class:`ConfigError` naming the first impossible value; return ``cfg``."""
    c = _Checker(cfg)
    # run identity
    c.int_("seed", 0)
    c.label("variant")
    c.label("train.profile")
    # task (config/task/*.yaml, written by the data side)
    c.label("task.name")
    c.int_("task.num_classes", 2)
    c.int_("task.max_length", 1)
    _validate_model(c, cfg)
    # optimiser
    c.choice("optim.name", ["adamw"])
    c.num("optim.lr", 0, lo_open=True)
    betas = c.get("optim.betas")
    if len(betas) != 2:
        c.fail("optim.betas", "must be two numbers [beta1, beta2]")
    for i in range(2):
        if not isinstance(betas[i], (int, float)) or not 0 <= betas[i] < 1:
            c.fail("optim.betas", f"beta{i + 1} must be in [0, 1)")
    c.num("optim.eps", 0, lo_open=True)
    c.num("optim.weight_decay", 0)
    c.int_("optim.warmup_steps", 0)
    c.choice("optim.schedule", ["cosine", "linear", "constant"])
    c.num("optim.min_lr_ratio", 0, 1)
    c.num("optim.grad_clip", 0, lo_open=True, nullable=True)
    # budget
    for key in ("batch_size", "max_steps", "eval_every", "checkpoint_every", "log_every"):
        c.int_(f"train.{key}", 1)
    c.int_("train.eval_batches", 1, nullable=True)
    c.int_("train.test_batches", 1, nullable=True)
    if c.get("optim.warmup_steps") > c.get("train.max_steps"):
        c.fail("optim.warmup_steps", f"is longer than the run (train.max_steps = "
                                     f"{c.get('train.max_steps')})")
    c.choice("train.device", ["auto", "cpu", "cuda"])
    c.choice("train.precision", ["auto", "fp32", "bf16"])
    c.bool_("train.compile")
    c.bool_("train.deterministic")
    c.bool_("train.bucket")
    c.int_("train.num_workers", 0)
    c.int_("train.num_threads", 1, nullable=True)
    # tracking
    c.bool_("tracking.enabled")
    uri = c.get("tracking.uri")
    if uri is not None and (not isinstance(uri, str) or not uri.strip()):
        c.fail("tracking.uri", "must be a tracking URI (sqlite:///…, http://…, file:…) or null")
    for key in ("results_dir", "experiment", "run_name"):
        v = c.get(f"tracking.{key}")
        if not isinstance(v, str) or not v.strip():
            c.fail(f"tracking.{key}", "must be a non-empty string")
    return cfg


def _validate_model(c: _Checker, cfg: DictConfig) -> None:
    from hkt.attention import ATTENTION

    name = c.get("model.name")
    if name not in ATTENTION:
        c.fail("model.name", f"no attention registered under this name (known: "
                             f"{', '.join(sorted(ATTENTION))})")
    for key in ("d_model", "n_layers", "n_heads", "d_ffn"):
        c.int_(f"model.{key}", 1)
    if c.get("model.d_model") % c.get("model.n_heads"):
        c.fail("model.d_model", f"must be a multiple of model.n_heads "
                                f"({c.get('model.n_heads')}): each head gets d_model / n_heads")
    for key in ("dropout", "attn_dropout", "emb_dropout"):
        if key in cfg.model:
            c.num(f"model.{key}", 0, 1, hi_open=True)
    if "positional" in cfg.model:
        c.choice("model.positional", ["learned", "sinusoidal"])
    if "pooling" in cfg.model:
        c.choice("model.pooling", ["mean", "cls"])
    if "causal" in cfg.model:
        c.bool_("model.causal")
    if "norm_eps" in cfg.model:
        c.num("model.norm_eps", 0, lo_open=True)
    att = cfg.model.get("attention") or {}
    # arguments the attention class does not take
    params = inspect.signature(ATTENTION[name].__init__).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not takes_any:
        for key in att:
            if key not in params or key in ("self", "d_model", "n_heads", "causal", "dropout"):
                raise ConfigError(f"config key 'model.attention.{key}': not an argument of the "
                                  f"'{name}' attention (it takes: "
                                  f"{', '.join(k for k in params if k not in ('self', 'd_model', 'n_heads', 'causal', 'dropout')) or 'nothing'})")
    if name == "hkt":
        a = "model.attention"
        if "levels" in att:
            c.int_(f"{a}.levels", 1)
        if "stride" in att:
            c.int_(f"{a}.stride", 2)
        if "kernel_size" in att:
            c.int_(f"{a}.kernel_size", 1)
            stride = att.get("stride", 2)
            if att["kernel_size"] < stride:
                c.fail(f"{a}.kernel_size", f"must be >= model.attention.stride ({stride})")
        if "fusion" in att:
            c.choice(f"{a}.fusion", ["dynamic", "static"])
        if "upsample" in att:
            c.choice(f"{a}.upsample", ["nearest", "linear"])
            if att["upsample"] == "linear" and cfg.model.get("causal", False):
                c.fail(f"{a}.upsample", "linear upsampling mixes later positions into earlier "
                                        "ones; causal mode (model.causal=true) needs 'nearest'")
        if "impl" in att:
            c.choice(f"{a}.impl", ["fused", "reference"])


# ValueError messages of the model constructors start with the argument's name
_ARG_TO_KEY = {
    "vocab_size": "task (the data's vocab_size)", "num_classes": "task.num_classes",
    "max_length": "task.max_length", "attention": "model.name",
}


def model_error(exc: ValueError, cfg: DictConfig) -> ConfigError:
    """Turn a model constructor's ValueError into a ConfigError naming the config key."""
    msg = str(exc)
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", msg)
    arg = m.group(1) if m else ""
    keys = flatten(cfg.model, "model")
    key = _ARG_TO_KEY.get(arg)
    if key is None:
        for k in keys:
            if k.rsplit(".", 1)[-1] == arg:
                key = k
                break
    if key is None and "attention" in msg:
        key = "model.name"
    where = f"config key '{key}'" if key else "model config"
    return ConfigError(f"{where}: {msg}")


def strip_for_compare(cfg: Any) -> dict[str, Any]:
    """The parts of a resolved config that define a run (tracking settings excluded)."""
    d = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    d = dict(d)
    d.pop("tracking", None)
    # how the data were prepared is checked through the data checksums instead (mirror and
    # cache paths come from the environment and may differ between sessions)
    if isinstance(d.get("task"), dict):
        d["task"] = {k: v for k, v in d["task"].items() if k != "prepare"}
    return d
