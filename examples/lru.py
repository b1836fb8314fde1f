"""The Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting Recurrent Neural Networks for Long
Sequences") as a seqbench mixer: one file, torch only, named by its import path.

    python src/train.py model=mixer model.mixer=examples.lru:LRU data=ptb        # from the checkout's root
    python src/train.py model=mixer model.mixer=examples.lru:LRU preset=frontier/ptb/mixer size=s

The recurrence, for each of the N channels of a complex state x (diagonal and time-invariant):

    x_t = λ ⊙ x_{t-1} + γ ⊙ (B u_t)       λ = exp(-exp(ν_log) + i·exp(θ_log)),  so |λ| < 1 always
    y_t = Re(C x_t) + D ⊙ u_t             γ = exp(γ_log), initialised to sqrt(1 - |λ|²)

- the exponential parametrisation (§3.2): ν_log and θ_log are trained, and |λ| = exp(-exp(ν_log)) stays
  in (0, 1), so no step of the optimiser can make the recurrence unstable;
- the ring initialisation (§3.2): |λ| uniform on the ring r_min <= |λ| <= r_max (the density of the
  squared radius is uniform, Lemma 3.2), the phase uniform in [0, max_phase];
- the γ normalisation (§3.3): the input is scaled by sqrt(1 - |λ|²), so a channel with |λ| near 1,
  which sums many inputs, keeps a state of the input's size at initialisation;
- training reads a window with a parallel scan (`scan`: log2 T doubling steps), generation one token
  at a time (`step`, O(1) a token).

The paper's block puts the LRU between a norm and a GLU; seqbench wraps a mixer in its own pre-norm
residual block, so this file is the LRU alone. Its state (B, N, 2): x as real and imaginary parts,
batch first, as seqbench.nn.mixer asks; it is carried from one truncated-BPTT window to the next.
There is no FLOPs formula here: seqbench measures one training step (FlopCounterMode) and says so.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def scan(lam: Tensor, b: Tensor, x0: Tensor | None = None) -> Tensor:
    """x_t = lam * x_{t-1} + b_t for every t: lam (N,), b (B, T, N), x0 (B, N) -> x (B, T, N), complex.

    Hillis-Steele doubling: after the pass with offset k, position t holds sum_{j < 2k} lam^j b_{t-j}
    (the inputs before the sequence count 0), so log2 T passes sum the whole prefix."""
    if x0 is not None:  # x_0 = lam x0 + b_0: fold the carried state into the first input
        b = torch.cat([b[:, :1] + lam * x0[:, None], b[:, 1:]], dim=1)
    power, k = lam, 1
    while k < b.size(1):
        b = torch.cat([b[:, :k], b[:, k:] + power * b[:, :-k]], dim=1)  # (B, T, N)
        power, k = power * power, 2 * k
    return b


class LRU(nn.Module):
    """u (B, T, H) -> y (B, T, H) through a diagonal complex recurrence of N channels (H = d_model)."""

    def __init__(self, d_model: int, d_state: int | None = None, r_min: float = 0.9, r_max: float = 0.999,
                 max_phase: float = 2 * math.pi):
        super().__init__()
        H, N = d_model, d_state or d_model
        u1, u2 = torch.rand(N), torch.rand(N)
        # ring init: |λ|² uniform in [r_min², r_max²], then ν = -log|λ| stored as its log
        self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2)))
        self.theta_log = nn.Parameter(torch.log(max_phase * u2))
        modulus = torch.exp(-torch.exp(self.nu_log.detach()))
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - modulus**2)))
        # B and C complex, as their real and imaginary parts (Glorot-like scales of the paper's code)
        self.B_re = nn.Parameter(torch.randn(N, H) / math.sqrt(2 * H))
        self.B_im = nn.Parameter(torch.randn(N, H) / math.sqrt(2 * H))
        self.C_re = nn.Parameter(torch.randn(H, N) / math.sqrt(N))
        self.C_im = nn.Parameter(torch.randn(H, N) / math.sqrt(N))
        self.D = nn.Parameter(torch.randn(H))

    def lam(self) -> Tensor:
        """λ (N,), complex: exp(-exp(ν_log) + i exp(θ_log))."""
        return torch.exp(torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))

    def inputs(self, u: Tensor) -> Tensor:
        """γ ⊙ (B u): u (..., H) real -> (..., N) complex, as two real matmuls."""
        gamma = torch.exp(self.gamma_log)  # complex needs float32 parts, also under bf16 autocast
        return torch.complex((u @ self.B_re.T).float(), (u @ self.B_im.T).float()) * gamma

    def outputs(self, x: Tensor, u: Tensor) -> Tensor:
        """Re(C x) + D ⊙ u: x (..., N) complex -> (..., H) real."""
        return x.real @ self.C_re.T - x.imag @ self.C_im.T + self.D * u

    def forward(self, u: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """A window u (B, T, H) from `state` (B, N, 2) or zeros -> y (B, T, H) and the state after it."""
        x0 = None if state is None else torch.view_as_complex(state.contiguous())
        x = scan(self.lam(), self.inputs(u), x0)  # (B, T, N)
        return self.outputs(x, u), torch.view_as_real(x[:, -1])

    def step(self, u_t: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """One token u_t (B, H) -> y_t (B, H) and the new state: x_t = λ x_{t-1} + γ B u_t."""
        x = self.inputs(u_t)
        if state is not None:
            x = x + self.lam() * torch.view_as_complex(state.contiguous())
        return self.outputs(x, u_t), torch.view_as_real(x)
