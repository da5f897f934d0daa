"""S4D: a diagonal state space model as the token mixer (Gu, Gupta, Goel and Ré, 2022, "On the
Parameterization and Initialization of Diagonal State Space Models").

A baseline that is not an attention and is known to learn ListOps (the S4 family reaches about
60 % on LRA's). Each of the H = d_model channels is its own single-input single-output SSM

    x'(t) = A x(t) + B u(t),    y(t) = C x(t) + D u(t)

with a diagonal complex state matrix A of N/2 modes. A real SSM of state size N has its complex
modes in conjugate pairs; keeping one of each pair and taking twice the real part is the same
model (hence the factor 2 below). Discretised by zero-order hold with step dt:

    Ā = exp(dt A),    B̄ = (exp(dt A) − 1) A⁻¹ B
    x_k = Ā x_{k−1} + B̄ u_k,    y_k = 2 Re(C x_k) + D u_k

Unrolled, y = K * u + D u, a causal convolution with the kernel

    K_ℓ = 2 Re(Σ_n C_n B̄_n exp(ℓ dt A_n)),    ℓ = 0 … T−1

computed here in closed form and applied by FFT with zero padding to 2T: a linear, not a
circular, convolution, so K_ℓ never depends on T.

Choices (S4D's own, each stated in ``config/model/s4d.yaml``):

- Initialisation S4D-Lin: A_n = −1/2 + iπn, n = 0 … N/2−1, stored as ``log_A_real`` (Re A =
  −exp(log_A_real) stays negative: a stable SSM) and ``A_imag``; log dt uniform in
  [log dt_min, log dt_max] per channel; C complex standard normal; D standard normal; B = 1.
- A and B per channel (``n_ssm: null``), or ``n_ssm`` copies shared by the channels, channel h
  using copy h mod n_ssm (S4's ``n_ssm``; its LRA models share one: ``n_ssm: 1``). dt is per
  channel either way.
- B is fixed at 1 unless ``train_B`` (S4 trains it). With A per channel a trained B adds no
  function (K depends on the products C_n B_n only), but it changes how the model trains.
- Bidirectional unless the model is causal: a second kernel K← (its own C, the same A and dt)
  runs the SSM over the reversed sequence, and the two outputs are summed:
  y_t = Σ_ℓ K→_ℓ u_{t−ℓ} + Σ_ℓ K←_ℓ u_{t+ℓ} + D u_t (both sums over ℓ = 0 … T−1 within the
  sequence; S4 starts the backward sum at ℓ = 1 instead). It is applied as one convolution with
  the anti-causal kernel, so no sequence is reversed.
- Padding: padded positions (``key_mask`` False) are zeroed before the convolution. A
  convolution is shift-invariant and the zeros add nothing, so the real positions of a padded
  batch (right or left padding) equal the unpadded sequence's outputs, in both directions.
- Output map: GELU, dropout, then a position-wise Linear(H, 2H) and GLU (S4D's and S4's LRA
  models: ``postact: glu``).
- Optimiser: the module declares its parameter groups in :attr:`S4DMixer.optimizer_settings`
  (what S4's ``register`` sets on each tensor), which :func:`hkt.train.optim.build_optimizer`
  reads: A (``log_A_real``, ``A_imag``) and B at ``ssm_lr`` and ``ssm_weight_decay``; dt
  (``log_dt``) at ``dt_lr`` (null: ``ssm_lr``) and ``ssm_weight_decay``; D at the optimiser's
  learning rate, decayed at ``D_weight_decay`` when it is set (null: D is a vector like any
  other, not decayed). C and the output map follow the optimiser's own rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hkt.mixers.base import AttentionInternals, TokenMixer, check_key_mask
from hkt.mixers.catalog import register
from hkt.value_checks import boolean, integer, number
from hkt.dropout import Dropout
from hkt.errors import ConfigValueError


@dataclass
class S4DConfig:
    """S4D's own settings (``model.mixer`` when ``model.name`` is ``s4d``).

    Attributes:
        state_size: N, the state size of each channel's SSM: N/2 complex modes (conjugate pairs).
        dt_min: smallest initial step dt (log dt is drawn uniformly in [log dt_min, log dt_max]).
        dt_max: largest initial step dt.
        ssm_lr: learning rate of A and B, and of dt unless ``dt_lr`` (peak; the schedule of
            ``optim`` applies to it).
        ssm_weight_decay: weight decay of A, B and dt.
        n_ssm: independent copies of (A, B) shared by the channels (must divide d_model);
            null: one per channel.
        train_B: B is a parameter (initialised to 1) rather than the constant 1.
        dt_lr: learning rate of dt; null: ``ssm_lr`` (S4's ListOps: the optimiser's,
            ``${optim.lr}``).
        D_weight_decay: weight decay of D (at the optimiser's learning rate); null: none, D is
            a vector like the biases (S4 decays it: ``${optim.weight_decay}``).
    """

    state_size: int = 64
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    ssm_lr: float = 1e-3
    ssm_weight_decay: float = 0.0
    n_ssm: int | None = None
    train_B: bool = False
    dt_lr: float | None = None
    D_weight_decay: float | None = None

    def __post_init__(self) -> None:
        integer(self.state_size, "state_size", 2)
        if self.state_size % 2:
            raise ConfigValueError("state_size", self.state_size,
                                   "must be even: the N states are N/2 complex conjugate pairs")
        number(self.dt_min, "dt_min", 0, lo_open=True)
        number(self.dt_max, "dt_max", 0, lo_open=True)
        if self.dt_max < self.dt_min:
            raise ConfigValueError("dt_max", self.dt_max,
                                   f"must be >= dt_min ({self.dt_min}); swap them")
        number(self.ssm_lr, "ssm_lr", 0, lo_open=True)
        number(self.ssm_weight_decay, "ssm_weight_decay", 0)
        if self.n_ssm is not None:
            integer(self.n_ssm, "n_ssm", 1)
        boolean(self.train_B, "train_B")
        if self.dt_lr is not None:
            number(self.dt_lr, "dt_lr", 0, lo_open=True)
        if self.D_weight_decay is not None:
            number(self.D_weight_decay, "D_weight_decay", 0)

    def check_width(self, d_model: int) -> None:
        """Refuse an ``n_ssm`` that does not divide the model's channels."""
        if self.n_ssm is not None and d_model % self.n_ssm:
            raise ConfigValueError("n_ssm", self.n_ssm, f"must divide d_model ({d_model}): "
                                   "the channels share the copies of (A, B) evenly")

    def optimizer_settings(self) -> dict[str, dict[str, float | None]]:
        """Parameter name -> its AdamW ``lr`` and ``weight_decay`` (None: the optimiser's), as
        S4's ``register`` sets them; parameters not named follow the optimiser's own rule."""
        ssm = {"lr": self.ssm_lr, "weight_decay": self.ssm_weight_decay}
        dt = {"lr": self.ssm_lr if self.dt_lr is None else self.dt_lr,
              "weight_decay": self.ssm_weight_decay}
        out: dict[str, dict[str, float | None]] = {"log_dt": dt, "log_A_real": ssm, "A_imag": ssm}
        if self.train_B:
            out["B"] = ssm
        if self.D_weight_decay is not None:
            out["D"] = {"lr": None, "weight_decay": self.D_weight_decay}
        return out


@register("s4d")
class S4DMixer(TokenMixer):
    """Token mixing by H independent diagonal SSMs, one per channel, as an FFT convolution.

    Args:
        d_model: model width D = H, the number of SSM channels.
        n_heads: accepted for the common attention signature; must divide d_model.
        causal: one causal kernel; otherwise two (forward and backward), summed.
        dropout: dropout after the GELU, before the output map (training only).
        config: the mixer's own settings (:class:`S4DConfig`); or give its fields as keywords.
    """

    config_class = S4DConfig
    supports_internals: bool = False  # no queries, keys or scores: `hkt analyze` does not apply

    def build(self, config: S4DConfig) -> None:
        d_model, causal = self.d_model, self.causal
        config.check_width(d_model)
        h, modes = d_model, config.state_size // 2
        copies = h if config.n_ssm is None else config.n_ssm  # of (A, B)
        directions = 1 if causal else 2
        log_dt = torch.rand(h) * (math.log(config.dt_max) - math.log(config.dt_min))
        self.log_dt = nn.Parameter(log_dt + math.log(config.dt_min))  # (H,)
        self.log_A_real = nn.Parameter(torch.full((copies, modes), math.log(0.5)))  # Re A = −1/2
        self.A_imag = nn.Parameter(math.pi * torch.arange(modes, dtype=torch.float32).repeat(copies, 1))
        # B (copies, N/2) complex as (re, im), 1 at the start; the constant 1 unless trained
        self.B = nn.Parameter(torch.view_as_real(torch.ones(copies, modes, dtype=torch.cfloat))) \
            if config.train_B else None
        # C[c, h, n]: one C per direction c (forward, backward), complex, stored as (re, im)
        C = torch.randn(directions, h, modes, dtype=torch.cfloat)
        self.C = nn.Parameter(torch.view_as_real(C))
        self.D = nn.Parameter(torch.randn(h))
        self.drop = Dropout(self.dropout)
        self.output_linear = nn.Linear(h, 2 * h)  # then GLU: back to H
        # read by hkt.train.optim.build_optimizer: these parameters' own AdamW settings
        self.optimizer_settings = config.optimizer_settings()

    def kernel(self, length: int) -> Tensor:
        """K[c, h, ℓ] = 2 Re(Σ_n C[c,h,n] B̄[h,n] exp(ℓ dt[h] A[h,n])), ℓ = 0 … length−1:
        (directions, H, length), in the parameters' dtype."""
        dt = self.log_dt.exp().unsqueeze(-1)  # (H, 1)
        A = torch.complex(-self.log_A_real.exp(), self.A_imag)  # (copies, N/2)
        B = None if self.B is None else torch.view_as_complex(self.B)
        if A.shape[0] != dt.shape[0]:  # shared copies: channel h uses copy h mod n_ssm (S4's)
            A = A.repeat(dt.shape[0] // A.shape[0], 1)
            B = None if B is None else B.repeat(dt.shape[0] // B.shape[0], 1)
        dtA = dt * A
        B_bar = (dtA.exp() - 1) / A  # ZOH, with B = 1 ...
        if B is not None:
            B_bar = B_bar * B  # ... or the trained B
        C = torch.view_as_complex(self.C)  # (directions, H, N/2)
        ell = torch.arange(length, device=dt.device, dtype=dt.dtype)
        # Ā^ℓ = exp(ℓ dt A) = exp(ℓ dt Re A) (cos(ℓ dt Im A) + i sin(ℓ dt Im A)): (H, N/2, length);
        # the real functions are 2.6x faster on CPU than torch.exp of a complex tensor
        decay, phase = dtA.real.unsqueeze(-1) * ell, dtA.imag.unsqueeze(-1) * ell
        A_bar_pow = torch.polar(decay.exp(), phase)
        return 2 * torch.einsum("chn,hnl->chl", C * B_bar, A_bar_pow).real

    def ssm(self, x: Tensor, key_mask: Tensor | None = None) -> Tensor:
        """The state space part, y = K * u + D u (K→ and K← summed when bidirectional), on the
        input u = x with padded positions zeroed: x (B, T, H) -> y (B, H, T), channels first
        (the FFT's layout), in float32 at least."""
        t = x.shape[1]
        u = x.to(torch.promote_types(x.dtype, torch.float32))  # x may be bf16 under autocast
        if key_mask is not None:  # padding must not reach real positions
            u = u * key_mask.unsqueeze(-1).to(u.dtype)
        u = u.transpose(1, 2).contiguous()  # (B, H, T): the FFT runs along contiguous memory
        K = self.kernel(t).to(u.dtype)
        n = 2 * t  # zero padding to 2T: the circular FFT convolution is the linear one on 0..T−1
        k = F.pad(K[0], (0, n - t))  # causal: lag ℓ at index ℓ
        if K.shape[0] == 2:  # anti-causal: y_t gets K←_ℓ u_{t+ℓ}, lag −ℓ at index (n − ℓ) mod n
            k = k + torch.roll(F.pad(K[1].flip(-1), (n - t, 0)), 1, dims=-1)
        y = torch.fft.irfft(torch.fft.rfft(u, n=n) * torch.fft.rfft(k, n=n), n=n)[..., :t]
        return y + self.D.to(u.dtype).unsqueeze(-1) * u

    def forward(
        self, x: Tensor, key_mask: Tensor | None = None, *, return_internals: bool = False
    ) -> Tensor | tuple[Tensor, AttentionInternals]:
        """x: (B, T, D); key_mask: (B, T) bool, True at real tokens. Returns (B, T, D):
        GLU(Linear(dropout(GELU(y)))) of the SSM's y."""
        if return_internals:
            raise NotImplementedError(
                "the s4d mixer has no queries, keys, scores or fusion weights: "
                "attention internals (and `hkt analyze`) apply to attention models (mha, hkt) only")
        check_key_mask(key_mask, x)
        y = self.drop(F.gelu(self.ssm(x, key_mask)).transpose(1, 2))  # (B, T, H)
        return F.glu(self.output_linear(y.to(x.dtype)), dim=-1)

    def extra_repr(self) -> str:
        c = self.config
        shared = "" if c.n_ssm is None else f", n_ssm={c.n_ssm}"
        return (f"d_model={self.d_model}, state_size={c.state_size}{shared}, "
                f"{'causal' if self.causal else 'bidirectional'}, dt=[{c.dt_min}, {c.dt_max}]"
                f"{', B trained' if c.train_B else ''}")
