"""A Mamba-1 style selective state-space block (Gu & Dao 2023, arXiv:2312.00752, Algorithm 2 / Fig. 3).

    x (B, T, D) --in_proj--> u, z (B, T, E)            E = expand * D
    u --causal depthwise conv (kernel 4)--> SiLU --> u
    Δ = softplus(dt_proj(W_Δ u)) (B, T, E),  B_t, C_t = W_B u, W_C u (B, T, N)     (selective)
    A = -exp(A_log) (E, N), diagonal, S4D-real init A_n = -(n + 1)
    h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t      (zero-order hold for A, Euler for B, as Mamba)
    y_t = C_t · h_t + D u_t,   out = out_proj(y * SiLU(z))

The state per layer is the conv's last kernel-1 inputs and h (B, E, N): fixed size, so generation
is O(1) per token. `selective=False` builds the time-invariant control (an S4D-like layer with the
same conv, gate and sizes): Δ, B and C are parameters of shape (E,), (E, N), (E, N) that no input
changes, so the recurrence is one fixed linear filter, which cannot select what to remember by
content (the paper's selective-copying argument, Table 1: S4 18.3 % against Mamba's 99.8 %).

The parallel form materialises the (B, K, E, N) coefficients of K = `scan_chunk` steps at a time and
runs `linear_scan` over them, each piece checkpointed so nothing (B, T, E, N) is held for the whole
window (issue 69); Mamba's CUDA kernel fuses this in SRAM instead. On a CPU (scan "loop", the default
there) the selective block runs `_SelectiveScan` instead, which never materialises them.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from seqbench.nn.causal_conv import causal_conv
from seqbench.nn.scan import default_method, linear_scan, scan_step, without_autocast
from seqbench.nn.time_pieces import in_time_pieces

SSMState = tuple[Tensor, Tensor]  # (conv inputs (B, E, kernel - 1), h (B, E, N))
_LOG2E = math.log2(math.e)


class _SelectiveScan(torch.autograd.Function):
    """y_t = C_t . h_t with h_t = exp(Δ_t A) h_{t-1} + x_t ⊗ B_t (x = Δ u), one step at a time.

    The CPU path. It never builds a (B, T, E, N) tensor: each step's (B, E, N) work stays in
    cache and writes into a few buffers allocated once, and every reduction (C . h, the gradients
    of x, Δ, A, B, C) happens inside the step that has its operands at hand. On a CPU a fresh
    buffer of that size costs more in page faults than the arithmetic done in it.

    Inside, the state is laid out (B, N, E), E last (issue 69): the read-out C_t . h_t and the input's
    gradient B_t . g_t are then a row vector times an (N, E) matrix, which BLAS runs at ~7x the rate
    of the (E, N) matrix times a column of 16 the (B, E, N) layout needs (measured on the AMD EPYC
    VM, one thread, B 16, E 512); the two reductions over E (C's and B's gradients) become a product
    and a sum over contiguous rows. The decay is exp2(Δ_t A log2 e), the same number: torch's exp2 ran
    1.6x faster than exp there, and the decay's exponential is the scan's largest single cost.

    Memory: the forward keeps h only every CHUNK steps; the backward recomputes one chunk's states
    and decays at a time (gradient checkpointing inside the scan), so the state costs
    B (T / CHUNK + 2 CHUNK) E N floats instead of B T E N.

        x (B, T, E), delta (B, T, E), A (E, N), B, C (B, T, N), h0 (B, E, N) or None
        -> y (B, T, E), h_T (B, E, N)
    """

    CHUNK = 32

    @staticmethod
    @without_autocast
    def forward(ctx, x, delta, A, B, C, h0):
        Bsz, T, E = x.shape
        N, K = A.shape[1], _SelectiveScan.CHUNK
        A2 = (A * _LOG2E).t().contiguous()  # (N, E): exp(Δ A) = exp2(Δ A log2 e)
        checkpoints = x.new_empty((T + K - 1) // K, Bsz, N, E)  # h before steps 0, K, 2K, ...
        y = x.new_empty(Bsz, T, E)
        decay, inject, row = x.new_empty(Bsz, N, E), x.new_empty(Bsz, N, E), x.new_empty(Bsz, 1, E)
        h = x.new_zeros(Bsz, N, E) if h0 is None else h0.transpose(1, 2).contiguous()
        h_next = x.new_empty(Bsz, N, E)
        for t in range(T):
            if t % K == 0:
                checkpoints[t // K] = h
            torch.exp2(torch.mul(delta[:, t].unsqueeze(1), A2, out=decay), out=decay)
            torch.mul(B[:, t].unsqueeze(-1), x[:, t].unsqueeze(1), out=inject)  # B_t ⊗ x_t, (B, N, E)
            torch.addcmul(inject, decay, h, out=h_next)
            h, h_next = h_next, h
            y[:, t] = torch.bmm(C[:, t].unsqueeze(1), h, out=row).squeeze(1)  # C_t . h_t
        ctx.has_h0 = h0 is not None
        ctx.save_for_backward(x, delta, A, B, C, checkpoints)
        return y, h.transpose(1, 2).contiguous()

    @staticmethod
    @torch.autograd.function.once_differentiable
    @without_autocast
    def backward(ctx, grad_y, grad_hT):
        x, delta, A, B, C, checkpoints = ctx.saved_tensors
        Bsz, T, E = x.shape
        N, K = A.shape[1], _SelectiveScan.CHUNK
        A2, A_t = (A * _LOG2E).t().contiguous(), A.t().contiguous()  # (N, E)
        new = lambda *shape: x.new_empty(*shape)  # noqa: E731
        grad_x, grad_delta, grad_B, grad_C = new(Bsz, T, E), new(Bsz, T, E), new(Bsz, T, N), new(Bsz, T, N)
        H, D = new(K, Bsz, N, E), new(K, Bsz, N, E)  # one chunk's states and decays, recomputed
        g, g_next, decay_next, work = (new(Bsz, N, E) for _ in range(4))
        row = new(Bsz, 1, E)
        grad_A_per_row = x.new_zeros(Bsz, N, E)  # summed over the batch at the end
        grad_hT = None if grad_hT is None else grad_hT.transpose(1, 2)
        for c in range(len(checkpoints) - 1, -1, -1):
            t0, t1 = c * K, min(T, (c + 1) * K)
            h = checkpoints[c]
            for t in range(t0, t1):  # the forward again, keeping this chunk's h_t and exp(Δ_t A)
                torch.exp2(torch.mul(delta[:, t].unsqueeze(1), A2, out=D[t - t0]), out=D[t - t0])
                torch.mul(B[:, t].unsqueeze(-1), x[:, t].unsqueeze(1), out=work)
                h = torch.addcmul(work, D[t - t0], h, out=H[t - t0])
            for t in range(t1 - 1, t0 - 1, -1):
                dy = grad_y[:, t].unsqueeze(1)  # (B, 1, E)
                # g_t = dL/dh_t = C_t ⊗ dy_t + exp(Δ_{t+1} A) g_{t+1} (+ dL/dh_T at the last step)
                torch.mul(C[:, t].unsqueeze(-1), dy, out=g)
                if t < T - 1:
                    g.addcmul_(D[t + 1 - t0] if t + 1 < t1 else decay_next, g_next)
                elif grad_hT is not None:
                    g.add_(grad_hT)
                grad_C[:, t] = torch.mul(H[t - t0], dy, out=work).sum(-1)  # sum_e dy h_t
                grad_x[:, t] = torch.bmm(B[:, t].unsqueeze(1), g, out=row).squeeze(1)  # sum_n B g
                grad_B[:, t] = torch.mul(g, x[:, t].unsqueeze(1), out=work).sum(-1)  # sum_e x g
                # dL/d(Δ_t A) = g_t h_{t-1} exp(Δ_t A): to Δ_t through A, to A through Δ_t
                torch.mul(g, H[t - t0 - 1] if t > t0 else checkpoints[c], out=work).mul_(D[t - t0])
                grad_A_per_row.addcmul_(work, delta[:, t].unsqueeze(1))
                grad_delta[:, t] = work.mul_(A_t).sum(1)
                g, g_next = g_next, g
            decay_next.copy_(D[0])  # exp(Δ_{t0} A), which the chunk before needs and will overwrite
        grad_h0 = (g_next * decay_next).transpose(1, 2) if ctx.has_h0 else None  # g_0 exp(Δ_0 A)
        return grad_x, grad_delta, grad_A_per_row.sum(0).t(), grad_B, grad_C, grad_h0


class SelectiveSSM(nn.Module):
    def __init__(self, d_model: int, d_state: int = 16, expand: int = 2, d_conv: int = 4,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 0.1,
                 selective: bool = True, scan: str | None = None, cpu_time_chunk: int | None = 256,
                 scan_chunk: int | None = 256):
        super().__init__()
        # The materialised path (the GPU's, and the time-invariant control's) builds (B, K, E, N)
        # coefficients for K = scan_chunk steps at a time (`_materialised_scan`); None: the whole window
        self.scan_chunk = scan_chunk
        # On a CPU a long sequence runs in pieces of this many steps carrying the state, as
        # `seqbench.nn.min_rnn` does and for its reason (glibc page-faults every buffer over 32 MiB
        # afresh): at B 16, width 256, T = 2,048 one layer's fwd+bwd ran ~1.7x faster (pieces of 128
        # to 512 measured; 256 keeps (B, piece, 2E) at 16 MiB).
        self.cpu_time_chunk = cpu_time_chunk
        E, N = expand * d_model, d_state
        self.d_inner, self.d_state, self.d_conv, self.selective, self.scan = E, N, d_conv, selective, scan
        self.dt_rank = dt_rank or math.ceil(d_model / 16)  # Mamba's default rank for Δ
        self.in_proj = nn.Linear(d_model, 2 * E, bias=False)
        self.conv = nn.Conv1d(E, E, d_conv, groups=E)  # depthwise; causality comes from the left pad
        # Δ's bias: softplus(bias) log-uniform in [dt_min, dt_max] (Mamba's init), the inverse of
        # softplus written as dt + log(1 - exp(-dt)) = log(exp(dt) - 1)
        dt = torch.exp(torch.rand(E) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        dt_bias = dt + torch.log(-torch.expm1(-dt))
        if selective:
            self.x_proj = nn.Linear(E, self.dt_rank + 2 * N, bias=False)
            self.dt_proj = nn.Linear(self.dt_rank, E)
            nn.init.uniform_(self.dt_proj.weight, -self.dt_rank ** -0.5, self.dt_rank ** -0.5)
            with torch.no_grad():
                self.dt_proj.bias.copy_(dt_bias)
        else:
            self.dt_bias = nn.Parameter(dt_bias)
            self.B = nn.Parameter(torch.ones(E, N))  # S4D's B = 1
            self.C = nn.Parameter(torch.randn(E, N) * N ** -0.5)
        # S4D-real: A_n = -(n + 1) for every channel, stored as log so A stays negative in training
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(E, 1))
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def _coefficients(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """u (..., E) -> a = exp(Δ A), b = Δ B u (..., E, N) and C (..., 1, N) or (E, N)."""
        A = -torch.exp(self.A_log)  # (E, N)
        if self.selective:
            dt, B, C = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
            delta = F.softplus(self.dt_proj(dt))  # (..., E)
            B, C = B.unsqueeze(-2), C.unsqueeze(-2)  # (..., 1, N): one B_t, C_t for every channel
        else:
            delta, B, C = F.softplus(self.dt_bias), self.B, self.C
            delta = delta.expand_as(u)  # (..., E), the same at every step
        a = torch.exp(delta.unsqueeze(-1) * A)  # (..., E, N)
        b = (delta * u).unsqueeze(-1) * B  # (..., E, N)
        return a, b, C

    def _fused_scan(self, u: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        """The selective recurrence by `_SelectiveScan` (the same Δ, B, C as `_coefficients`)."""
        dt, B, C = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))  # (B, T, E)
        inputs = [delta * u, delta, -torch.exp(self.A_log), B, C]
        # one dtype for all: CUDA's bf16 autocast runs softplus in fp32 and x_proj in bf16
        dtype = functools.reduce(torch.promote_types, [t.dtype for t in inputs])
        inputs = [t.to(dtype) for t in inputs]
        y, h_last = _SelectiveScan.apply(*inputs, None if h0 is None else h0.to(dtype))
        return y + self.D * u, h_last

    def _conv(self, u: Tensor, conv_state: Tensor | None) -> tuple[Tensor, Tensor]:
        """-> (SiLU(causal conv of u) (B, T, E), new conv_state), by `causal_conv`."""
        u, conv_state = causal_conv(self.conv, u, conv_state)
        return F.silu(u), conv_state

    def forward(self, x: Tensor, state: SSMState | None = None) -> tuple[Tensor, SSMState]:
        """x (B, T, D) -> (out (B, T, D), state after the last step); `state` from a previous chunk."""
        return in_time_pieces(self._forward, x, state, self.cpu_time_chunk)

    def _forward(self, x: Tensor, state: SSMState | None) -> tuple[Tensor, SSMState]:
        u, z = self.in_proj(x).chunk(2, dim=-1)  # (B, T, E) each
        u, conv_state = self._conv(u, None if state is None else state[0])
        if self.selective and (self.scan or default_method(x.device)) == "loop":
            y, h_last = self._fused_scan(u, None if state is None else state[1])
            return self.out_proj(y * F.silu(z)), (conv_state, h_last)
        y, h_last = self._materialised_scan(u, None if state is None else state[1])
        y = y + self.D * u  # (B, T, E)
        return self.out_proj(y * F.silu(z)), (conv_state, h_last)

    def _materialised_scan(self, u: Tensor, h: Tensor | None) -> tuple[Tensor, Tensor]:
        """y_t = C_t · h_t (B, T, E) and h_T by `linear_scan` over the (B, K, E, N) coefficients of
        `scan_chunk` = K steps at a time, the state carried from piece to piece. With more than one
        piece each runs under activation checkpointing: the forward keeps only a piece's input and the
        state entering it, and the backward recomputes one piece's coefficients and states at a time, so
        nothing of size (B, T, E, N) is ever held (35 GiB at T = 8,192, B 16, width 256 in float32)."""
        T = u.shape[1]
        K = self.scan_chunk or T
        if T <= K:
            return self._scan_piece(u, h)
        ys = []
        for start in range(0, T, K):
            if torch.is_grad_enabled():
                y, h = checkpoint(self._scan_piece, u[:, start:start + K], h, use_reentrant=False)
            else:
                y, h = self._scan_piece(u[:, start:start + K], h)
            ys.append(y)
        return torch.cat(ys, dim=1), h

    def _scan_piece(self, u: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        """One piece of `_materialised_scan`: u (B, K, E), h0 (B, E, N) or None -> (y (B, K, E), h_K)."""
        a, b, C = self._coefficients(u)  # (B, K, E, N)
        B_, K, E, N = b.shape
        h0 = None if h0 is None else h0.reshape(B_, E * N)
        h = linear_scan(a.reshape(B_, K, E * N), b.reshape(B_, K, E * N), h0, self.scan).view(B_, K, E, N)
        return (h * C).sum(-1), h[:, -1]

    def step(self, x_t: Tensor, state: SSMState | None = None) -> tuple[Tensor, SSMState]:
        """One token: x_t (B, D) -> (out_t (B, D), new state), the recurrence the kernel fuses."""
        u, z = self.in_proj(x_t).chunk(2, dim=-1)  # (B, E)
        if state is None:
            conv_state = u.new_zeros(u.shape[0], self.d_inner, self.d_conv - 1)
            h = None
        else:
            conv_state, h = state
        window = torch.cat([conv_state, u.unsqueeze(-1)], dim=-1)  # (B, E, kernel)
        u = F.silu((window * self.conv.weight.squeeze(1)).sum(-1) + self.conv.bias)
        a, b, C = self._coefficients(u)  # (B, E, N)
        h = scan_step(a, b, h)
        y = (h * C).sum(-1) + self.D * u
        return self.out_proj(y * F.silu(z)), (window[..., 1:], h)


class ResidualBlock(nn.Module):
    """Pre-norm residual around a sequence mixer, as Mamba's and minGRU's language models stack them:
    x + mixer(norm(x)). The mixer maps (B, T, D) -> (B, T, D) and returns (output, state) from
    `forward(x, state)` and `step(x_t, state)`; the block passes the state through unchanged.

    Pre-norm keeps the residual stream an identity path from the embedding to the head, so a deep
    stack trains without warm-up (GPT-2 §2.3; Mamba §E.2 uses the same order with RMSNorm)."""

    def __init__(self, d_model: int, mixer: nn.Module):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.mixer = mixer

    def forward(self, x: Tensor, state=None):
        y, state = self.mixer(self.norm(x), state)
        return x + y, state

    def step(self, x_t: Tensor, state=None):
        y, state = self.mixer.step(self.norm(x_t), state)
        return x_t + y, state
