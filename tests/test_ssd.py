"""Mamba-2's SSD block (seqbench.nn.ssd): the chunked form against the step recurrence and against the
paper's equations written out here, the state carried across windows of a stream, and the CPU pieces.
(The family as a language model: test_parallel_recurrent.py; FLOPs: test_flops.py; resume: test_resume.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqbench.nn.ssd import SSD, ssd_chunked
from seqbench.nn.ssm import ResidualBlock


def stepped(module, x, state=None):
    """The step form over a whole sequence: x (B, T, D) -> (outputs (B, T, D), state)."""
    outs = []
    for x_t in x.unbind(1):
        y_t, state = module.step(x_t, state)
        outs.append(y_t)
    return torch.stack(outs, dim=1), state


def small_ssd(chunk: int, ngroups: int = 1, **options) -> SSD:
    """4 heads of 4 channels, a state of 6, float64; `cpu_time_chunk=None` so the chunks are the ones asked for."""
    torch.manual_seed(0)
    return SSD(8, d_state=6, headdim=4, chunk=chunk, ngroups=ngroups, cpu_time_chunk=None, **options).double()


def paper_block(ssd: SSD, x: torch.Tensor) -> torch.Tensor:
    """Mamba-2's block from the paper's equations (Dao & Gu 2024, §7.1 and Eq. (16)), without chunks or a
    recurrence: the SSM as its T x T matrix, M[t, s] = C_t · B_s · Π_{s < r <= t} a_r, one per head, with
    the products of the decays taken directly (not as differences of cumulative sums, as the chunked code
    does), and the causal conv as an explicit sum over its taps. x (B, T, D) float64, zero initial state."""
    Bsz, T, _ = x.shape
    E, N, P, H, G = ssd.d_inner, ssd.d_state, ssd.headdim, ssd.nheads, ssd.ngroups
    z, xBC, dt = ssd.in_proj(x).split([E, E + 2 * G * N, H], dim=-1)
    w, k = ssd.conv.weight[:, 0], ssd.d_conv  # (channels, k): tap j reads the input k - 1 - j steps back
    conv = torch.stack([sum(w[:, j] * xBC[:, t - (k - 1) + j] for j in range(k) if t - (k - 1) + j >= 0)
                        + ssd.conv.bias for t in range(T)], dim=1)
    u, Bm, Cm = F.silu(conv).split([E, G * N, G * N], dim=-1)
    delta = F.softplus(dt + ssd.dt_bias)  # (B, T, H)
    a = torch.exp(delta * -torch.exp(ssd.A_log))  # (B, T, H): the scalar decay of each head and step
    y = torch.zeros(Bsz, T, H, P, dtype=x.dtype)
    for h in range(H):
        g = h // (H // G)  # the group whose B and C this head reads
        B_h, C_h = Bm[..., g * N:(g + 1) * N], Cm[..., g * N:(g + 1) * N]  # (B, T, N)
        x_h = u[..., h * P:(h + 1) * P] * delta[..., h:h + 1]  # (B, T, P): Δ_s x_s
        M = torch.zeros(Bsz, T, T, dtype=x.dtype)
        for t in range(T):
            for s in range(t + 1):
                M[:, t, s] = (C_h[:, t] * B_h[:, s]).sum(-1) * torch.prod(a[:, s + 1:t + 1, h], dim=1)
        y[:, :, h] = M @ x_h + ssd.D[h] * u[..., h * P:(h + 1) * P]
    gated = y.reshape(Bsz, T, E) * F.silu(z)
    normed = gated / torch.sqrt(gated.pow(2).mean(-1, keepdim=True) + 1e-5) * ssd.norm_weight
    return ssd.out_proj(normed)


@pytest.mark.parametrize("chunk, ngroups", [(8, 1), (7, 2), (64, 1)])
def test_chunked_block_is_the_papers_matrix_form(chunk, ngroups):
    """T = 30: chunks of 8 (a last partial one), 7 with two groups of B and C, and one chunk of 30."""
    ssd = small_ssd(chunk, ngroups)
    x = torch.randn(2, 30, 8, dtype=torch.float64)
    with torch.no_grad():
        assert (ssd(x)[0] - paper_block(ssd, x)).abs().max() <= 1e-10


@pytest.mark.parametrize("T, chunk", [(1024, 64), (1000, 64), (300, 37), (40, 64)])
def test_chunked_form_equals_the_step_recurrence_in_float64(T, chunk):
    """Outputs, both parts of the final state and every gradient (input, initial state, weights) within
    1e-10, for chunks that divide T, that do not (a last partial chunk) and one longer than T."""
    ssd = small_ssd(chunk)
    x = torch.randn(2, T, 8, dtype=torch.float64, requires_grad=True)
    state = tuple(s.detach().requires_grad_() for s in ssd(torch.randn(2, 5, 8, dtype=torch.float64))[1])
    weight = torch.randn(2, T, 8, dtype=torch.float64)
    results = []
    for run in (ssd, lambda x, s: stepped(ssd, x, s)):
        y, (conv, h) = run(x, state)
        loss = (y * weight).sum() + (h * h).sum() + conv.sum()
        results.append([y, conv, h, *torch.autograd.grad(loss, [x, *state, *ssd.parameters()])])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-10


def test_float32_step_form_follows_the_chunked_form_over_512_steps():
    torch.manual_seed(0)
    block = ResidualBlock(16, SSD(16, headdim=8, cpu_time_chunk=None))
    x = torch.randn(2, 512, 16)
    with torch.no_grad():
        assert (block(x)[0] - stepped(block, x)[0]).abs().max() <= 1e-5


def test_state_carried_across_windows_equals_one_pass():
    """A stream read in three windows that cut chunks anywhere: the same outputs, conv state, h and
    gradients as one pass over it."""
    ssd = small_ssd(8)
    x = torch.randn(2, 45, 8, dtype=torch.float64, requires_grad=True)
    whole, (conv, h) = ssd(x)
    state, pieces = None, []
    for start, end in ((0, 13), (13, 14), (14, 45)):
        out, state = ssd(x[:, start:end], state)
        pieces.append(out)
    assert (torch.cat(pieces, dim=1) - whole).abs().max() <= 1e-12
    assert (state[0] - conv).abs().max() <= 1e-12 and (state[1] - h).abs().max() <= 1e-12
    weight = torch.randn_like(whole)
    grads = torch.autograd.grad((whole * weight).sum(), [x, *ssd.parameters()])
    grads_pieces = torch.autograd.grad((torch.cat(pieces, dim=1) * weight).sum(), [x, *ssd.parameters()])
    for got, want in zip(grads_pieces, grads):
        assert (got - want).abs().max() <= 1e-10


def test_cpu_pieces_change_nothing():
    """A long sequence run in CPU pieces of 7 steps: the one-pass outputs, state and gradients."""
    whole = small_ssd(8)
    pieces = small_ssd(8)
    pieces.cpu_time_chunk = 7
    x = torch.randn(2, 30, 8, dtype=torch.float64, requires_grad=True)
    results = []
    for ssd in (whole, pieces):
        y, (conv, h) = ssd(x)
        results.append([y, conv, h, *torch.autograd.grad((y * torch.cos(y)).sum() + h.sum(), [x, *ssd.parameters()])])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-12


def test_output_at_t_ignores_every_later_input():
    ssd = small_ssd(4)
    x = torch.randn(1, 12, 8, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda x: ssd(x)[0], x)[0, :, :, 0]  # (T, D, T, D)
    later = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)  # [t, s]: s > t
    assert jac.abs().sum(dim=(1, 3))[later].max() == 0
    assert jac.abs().sum(dim=(1, 3))[~later].min() > 0


def test_each_head_has_one_decay_and_the_init_is_mamba2s():
    """A_h uniform in [1, 16] and Δ's bias in [1e-3, 0.1] after softplus; the decay of a step is one
    number per head (so the SSD's scalar-times-identity A), shared by the head's P channels and N states."""
    ssd = SSD(64, d_state=16, headdim=16)
    A = torch.exp(ssd.A_log)
    assert ssd.A_log.shape == (ssd.nheads,) == (8,) and A.min() >= 1 and A.max() <= 16
    dt = F.softplus(ssd.dt_bias)
    assert dt.min() >= 1e-3 - 1e-9 and dt.max() <= 0.1 + 1e-9


def test_ssd_takes_the_mixed_dtypes_of_cuda_bf16_autocast():
    """Under CUDA's bf16 autocast the projections give bf16 and softplus an fp32 Δ; emulated on the CPU,
    the chunked form (its matmuls refuse mixed dtypes) still runs forward and backward."""
    torch.manual_seed(0)
    x = torch.randn(2, 20, 4, 4, requires_grad=True)
    log_a = (-torch.rand(2, 20, 4)).requires_grad_()
    B, C = (torch.randn(2, 20, 1, 8).bfloat16().requires_grad_() for _ in range(2))
    y, h = ssd_chunked(x.bfloat16(), log_a, B, C, chunk=8)
    (y.float().sum() + h.float().sum()).backward()
    assert all(torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0 for t in (x, log_a, B, C))
