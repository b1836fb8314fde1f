"""minGRU and minLSTM (Feng et al. 2024, "Were RNNs All We Needed?", arXiv:2410.01201).

Both strip a classic gated cell until its gates read only the input x_t, never h_{t-1}; the state
update becomes linear in h, h_t = a_t * h_{t-1} + b_t, so training runs the whole sequence as one
`linear_scan` while generation stays one multiply-add per token with a fixed-size state.

    minGRU:   z_t = sigmoid(W_z x_t),  h~_t = g(W_h x_t)
              h_t = (1 - z_t) h_{t-1} + z_t h~_t
    minLSTM:  f_t = sigmoid(W_f x_t),  i_t = sigmoid(W_i x_t),  h~_t = g(W_h x_t)
              f'_t = f_t / (f_t + i_t),  i'_t = i_t / (f_t + i_t)   (time-independent scale)
              h_t = f'_t h_{t-1} + i'_t h~_t

g(x) = x + 1/2 for x >= 0, sigmoid(x) otherwise (the paper's parallel-mode g): positive, so the
state stays positive and the log-space scan applies; continuous at 0 (both sides give 1/2).

Each layer maps (B, T, input_size) -> (B, T, hidden_size) with `forward(x, h0)` (parallel, for
training) and `step(x_t, h)` (one token, for generation); both read the same `proj` weights and
return the new state, so a truncated-BPTT caller carries h across batches exactly like an LSTM's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqbench.nn.scan import default_method, linear_scan, log_space_scan, scan_step


def g(x: Tensor) -> Tensor:
    """The paper's positive activation: x + 1/2 for x >= 0, sigmoid(x) below."""
    return torch.where(x >= 0, x + 0.5, torch.sigmoid(x))


def log_g(x: Tensor) -> Tensor:
    """log g(x) without overflow: log(relu(x) + 1/2) above 0, -softplus(-x) = log sigmoid(x) below."""
    return torch.where(x >= 0, torch.log(F.relu(x) + 0.5), -F.softplus(-x))


class _MinRNN(nn.Module):
    """Shared shell: one input projection to the gate pre-activations, then a linear scan.

    A subclass says how many pre-activations it needs (`n_gates`) and turns them into the scan's
    coefficients (`coefficients`, linear space) or their logs (`log_coefficients`, for "log")."""

    n_gates: int

    def __init__(self, input_size: int, hidden_size: int, scan: str | None = None):
        super().__init__()
        self.hidden_size = hidden_size
        self.scan = scan  # None: the device's fastest (seqbench.nn.scan.default_method)
        self.proj = nn.Linear(input_size, self.n_gates * hidden_size)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B, T, input_size), h0 (B, hidden) or None (zeros) -> (h (B, T, hidden), h_T)."""
        k = self.proj(x)  # (B, T, n_gates * hidden)
        method = self.scan or default_method(x.device)
        if method == "log":
            log_a, log_b = self.log_coefficients(k)
            h = log_space_scan(log_a, log_b, None if h0 is None else h0.log())
        else:
            a, b = self.coefficients(k)
            h = linear_scan(a, b, h0, method)
        return h, h[:, -1]

    def step(self, x_t: Tensor, h: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """One token: x_t (B, input_size), h (B, hidden) or None -> (h_t, h_t)."""
        a, b = self.coefficients(self.proj(x_t))
        h = scan_step(a, b, h)
        return h, h


class MinGRU(_MinRNN):
    """minGRU: the update gate z decides, per feature, how much of g(W_h x) replaces the state."""

    n_gates = 2

    def coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        k_z, k_h = k.chunk(2, dim=-1)
        z = torch.sigmoid(k_z)
        return 1 - z, z * g(k_h)

    def log_coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        k_z, k_h = k.chunk(2, dim=-1)
        # log(1 - sigmoid(k)) = -softplus(k), log sigmoid(k) = -softplus(-k)
        return -F.softplus(k_z), -F.softplus(-k_z) + log_g(k_h)


class MinLSTM(_MinRNN):
    """minLSTM: forget and input gates, normalised to sum to one so the state's scale does not
    depend on time (the paper's f'/(f'+i'), which keeps the parallel and step forms identical)."""

    n_gates = 3

    def _log_ratio(self, k: Tensor) -> tuple[Tensor, Tensor]:
        k_f, k_i, k_h = k.chunk(3, dim=-1)
        # log(i / f) = log sigmoid(k_i) - log sigmoid(k_f); then f' = sigmoid(-r), i' = sigmoid(r)
        return F.softplus(-k_f) - F.softplus(-k_i), k_h

    def coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        r, k_h = self._log_ratio(k)
        return torch.sigmoid(-r), torch.sigmoid(r) * g(k_h)

    def log_coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        r, k_h = self._log_ratio(k)
        return -F.softplus(r), -F.softplus(-r) + log_g(k_h)
