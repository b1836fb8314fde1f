"""The Mamba-2 block and its chunked SSD algorithm (Dao & Gu 2024, "Transformers are SSMs: Generalized
Models and Efficient Algorithms Through Structured State Space Duality", arXiv:2405.21060, §6-§7).

    x (B, T, D) --in_proj--> z (E), x (E), B (G N), C (G N), dt (H)         E = expand D, H = E / P
    x, B, C --causal depthwise conv (kernel 4)--> SiLU
    Δ = softplus(dt + dt_bias) (B, T, H),   A = -exp(A_log) (H): ONE decay per head and step, a_t = exp(Δ_t A)
    h_t = a_t h_{t-1} + (Δ_t x_t) ⊗ B_t      h (H, P, N): a head's P channels share a_t, B_t and C_t
    y_t = h_t C_t + D x_t,   out = out_proj(RMSNorm(y ⊙ SiLU(z)))           (the gated norm, norm after gate)

B and C come in G groups, each shared by H / G heads (grouped B and C, the paper's "multi-value"
attention analogue). Against Mamba-1 (`seqbench.nn.ssm`) the decay is a scalar per head instead of a
(channel, state) matrix, which is what lets the sequence run as matrix products:

    y = M x,   M[t, s] = C_t · B_s · exp(cum_t - cum_s) for s <= t, 0 after   (cum_t = Σ_{r<=t} log a_r)

a masked attention matrix. The chunked algorithm (§6, Listing 1) cuts T into chunks of Q steps:

    1. inside a chunk, the quadratic form: Y_diag = (L ∘ C Bᵀ) X with L[t, s] = exp(cum_t - cum_s)
    2. each chunk's contribution to the state at its end: S_c = Σ_s exp(cum_end - cum_s) X_s ⊗ B_s
    3. the state entering each chunk, by the recurrence h_c = exp(cum_end) h_{c-1} + S_c over chunks
    4. what that entering state gives each step: Y_off[t] = exp(cum_t) C_t h_{c-1}

so the work is O(T Q) in matmuls of chunk size rather than O(T²), and the state is only ever held at
chunk boundaries: (B, T / Q, H, P, N), never per step. Generation and truncated-BPTT state use the step
form `step`, O(1) per token: the conv's last kernel-1 inputs and h (B, H, P, N).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqbench.nn.scan import without_autocast
from seqbench.nn.causal_conv import causal_conv
from seqbench.nn.time_pieces import in_time_pieces

SSDState = tuple[Tensor, Tensor]  # (conv inputs (B, E + 2 G N, kernel - 1), h (B, H, P, N))


class _SSDChunks(torch.autograd.Function):
    """The chunked SSD on whole chunks, with a hand-written backward.

        x (Bsz, nc, Q, H, P), log_a (Bsz, nc, Q, H), B, C (Bsz, nc, Q, G, N), h0 (Bsz, H, P, N) or None
        -> y (Bsz, nc, Q, H, P), h_T (Bsz, H, P, N)

    Autograd through the four steps (module docstring) allocates a zero gradient for every masked and
    expanded tensor and copies every transposed one; on a CPU those passes cost as much as the matmuls.
    Here each product is a matmul in the layout it comes in: the inter-chunk ones (states, their
    read-out) with a group's heads side by side, (Q, hg P) x (Q, N); only the intra-chunk one goes head by
    head. The backward uses, per head h of a chunk (L, M = L ∘ S with S = C Bᵀ, X, Y as in the forward):

        dM = dY Xᵀ,   dX += Mᵀ dY,   dS = Σ_h dM ∘ L,   d(cum_t - cum_s) = dM ∘ M
        dC += dS B,   dB += dSᵀ C,   and the chain rule through exp(cum) for the decays; cum = cumsum(log a)
        so d log a is the reversed cumulative sum of d cum.
    """

    @staticmethod
    @without_autocast
    def forward(ctx, x, log_a, B, C, h0):
        Bsz, nc, Q, H, P = x.shape
        G, N = B.shape[-2:]
        hg = H // G
        cum = log_a.cumsum(2)  # (Bsz, nc, Q, H)
        cum_h = cum.transpose(2, 3).contiguous()  # (Bsz, nc, H, Q)
        # 1. intra-chunk: L[t, s] = exp(cum_t - cum_s) for s <= t, else 0
        L = cum_h.unsqueeze(-1) - cum_h.unsqueeze(-2)  # (Bsz, nc, H, Q, Q)
        L.masked_fill_(~torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril(), -math.inf).exp_()
        B_g, C_g = B.transpose(2, 3).contiguous(), C.transpose(2, 3).contiguous()  # (Bsz, nc, G, Q, N)
        S = C_g @ B_g.transpose(-1, -2)  # (Bsz, nc, G, Q, Q)
        M = L.view(Bsz, nc, G, hg, Q, Q) * S.unsqueeze(3)  # (Bsz, nc, G, hg, Q, Q)
        x_h = x.transpose(2, 3).contiguous()  # (Bsz, nc, H, Q, P)
        y_diag = M.view(Bsz, nc, H, Q, Q) @ x_h  # (Bsz, nc, H, Q, P)
        # 2. each chunk's states: (w ∘ X)ᵀ B, w_s = exp(cum_end - cum_s); a group's heads in one matmul
        w = torch.exp(cum[:, :, -1:] - cum)  # (Bsz, nc, Q, H)
        x_w = (x * w.unsqueeze(-1)).view(Bsz, nc, Q, G, hg * P).transpose(2, 3)  # (Bsz, nc, G, Q, hg P)
        states = x_w.transpose(-1, -2) @ B_g  # (Bsz, nc, G, hg P, N)
        # 3. the recurrence over chunks: h_c = exp(cum_end) h_{c-1} + states_c; `entering[c]` = h_{c-1}
        e = torch.exp(cum)  # (Bsz, nc, Q, H)
        chunk_decay = e[:, :, -1].contiguous()  # (Bsz, nc, H)
        entering = x.new_empty(Bsz, nc, H, P, N)
        h = x.new_zeros(Bsz, H, P, N) if h0 is None else h0
        states = states.view(Bsz, nc, H, P, N)
        for c in range(nc):
            entering[:, c] = h
            h = torch.addcmul(states[:, c], chunk_decay[:, c].view(Bsz, H, 1, 1), h)
        # 4. what the entering state gives each step: exp(cum_t) C_t h_{c-1}
        y_off = (C_g @ entering.view(Bsz, nc, G, hg * P, N).transpose(-1, -2))  # (Bsz, nc, G, Q, hg P)
        y_off = y_off.transpose(2, 3).reshape(Bsz, nc, Q, H, P) * e.unsqueeze(-1)  # (Bsz, nc, Q, H, P)
        y = y_off + y_diag.transpose(2, 3)  # (Bsz, nc, Q, H, P)
        ctx.has_h0 = h0 is not None
        ctx.save_for_backward(x, x_h, w, e, L, S, B_g, C_g, entering, chunk_decay, y_off)
        return y, h

    @staticmethod
    @torch.autograd.function.once_differentiable
    @without_autocast
    def backward(ctx, dy, dh_T):
        x, x_h, w, e, L, S, B_g, C_g, entering, chunk_decay, y_off = ctx.saved_tensors
        Bsz, nc, Q, H, P = x.shape
        G, N = B_g.shape[2], B_g.shape[-1]
        hg = H // G
        dy = dy.contiguous()
        # 1. intra-chunk
        dy_h = dy.transpose(2, 3).contiguous()  # (Bsz, nc, H, Q, P)
        M = (L.view(Bsz, nc, G, hg, Q, Q) * S.unsqueeze(3)).view(Bsz, nc, H, Q, Q)
        dM = dy_h @ x_h.transpose(-1, -2)  # (Bsz, nc, H, Q, Q)
        dx_h = M.transpose(-1, -2) @ dy_h  # (Bsz, nc, H, Q, P)
        dS = (dM * L).view(Bsz, nc, G, hg, Q, Q).sum(3)  # (Bsz, nc, G, Q, Q)
        dseg = dM.mul_(M)  # d(cum_t - cum_s), zero above the diagonal
        dcum = (dseg.sum(-1) - dseg.sum(-2)).transpose(2, 3)  # (Bsz, nc, Q, H)
        dC_g = dS @ B_g  # (Bsz, nc, G, Q, N)
        dB_g = dS.transpose(-1, -2) @ C_g
        # 4. the read-out of the entering state: y_off = e ∘ (C hᵀ)
        dcum = dcum + (dy * y_off).sum(-1)  # d e ∘ e
        dg = (dy * e.unsqueeze(-1)).view(Bsz, nc, Q, G, hg * P).transpose(2, 3)  # (Bsz, nc, G, Q, hg P)
        entering_g = entering.view(Bsz, nc, G, hg * P, N)
        dC_g += dg @ entering_g
        d_entering = (dg.transpose(-1, -2) @ C_g).view(Bsz, nc, H, P, N)
        # 3. the recurrence over chunks, backwards: g = dL/d(state at the end of chunk c)
        g = dy.new_zeros(Bsz, H, P, N) if dh_T is None else dh_T.clone()
        d_states = dy.new_empty(Bsz, nc, H, P, N)
        d_decay = dy.new_empty(Bsz, nc, H)
        for c in range(nc - 1, -1, -1):
            d_states[:, c] = g
            d_decay[:, c] = (g * entering[:, c]).sum((-1, -2))
            g = torch.addcmul(d_entering[:, c], chunk_decay[:, c].view(Bsz, H, 1, 1), g)
        dcum[:, :, -1] += d_decay * chunk_decay
        # 2. the states: (w ∘ X)ᵀ B
        d_states_g = d_states.view(Bsz, nc, G, hg * P, N)
        dx_w = (B_g @ d_states_g.transpose(-1, -2)).transpose(2, 3).reshape(Bsz, nc, Q, H, P)
        x_w = (x * w.unsqueeze(-1)).view(Bsz, nc, Q, G, hg * P).transpose(2, 3)  # (Bsz, nc, G, Q, hg P)
        dB_g += x_w @ d_states_g
        dw_w = (dx_w * x).sum(-1).mul_(w)  # dw ∘ w: w_s = exp(cum_end - cum_s)
        dcum -= dw_w
        dcum[:, :, -1] += dw_w.sum(2)
        dx = dx_w.mul_(w.unsqueeze(-1)).add_(dx_h.transpose(2, 3))
        d_log_a = dcum.flip(2).cumsum(2).flip(2)  # cum = cumsum(log a)
        return dx, d_log_a, dB_g.transpose(2, 3), dC_g.transpose(2, 3), g if ctx.has_h0 else None


def ssd_chunked(x: Tensor, log_a: Tensor, B: Tensor, C: Tensor, chunk: int,
                h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The SSD recurrence h_t = exp(log_a_t) h_{t-1} + x_t ⊗ B_t, y_t = h_t C_t, by chunks of `chunk` steps.

        x (Bsz, T, H, P), log_a (Bsz, T, H) (<= 0), B, C (Bsz, T, G, N), h0 (Bsz, H, P, N) or None
        -> y (Bsz, T, H, P), h_T (Bsz, H, P, N)

    A T that `chunk` does not divide is padded at the end with steps that change nothing (x = 0, B = 0,
    log a = 0: decay 1), whose outputs are dropped; a T shorter than `chunk` is one chunk of T steps."""
    Bsz, T, H, P = x.shape
    G, N = B.shape[-2:]
    Q = min(chunk, T)
    pad = -T % Q
    if pad:
        x, log_a, B, C = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, log_a, B, C))
    nc = (T + pad) // Q
    inputs = [x.reshape(Bsz, nc, Q, H, P), log_a.reshape(Bsz, nc, Q, H), B.reshape(Bsz, nc, Q, G, N),
              C.reshape(Bsz, nc, Q, G, N)] + ([] if h0 is None else [h0])
    # one dtype for all: under CUDA's bf16 autocast the projections come out in bf16, softplus in fp32
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in inputs])
    inputs = [t.to(dtype).contiguous() for t in inputs]
    y, h = _SSDChunks.apply(*inputs[:4], inputs[4] if h0 is not None else None)
    return y.view(Bsz, nc * Q, H, P)[:, :T], h


class SSD(nn.Module):
    """The Mamba-2 mixer: (B, T, d_model) -> (B, T, d_model), with `forward(x, state)` (chunked, for
    training and reading a prompt) and `step(x_t, state)` (one token); both return (output, state).

    Defaults are Mamba-2's (mamba_ssm's `Mamba2`): head dimension 64, one group, kernel 4, Δ's bias
    log-uniform in [1e-3, 0.1], A_h uniform in [1, 16], D = 1 per head, the gated RMSNorm over the whole
    inner width. d_state is 64 (the paper's language models use 64-128; Mamba-1's 16 is where Mamba-2's
    state-size ablation starts). `chunk` = 64: on one CPU thread 32 and 64 ran within the noise of each
    other at B 16, width 256, T = 2,048, and 128 about 10 % slower; the intra-chunk work grows with it."""

    def __init__(self, d_model: int, d_state: int = 64, expand: int = 2, d_conv: int = 4, headdim: int = 64,
                 ngroups: int = 1, chunk: int = 64, dt_min: float = 1e-3, dt_max: float = 0.1,
                 dt_floor: float = 1e-4, a_range: tuple[float, float] = (1.0, 16.0), scan: str | None = None,
                 cpu_time_chunk: int | None = 512):
        super().__init__()
        # On a CPU a long sequence runs in pieces of this many steps carrying the state, as the Mamba-1
        # block and minGRU do and for their reason (glibc page-faults every buffer over 32 MiB afresh):
        # at B 16, width 256, T = 2,048, one thread, pieces of 512 ran ~1.05x pieces of 256 and ~1.15x
        # pieces of 128 (two runs each, on a loaded VM), and the whole window at once about half as fast
        self.cpu_time_chunk = cpu_time_chunk
        E = expand * d_model
        if E % headdim:
            raise ValueError(f"the inner width expand * d_model = {E} is not a multiple of headdim = {headdim}")
        H = E // headdim
        if H % ngroups:
            raise ValueError(f"{H} heads do not split into ngroups = {ngroups} groups")
        self.d_inner, self.d_state, self.d_conv, self.headdim, self.nheads = E, d_state, d_conv, headdim, H
        self.ngroups, self.chunk, self.scan = ngroups, chunk, scan
        self.conv_dim = E + 2 * ngroups * d_state  # x, B and C go through the conv
        self.in_proj = nn.Linear(d_model, E + self.conv_dim + H, bias=False)  # z, (x, B, C), dt
        self.conv = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim)  # depthwise
        # Δ's bias: softplus(bias) log-uniform in [dt_min, dt_max], at least dt_floor (Mamba-2's init)
        dt = torch.exp(torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=dt_floor)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        self.A_log = nn.Parameter(torch.empty(H).uniform_(*a_range).log())  # A = -exp(A_log) < 0
        self.D = nn.Parameter(torch.ones(H))
        self.norm_weight = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def _split(self, zxbcdt: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return zxbcdt.split([self.d_inner, self.conv_dim, self.nheads], dim=-1)  # z, xBC, dt

    def _gated_out(self, y: Tensor, z: Tensor) -> Tensor:
        """out_proj(RMSNorm(y ⊙ SiLU(z))): Mamba-2's norm after the gate, over the whole inner width."""
        return self.out_proj(F.rms_norm(y * F.silu(z), (self.d_inner,), self.norm_weight, eps=1e-5))

    def forward(self, x: Tensor, state: SSDState | None = None) -> tuple[Tensor, SSDState]:
        """x (B, T, D) -> (out (B, T, D), state after the last step); `state` from a previous window."""
        return in_time_pieces(self._forward, x, state, self.cpu_time_chunk)

    def _forward(self, x: Tensor, state: SSDState | None) -> tuple[Tensor, SSDState]:
        Bsz, T, _ = x.shape
        H, P, G, N = self.nheads, self.headdim, self.ngroups, self.d_state
        z, xBC, dt = self._split(self.in_proj(x))
        xBC, conv_state = causal_conv(self.conv, xBC, None if state is None else state[0])
        u, B, C = F.silu(xBC).split([self.d_inner, G * N, G * N], dim=-1)
        u = u.view(Bsz, T, H, P)
        delta = F.softplus(dt + self.dt_bias)  # (B, T, H)
        A = -torch.exp(self.A_log)  # (H,)
        y, h = self.ssd(u * delta.unsqueeze(-1), delta * A, B.view(Bsz, T, G, N), C.view(Bsz, T, G, N),
                        None if state is None else state[1])
        y = y + self.D.unsqueeze(-1) * u  # (B, T, H, P)
        return self._gated_out(y.reshape(Bsz, T, self.d_inner), z), (conv_state, h)

    def ssd(self, x: Tensor, log_a: Tensor, B: Tensor, C: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        """The SSD itself, `ssd_chunked` (a benchmark swaps in another implementation of the same map)."""
        return ssd_chunked(x, log_a, B, C, self.chunk, h0)

    def step(self, x_t: Tensor, state: SSDState | None = None) -> tuple[Tensor, SSDState]:
        """One token: x_t (B, D) -> (out_t (B, D), new state), the recurrence the chunks compute."""
        Bsz = x_t.shape[0]
        H, P, G, N = self.nheads, self.headdim, self.ngroups, self.d_state
        z, xBC, dt = self._split(self.in_proj(x_t))
        if state is None:
            conv_state = xBC.new_zeros(Bsz, self.conv_dim, self.d_conv - 1)
            h = xBC.new_zeros(Bsz, H, P, N)
        else:
            conv_state, h = state
        window = torch.cat([conv_state, xBC.unsqueeze(-1)], dim=-1)  # (B, conv_dim, kernel)
        xBC = F.silu((window * self.conv.weight.squeeze(1)).sum(-1) + self.conv.bias)
        u, B, C = xBC.split([self.d_inner, G * N, G * N], dim=-1)
        u = u.view(Bsz, H, P)
        B = B.view(Bsz, G, 1, N).expand(Bsz, G, H // G, N).reshape(Bsz, H, 1, N)  # each head its group's B_t
        C = C.view(Bsz, G, 1, N).expand(Bsz, G, H // G, N).reshape(Bsz, H, N, 1)
        delta = F.softplus(dt + self.dt_bias)  # (B, H)
        a = torch.exp(delta * -torch.exp(self.A_log))  # (B, H)
        h = a.view(Bsz, H, 1, 1) * h + (delta.unsqueeze(-1) * u).unsqueeze(-1) * B  # (B, H, P, N)
        y = (h @ C).squeeze(-1) + self.D.unsqueeze(-1) * u  # (B, H, P)
        return self._gated_out(y.reshape(Bsz, self.d_inner), z), (window[..., 1:], h)
