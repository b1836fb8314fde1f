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

from seqbench.nn.scan import default_method, linear_scan, log_space_scan, scan_step, without_autocast
from seqbench.nn.time_pieces import in_time_pieces


def g(x: Tensor) -> Tensor:
    """The paper's positive activation: x + 1/2 for x >= 0, sigmoid(x) below.

    Written as max(x + 1/2, sigmoid(x)), the same function (the line x + 1/2 touches sigmoid at 0,
    where both are 1/2, and sigmoid's slope is at most 1/4, so the line is above for x > 0 and
    below for x < 0) in three passes over x instead of `where`'s four plus a mask."""
    return torch.maximum(x + 0.5, torch.sigmoid(x))


def _g_into(k_h: Tensor, scratch: Tensor) -> Tensor:
    """g(k_h) as `g` computes it, with `scratch` (k_h's shape) taking the sigmoid: one allocation."""
    gh = k_h + 0.5
    return torch.maximum(gh, torch.sigmoid(k_h, out=scratch), out=gh)


def _g_derivative_into(k_h: Tensor, gh: Tensor, out: Tensor, scratch: Tensor) -> Tensor:
    """g'(k_h) into `out`: 1 for k_h >= 0, sigmoid' = g (1 - g) below, i.e. the larger of the two
    (g (1 - g) <= 1/4); `scratch` holds the step 1[k_h >= 0] on the way."""
    torch.sub(1, gh, out=out).mul_(gh)
    return torch.maximum(out, torch.ge(k_h, 0, out=scratch), out=out)


class _MinGRUGates(torch.autograd.Function):
    """k = (k_z, k_h) -> the scan's a = 1 - z, b = z g(k_h), with z = sigmoid(k_z).

    One Function with a hand-written backward, so the chain costs a few in-place passes over
    (B, T, H) instead of autograd's graph of `sigmoid`, `maximum`, `mul` and `rsub` nodes, each
    allocating its own gradient: on a CPU these passes, not the scan, are most of a layer's time."""

    @staticmethod
    @without_autocast
    def forward(ctx, k: Tensor) -> tuple[Tensor, Tensor]:
        k_z, k_h = k.chunk(2, dim=-1)
        z = torch.sigmoid(k_z)
        b = torch.empty_like(z)
        gh = _g_into(k_h, scratch=b)
        ctx.save_for_backward(k_h, z, gh)
        return torch.rsub(z, 1), torch.mul(z, gh, out=b)

    @staticmethod
    @torch.autograd.function.once_differentiable
    @without_autocast
    def backward(ctx, grad_a: Tensor, grad_b: Tensor) -> Tensor:
        # Fresh CPU buffers of this size cost more (page faults) than the arithmetic, so every pass
        # below writes into dk or the one scratch tensor w
        k_h, z, gh = ctx.saved_tensors
        dk = torch.empty(*z.shape[:-1], 2 * z.shape[-1], dtype=z.dtype, device=z.device)
        dk_z, dk_h = dk.chunk(2, dim=-1)
        # dL/dz = grad_b g(k_h) - grad_a (a = 1 - z, b = z g), and dz/dk_z = z (1 - z)
        w = torch.rsub(z, 1).mul_(z)
        torch.mul(grad_b, gh, out=dk_z).sub_(grad_a).mul_(w)
        g_prime = _g_derivative_into(k_h, gh, out=w, scratch=dk_h)  # before dk_h gets its value
        torch.mul(grad_b, z, out=dk_h).mul_(g_prime)
        return dk


def log_g(x: Tensor) -> Tensor:
    """log g(x) without overflow: log(relu(x) + 1/2) above 0, -softplus(-x) = log sigmoid(x) below."""
    return torch.where(x >= 0, torch.log(F.relu(x) + 0.5), -F.softplus(-x))


class _MinRNN(nn.Module):
    """Shared shell: one input projection to the gate pre-activations, then a linear scan.

    A subclass says how many pre-activations it needs (`n_gates`) and turns them into the scan's
    coefficients (`coefficients`, linear space) or their logs (`log_coefficients`, for "log")."""

    n_gates: int

    def __init__(self, input_size: int, hidden_size: int, scan: str | None = None,
                 cpu_time_chunk: int | None = 512):
        super().__init__()
        self.hidden_size = hidden_size
        self.scan = scan  # None: the device's fastest (seqbench.nn.scan.default_method)
        self.cpu_time_chunk = cpu_time_chunk  # steps a CPU piece holds (seqbench.nn.time_pieces says why)
        self.proj = nn.Linear(input_size, self.n_gates * hidden_size)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B, T, input_size), h0 (B, hidden) or None (zeros) -> (h (B, T, hidden), h_T)."""
        return in_time_pieces(self._forward, x, h0, self.cpu_time_chunk)

    def _forward(self, x: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
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


class _MinLSTMGates(torch.autograd.Function):
    """k = (k_f, k_i, k_h) -> a = f', b = i' g(k_h) with f' = f / (f + i), i' = i / (f + i) = 1 - f'.

    i' = sigmoid(r) with r = log(i / f) = log sigmoid(k_i) - log sigmoid(k_f): no 0 / 0 where both
    gates underflow. Hand-written backward for the reason `_MinGRUGates` gives."""

    @staticmethod
    @without_autocast
    def forward(ctx, k: Tensor) -> tuple[Tensor, Tensor]:
        k_f, k_i, k_h = k.chunk(3, dim=-1)
        b = F.logsigmoid(k_i).sub_(F.logsigmoid(k_f))  # r, until it holds b
        i_norm = torch.sigmoid(b)
        gh = _g_into(k_h, scratch=b)
        torch.mul(i_norm, gh, out=b)
        ctx.save_for_backward(k, i_norm, gh)
        return torch.rsub(i_norm, 1), b

    @staticmethod
    @torch.autograd.function.once_differentiable
    @without_autocast
    def backward(ctx, grad_a: Tensor, grad_b: Tensor) -> Tensor:
        k, i_norm, gh = ctx.saved_tensors
        k_f, k_i, k_h = k.chunk(3, dim=-1)
        dk = torch.empty_like(k)
        dk_f, dk_i, dk_h = dk.chunk(3, dim=-1)
        # dL/di' = grad_b g - grad_a (a = 1 - i'), di'/dr = i' (1 - i'); dk_f holds dL/dr for now
        w = torch.rsub(i_norm, 1).mul_(i_norm)
        dr = torch.mul(grad_b, gh, out=dk_f).sub_(grad_a).mul_(w)
        # dr/dk_i = 1 - sigmoid(k_i) = sigmoid(-k_i), dr/dk_f = -sigmoid(-k_f)
        torch.neg(k_i, out=dk_i).sigmoid_().mul_(dr)
        dr.mul_(torch.neg(k_f, out=w).sigmoid_()).neg_()
        g_prime = _g_derivative_into(k_h, gh, out=w, scratch=dk_h)
        torch.mul(grad_b, i_norm, out=dk_h).mul_(g_prime)
        return dk


class MinGRU(_MinRNN):
    """minGRU: the update gate z decides, per feature, how much of g(W_h x) replaces the state."""

    n_gates = 2

    def coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        return _MinGRUGates.apply(k)

    def log_coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        k_z, k_h = k.chunk(2, dim=-1)
        # log(1 - sigmoid(k)) = -softplus(k), log sigmoid(k) = -softplus(-k)
        return -F.softplus(k_z), -F.softplus(-k_z) + log_g(k_h)


class MinLSTM(_MinRNN):
    """minLSTM: forget and input gates, normalised to sum to one so the state's scale does not
    depend on time (the paper's f'/(f'+i'), which keeps the parallel and step forms identical)."""

    n_gates = 3

    def coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        return _MinLSTMGates.apply(k)

    def log_coefficients(self, k: Tensor) -> tuple[Tensor, Tensor]:
        k_f, k_i, k_h = k.chunk(3, dim=-1)
        r = F.logsigmoid(k_i) - F.logsigmoid(k_f)  # log(i / f); f' = sigmoid(-r), i' = sigmoid(r)
        return -F.softplus(r), -F.softplus(-r) + log_g(k_h)
