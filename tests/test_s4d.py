"""The S4D mixer (hkt/mixers/s4d.py), its optimiser groups and its config: a baseline that is not
an attention, made by recipe (a) of docs/extending.md."""

from __future__ import annotations

import io
import shutil

import pytest
import torch
from omegaconf import OmegaConf

from hkt.mixers import build_mixer
from hkt.config_compose import config_dir
from hkt.errors import ConfigError, ConfigValueError
from hkt.models import EncoderConfig, build_model
from hkt.train.run_config import compose_train, load_config
from hkt.train.optim import build_optimizer, parameter_groups


def mixer(causal: bool, *, d_model: int = 6, state_size: int = 8, seed: int = 0):
    """A float64 S4D layer whose parameters are moved off their initial values (every channel
    and mode different, as after training)."""
    torch.manual_seed(seed)
    m = build_mixer("s4d", d_model=d_model, n_heads=2, causal=causal,
                        state_size=state_size).double().eval()
    with torch.no_grad():
        for p in (m.log_dt, m.log_A_real, m.A_imag, m.C, m.D):
            p.add_(0.3 * torch.randn_like(p))
    return m


def recurrence(m, u: torch.Tensor, direction: int = 0) -> torch.Tensor:
    """The SSM run step by step: x_k = Ā x_{k−1} + B̄ u_k, y_k = 2 Re(C x_k), Ā = exp(dt A),
    B̄ = (exp(dt A) − 1) A⁻¹ B with B = 1 (ZOH). u: (B, T, H) -> (B, T, H), without D u."""
    dt = m.log_dt.exp()[:, None]
    A = torch.complex(-m.log_A_real.exp(), m.A_imag)
    A_bar = torch.exp(dt * A)
    B_bar = (A_bar - 1) / A
    C = torch.view_as_complex(m.C)[direction]
    x = torch.zeros(u.shape[0], *A.shape, dtype=A.dtype)
    ys = []
    for k in range(u.shape[1]):
        x = A_bar * x + B_bar * u[:, k, :, None]
        ys.append(2 * (C * x).sum(-1).real)
    return torch.stack(ys, 1)


@pytest.mark.parametrize("causal", [True, False])
def test_fft_convolution_is_the_state_space_recurrence(causal):
    m = mixer(causal)
    u = torch.randn(2, 37, 6, dtype=torch.double)
    expected = recurrence(m, u) + m.D * u
    if not causal:  # the backward SSM: the same recurrence over the reversed sequence
        expected = expected + recurrence(m, u.flip(1), direction=1).flip(1)
    with torch.no_grad():
        torch.testing.assert_close(m.ssm(u).transpose(1, 2), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_impulse_response_at_every_lag_is_the_same_for_t_and_2t(causal):
    """Not a circular convolution: an impulse at the first or last position gives the same
    response at each lag whether the sequence is T or 2T long, and it is the kernel K."""
    m, t = mixer(causal), 25

    def response(length: int, at: int) -> torch.Tensor:
        u = torch.zeros(1, length, 6, dtype=torch.double)
        u[0, at] = 1.0
        with torch.no_grad():
            return m.ssm(u)[0].T - m.D * u[0]  # (length, H)

    with torch.no_grad():
        K = m.kernel(2 * t)  # (directions, H, 2T)
    first_t, first_2t = response(t, 0), response(2 * t, 0)  # lags 0 … L−1
    last_t, last_2t = response(t, t - 1).flip(0), response(2 * t, 2 * t - 1).flip(0)  # lags 0 … −(L−1)
    torch.testing.assert_close(first_t, first_2t[:t], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(last_t, last_2t[:t], rtol=1e-10, atol=1e-12)
    back = K[1].T if not causal else torch.zeros(2 * t, 6, dtype=torch.double)
    forward = K[0].T
    # lag 0 gets both kernels; later positions the forward one, earlier ones the backward one
    torch.testing.assert_close(first_2t[1:], forward[1:], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(last_2t[1:], back[1:], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(first_2t[0], forward[0] + back[0], rtol=1e-10, atol=1e-12)
    assert forward[1:].abs().amin() > 0 if causal else True  # the test sees nonzero lags


def test_causal_mode_never_sees_the_future():
    """∂y_i/∂x_j = 0 for j > i (to the FFT's float64 rounding); the bidirectional mixer does see it."""
    t = 12
    for causal in (True, False):
        m = mixer(causal)
        x = torch.randn(1, t, 6, dtype=torch.double, requires_grad=True)
        y = m(x)
        for i in range(t):
            (g,) = torch.autograd.grad(y[0, i].sum(), x, retain_graph=True)
            seen = g[0].abs().sum(-1)
            scale = seen[: i + 1].max()
            if i + 1 == t:
                continue
            if causal:
                assert seen[i + 1:].max() < 1e-12 * scale, f"position {i} sees the future"
            else:
                assert seen[i + 1:].min() > 1e-6 * scale, f"position {i} misses the future"


def padded_batch(lengths: list[int], t: int, *, left: int | None = None):
    """Rows of random x with noise at the padded positions: right padding, and the row
    ``left`` padded on the left instead."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(len(lengths), t, 6, dtype=torch.double, generator=g)
    mask = torch.zeros(len(lengths), t, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if b == left:
            mask[b, t - n:] = True
        else:
            mask[b, :n] = True
    x[~mask] = 1e3 * torch.randn(int((~mask).sum()), 6, dtype=torch.double, generator=g)
    return x, mask


@pytest.mark.parametrize("causal", [True, False])
def test_padded_batch_gives_the_unpadded_outputs(causal):
    m, t = mixer(causal), 20
    lengths = [20, 17, 9, 13]
    x, mask = padded_batch(lengths, t, left=3)
    with torch.no_grad():
        y = m(x, mask)
        for b, n in enumerate(lengths):
            alone = m(x[b:b + 1][mask[b:b + 1]].view(1, n, 6))[0]
            torch.testing.assert_close(y[b][mask[b]], alone, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("causal", [True, False])
def test_gradients_by_gradcheck(causal):
    m = mixer(causal, d_model=4, state_size=4)
    x = torch.randn(2, 5, 4, dtype=torch.double, requires_grad=True)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    names = [n for n, _ in m.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in m.named_parameters()]

    def f(x, *ps):
        return torch.func.functional_call(m, dict(zip(names, ps)), (x, mask))

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-6)


def test_bad_settings_name_the_key():
    for settings, key in [({"state_size": 7}, "state_size"), ({"state_size": 0}, "state_size"),
                          ({"dt_min": 0.0}, "dt_min"), ({"dt_min": 0.1, "dt_max": 0.01}, "dt_max"),
                          ({"ssm_lr": 0}, "ssm_lr"), ({"ssm_weight_decay": -1.0}, "ssm_weight_decay")]:
        with pytest.raises(ConfigValueError, match=rf"'{key}'"):
            build_mixer("s4d", d_model=8, n_heads=2, **settings)
    with pytest.raises(ConfigValueError, match=r"'mixer.state_size' = 5: must be even"):
        EncoderConfig(name="s4d", mixer={"state_size": 5})
    with pytest.raises(ConfigError, match=r"model.mixer.dt_max"):
        load_config(["model=s4d", "profile=smoke", "model.mixer.dt_max=1e-4"])
    with pytest.raises(NotImplementedError, match="attention models"):
        build_mixer("s4d", d_model=8, n_heads=2)(torch.randn(1, 4, 8), return_internals=True)


# --- optimiser groups -------------------------------------------------------------------------


def test_s4d_lrs_in_the_composed_paper_listops_config_and_its_optimizer():
    """S4D's row: optim.lr 1e-3 over the paper profile's 1e-4, and A and dt in their own AdamW
    group at ssm_lr 1e-3 without weight decay; the profile's steps and batch stay."""
    cfg = load_config(["model=s4d", "profile=paper", "task=listops"])
    assert cfg.optim.lr == 1e-3 and cfg.optim.weight_decay == 0.01
    assert cfg.model.mixer.ssm_lr == 1e-3 and cfg.model.mixer.ssm_weight_decay == 0.0
    assert (cfg.train.max_steps, cfg.train.batch_size) == (10000, 32)
    assert load_config(["model=mha", "profile=paper", "task=listops"]).optim.lr == 1e-4
    model = build_model(OmegaConf.to_container(cfg.model), vocab_size=18, num_classes=10,
                        max_length=512)
    opt, _ = build_optimizer(model, cfg.optim, 10000, torch.device("cpu"))
    assert [(g["initial_lr"], g["weight_decay"]) for g in opt.param_groups] == \
        [(1e-3, 0.01), (1e-3, 0.0), (1e-3, 0.0)]
    ssm = {n for n, p in model.named_parameters() if any(p is q for q in opt.param_groups[2]["params"])}
    assert ssm == {f"blocks.{i}.mixer.{n}" for i in range(2) for n in ("log_dt", "log_A_real", "A_imag")}
    # the group's own peak rate follows the schedule with the others
    cfg2 = load_config(["model=s4d", "profile=paper", "task=listops", "model.mixer.ssm_lr=2e-4"])
    opt, sched = build_optimizer(build_model(OmegaConf.to_container(cfg2.model), vocab_size=18,
                                             num_classes=10, max_length=512),
                                 cfg2.optim, 10000, torch.device("cpu"))
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([1e-3 / 1000, 1e-3 / 1000, 2e-4 / 1000])


@pytest.mark.parametrize("name", ["mha", "hkt", "conv"])
def test_models_without_declared_settings_keep_their_two_groups(name):
    """MHA, HKT and conv: exactly the groups they always had (decay: matrices outside
    embeddings and norms; no decay: the rest), in parameter order, so their runs are unchanged."""
    cfg = load_config([f"model={name}", "profile=cpu"])
    model = build_model(OmegaConf.to_container(cfg.model), vocab_size=18, num_classes=10,
                        max_length=64)
    exempt = {id(p) for m in model.modules() if isinstance(m, (torch.nn.Embedding, torch.nn.LayerNorm))
              for p in m.parameters(recurse=False)}
    params = [p for p in model.parameters() if p.requires_grad]
    groups = parameter_groups(model, cfg.optim)
    assert [sorted(g) for g in groups] == [["params", "weight_decay"]] * 2
    assert [p for p in groups[0]["params"]] == [p for p in params if p.ndim >= 2 and id(p) not in exempt]
    assert [p for p in groups[1]["params"]] == [p for p in params if p.ndim < 2 or id(p) in exempt]
    assert (groups[0]["weight_decay"], groups[1]["weight_decay"]) == (0.01, 0.0)


def test_a_bad_optimizer_declaration_is_refused():
    m = build_mixer("s4d", d_model=8, n_heads=2)
    m.optimizer_settings = {"log_dt": {"lr": 1e-3}}
    with pytest.raises(ValueError, match=r"optimizer_settings\['log_dt'\] sets lr; it must set "
                                         r"exactly lr, weight_decay"):
        parameter_groups(m, OmegaConf.create({"weight_decay": 0.0}))
    m.optimizer_settings = {"dt": {"lr": 1e-3, "weight_decay": 0.0}}
    with pytest.raises(ValueError, match=r"names 'dt', which is not one of its own parameters"):
        parameter_groups(m, OmegaConf.create({"weight_decay": 0.0}))


def test_the_model_optim_group_leaves_other_models_configs_as_they_were(tmp_path, monkeypatch):
    """config/model_optim/ (applied after the profile) holds s4d's file only: every other
    model composes exactly as without the group, so published runs keep their configs."""
    assert sorted(p.name for p in (config_dir() / "model_optim").glob("*.yaml")) == ["s4d.yaml"]
    combos = [["model=mha", "profile=paper", "task=listops"], ["model=conv", "profile=cpu", "task=imdb"],
              ["model=hkt", "profile=cpu", "task=cifar10", "variant=levels2"]]
    now = [OmegaConf.to_container(compose_train(c)) for c in combos]
    before = tmp_path / "config"
    shutil.copytree(config_dir(), before)
    train_yaml = (before / "train.yaml").read_text()
    assert "  - optional model_optim: ${model}\n" in train_yaml
    (before / "train.yaml").write_text(train_yaml.replace("  - optional model_optim: ${model}\n", ""))
    monkeypatch.setenv("HKT_CONFIG_DIR", str(before))
    assert [OmegaConf.to_container(compose_train(c)) for c in combos] == now
    assert compose_train(["model=s4d", "profile=paper"]).optim.lr == 1e-4  # the group matters


# --- training ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["listops", "imdb", "cifar10"])
def test_trains_on_every_task(prepared_data, tmp_path, task):
    """`model=s4d` builds from every task's config and trains (tiny sizes: the smoke profile,
    two steps), and A and dt move."""
    from hkt.train.data import RunData
    from hkt.train.loop import train
    from hkt.train.step import seed_everything

    cfg = load_config([f"task={task}", "model=s4d", "profile=smoke", "tracking.enabled=false",
                       "train.max_steps=2", "train.eval_every=2", "train.checkpoint_every=2",
                       "train.test_batches=1", "optim.warmup_steps=0"])
    record = train(cfg, prepared_data(task), tmp_path / "run", stream=io.StringIO(), progress=False)
    assert record["model"] == "s4d" and record["steps"] == 2 and record["config"]["model"]["name"] == "s4d"
    data = RunData(prepared_data(task), cfg.task)
    seed_everything(int(cfg.seed))  # the run's initial weights, as `hkt train` builds them
    init = build_model(OmegaConf.to_container(cfg.model), vocab_size=data.vocab_size,
                       num_classes=data.num_classes, max_length=int(cfg.task.max_length)).state_dict()
    trained = torch.load(tmp_path / "run/checkpoints/last.pt", weights_only=True)["model"]
    for name in ("log_dt", "log_A_real", "A_imag"):
        key = f"blocks.0.mixer.{name}"
        assert not torch.equal(trained[key], init[key]), f"{name} did not train"


# --- S4's settings: shared A and B, trained B, S4's parameter groups (issue 53) ---------------


def test_shared_copies_of_a_and_b_are_the_per_channel_model_with_a_and_b_repeated():
    """n_ssm: channel h uses copy h mod n_ssm of (A, B), as S4 tiles them; dt stays per channel."""
    torch.manual_seed(0)
    shared = build_mixer("s4d", d_model=6, n_heads=2, state_size=8, n_ssm=2, train_B=True)
    assert shared.log_A_real.shape == shared.A_imag.shape == (2, 4) and shared.B.shape == (2, 4, 2)
    assert shared.log_dt.shape == (6,)
    with torch.no_grad():
        shared.log_A_real.add_(torch.randn(2, 4) * 0.1)
        shared.B.copy_(torch.randn(2, 4, 2))
    full = build_mixer("s4d", d_model=6, n_heads=2, state_size=8, train_B=True)
    state = dict(shared.state_dict())
    for name in ("log_A_real", "A_imag", "B"):
        state[name] = state[name].repeat(3, *([1] * (state[name].ndim - 1)))
    full.load_state_dict(state)
    torch.testing.assert_close(shared.kernel(32), full.kernel(32), rtol=0, atol=0)


def test_a_trained_b_starts_at_one_and_trains():
    """train_B: B is a parameter at 1, so the kernel at the start is the fixed-B model's; it
    then takes a gradient (S4 trains it)."""
    torch.manual_seed(1)
    fixed = build_mixer("s4d", d_model=4, n_heads=2, state_size=8)
    torch.manual_seed(1)
    trained = build_mixer("s4d", d_model=4, n_heads=2, state_size=8, train_B=True)
    torch.testing.assert_close(trained.kernel(16), fixed.kernel(16), rtol=0, atol=0)
    trained(torch.randn(2, 16, 4)).sum().backward()
    assert trained.B.grad is not None and trained.B.grad.abs().sum() > 0


def test_shared_copies_must_divide_the_channels():
    with pytest.raises(ConfigValueError, match=r"'mixer.n_ssm' = 3: must divide d_model \(8\)"):
        EncoderConfig(name="s4d", d_model=8, mixer={"n_ssm": 3})
    with pytest.raises(ConfigValueError, match=r"'n_ssm' = 0: must be >= 1"):
        build_mixer("s4d", d_model=8, n_heads=2, n_ssm=0)


def recipe_config(*overrides: str):
    return load_config(["model=s4d", "profile=s4_recipe", "task=listops", *overrides])


def test_the_s4_recipe_composes_s4s_listops_layer_and_block():
    """S4's configs/experiment/lra/s4-listops.yaml: 6 x 256, post-norm BatchNorm, no FFN, no
    positions, d_state 4, n_ssm 1, B trained, dt in [1e-3, 1e-1], batch 32, 120k steps, 12k
    warmup, cosine, AdamW (0.9, 0.999) at lr 0.01 and weight decay 0.05, no clipping, fp32."""
    cfg = recipe_config()
    m = cfg.model
    assert (m.n_layers, m.d_model, m.d_ffn, m.norm, m.norm_place, m.positional, m.pooling) == \
        (6, 256, 0, "batch", "post", "none", "mean")
    assert (m.dropout, m.emb_dropout, m.mixer_dropout) == (0.0, 0.0, 0.0)
    mx = m.mixer
    assert (mx.state_size, mx.n_ssm, mx.train_B, mx.dt_min, mx.dt_max) == (4, 1, True, 1e-3, 0.1)
    t, o = cfg.train, cfg.optim
    assert (t.batch_size, t.max_steps, t.precision) == (32, 120000, "fp32")
    assert t.max_steps * t.batch_size == 40 * cfg.task.prepare.splits.train  # their 40 epochs
    assert (o.lr, o.weight_decay, list(o.betas), o.warmup_steps, o.schedule, o.min_lr_ratio,
            o.grad_clip) == (0.01, 0.05, [0.9, 0.999], 12000, "cosine", 0.0, None)
    # another model composes at the profile (S4's block), without S4D's layer settings
    assert recipe_config("model=mha").model.d_ffn == 0


def test_the_s4_recipe_optimizer_groups_read_back_as_s4_sets_them():
    """Each parameter's AdamW learning rate and weight decay, read back from the optimizer:
    A and B at 1e-3 without decay, dt at the global 0.01 without decay, D decayed at 0.05, C and
    the weights at 0.01 and 0.05; biases, norms and the embedding not decayed."""
    cfg = recipe_config("model.d_model=16", "model.n_layers=2")
    model = build_model(OmegaConf.to_container(cfg.model), vocab_size=18, num_classes=10,
                        max_length=512)
    opt, _ = build_optimizer(model, cfg.optim, 1000, torch.device("cpu"))
    got = {name: (g["initial_lr"], g["weight_decay"]) for g in opt.param_groups
           for name, p in model.named_parameters() if any(p is q for q in g["params"])}
    assert len(got) == len(list(model.parameters()))
    want = {"log_A_real": (1e-3, 0.0), "A_imag": (1e-3, 0.0), "B": (1e-3, 0.0),
            "log_dt": (0.01, 0.0), "D": (0.01, 0.05), "C": (0.01, 0.05),
            "output_linear.weight": (0.01, 0.05), "output_linear.bias": (0.01, 0.0),
            "norm1.weight": (0.01, 0.0), "norm1.bias": (0.01, 0.0)}
    for i in range(2):
        for name, setting in want.items():
            key = f"blocks.{i}.{'mixer.' if not name.startswith('norm') else ''}{name}"
            assert got.pop(key) == setting, key
    assert got == {"embed.weight": (0.01, 0.0), "head.weight": (0.01, 0.05), "head.bias": (0.01, 0.0)}
    # the declaration itself, as the mixer states it (None: the optimiser's own)
    assert model.blocks[0].mixer.optimizer_settings == {
        "log_dt": {"lr": 0.01, "weight_decay": 0.0}, "log_A_real": {"lr": 1e-3, "weight_decay": 0.0},
        "A_imag": {"lr": 1e-3, "weight_decay": 0.0}, "B": {"lr": 1e-3, "weight_decay": 0.0},
        "D": {"lr": None, "weight_decay": 0.05}}


def test_the_default_s4d_declares_what_it_always_did():
    """Without S4's settings: A and dt at ssm_lr without decay, in one group; B fixed; D
    undeclared (a vector: not decayed), so S4D's earlier runs keep their optimizer."""
    m = build_mixer("s4d", d_model=8, n_heads=2)
    ssm = {"lr": 1e-3, "weight_decay": 0.0}
    assert m.optimizer_settings == {"log_dt": ssm, "log_A_real": ssm, "A_imag": ssm}
    assert m.B is None and "B" not in dict(m.named_parameters())


@pytest.mark.parametrize("task", ["listops", "imdb", "cifar10"])
def test_trains_on_every_task_in_s4s_block(prepared_data, tmp_path, task):
    """`model=s4d` at the s4_recipe profile (S4's block and layer; tiny sizes, two steps)
    trains on every task; A, B and dt move, and BatchNorm's running statistics are kept."""
    from hkt.train.loop import train

    cfg = recipe_config(f"task={task}", "model.d_model=8", "model.n_layers=1",
                        "train.batch_size=4", "tracking.enabled=false", "train.max_steps=2",
                        "train.eval_every=2", "train.checkpoint_every=2", "train.eval_batches=1",
                        "train.test_batches=1", "optim.warmup_steps=0")
    record = train(cfg, prepared_data(task), tmp_path / "run", stream=io.StringIO(), progress=False)
    assert record["steps"] == 2 and record["config"]["model"]["norm"] == "batch"
    trained = torch.load(tmp_path / "run/checkpoints/last.pt", weights_only=True)["model"]
    assert int(trained["blocks.0.norm1.num_batches_tracked"]) == 2
    assert not torch.equal(trained["blocks.0.mixer.B"][..., 0], torch.ones(1, 2))
