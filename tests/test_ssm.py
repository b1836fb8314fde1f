"""The selective SSM block: the Mamba paper's recurrence written out, parallel against step form, carried
state, causality, the control."""

from __future__ import annotations

import pytest
import torch

from seqbench.nn.ssm import ResidualBlock, SelectiveSSM

F = torch.nn.functional


def paper_block(ssm, x):
    """Gu & Dao (2023), Algorithm 2 and Fig. 3, written from the paper per step with the block's weights only
    (none of its code): in_proj to u, z; a causal depthwise conv of width k and SiLU; Δ_t = softplus(W_Δ u_t + b),
    B_t, C_t from u_t (selective) or fixed (the control); h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t,
    y_t = C_t h_t + D u_t; out = out_proj(y_t SiLU(z_t)). x (B, T, D) -> (B, T, D)."""
    E, N, k = ssm.d_inner, ssm.d_state, ssm.d_conv
    u, z = (x @ ssm.in_proj.weight.T).split([E, E], dim=-1)  # (B, T, E) each
    w, bias = ssm.conv.weight[:, 0, :], ssm.conv.bias  # (E, k): w[:, -1] multiplies the present step
    A = -torch.exp(ssm.A_log)  # (E, N)
    h = x.new_zeros(x.shape[0], E, N)
    outs = []
    for t in range(x.shape[1]):
        conv = bias + sum(w[:, j] * u[:, t - (k - 1) + j] for j in range(k) if t - (k - 1) + j >= 0)
        u_t = F.silu(conv)  # (B, E)
        if ssm.selective:
            low_rank, B_t, C_t = (u_t @ ssm.x_proj.weight.T).split([ssm.dt_rank, N, N], dim=-1)  # (B, r), (B, N) x2
            delta = F.softplus(low_rank @ ssm.dt_proj.weight.T + ssm.dt_proj.bias)  # (B, E)
            B_t, C_t = B_t[:, None, :], C_t[:, None, :]  # (B, 1, N): one B_t, C_t shared by the channels
        else:
            delta = F.softplus(ssm.dt_bias).expand_as(u_t)
            B_t, C_t = ssm.B, ssm.C  # (E, N)
        h = torch.exp(delta[..., None] * A) * h + delta[..., None] * B_t * u_t[..., None]  # (B, E, N)
        y_t = (C_t * h).sum(-1) + ssm.D * u_t  # (B, E)
        outs.append((y_t * F.silu(z[:, t])) @ ssm.out_proj.weight.T)
    return torch.stack(outs, dim=1)


@pytest.mark.parametrize("selective", [True, False])
@pytest.mark.parametrize("form", ["loop", "doubling", "step"])
def test_the_block_is_the_mamba_papers_recurrence_in_float64(selective, form):
    """Every form (the CPU's fused loop, the doubling scan, generation's step) against `paper_block`: outputs
    and every gradient to 1e-10. The forms share their coefficient code, so their agreement with each other
    (the tests below) cannot catch an error in it; this can (Δ dropped from the input term, say)."""
    torch.manual_seed(0)
    ssm = SelectiveSSM(6, d_state=4, selective=selective, scan="doubling" if form == "step" else form).double()
    with torch.no_grad():  # D = 1 and a zero conv bias at init would hide a term that reads them wrongly
        ssm.D.uniform_(0.5, 1.5)
        ssm.conv.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 40, 6, dtype=torch.float64, requires_grad=True)
    y = stepped(ssm, x)[0] if form == "step" else ssm(x)[0]
    ref = paper_block(ssm, x)
    error = (y - ref).abs().max().item()
    assert error <= 1e-10, f"the {form} form is {error:.3g} from the paper's recurrence"
    weight = torch.randn_like(y)
    names = ["x", *(name for name, _ in ssm.named_parameters())]
    params = [x, *ssm.parameters()]
    grads = zip(names, torch.autograd.grad((y * weight).sum(), params), torch.autograd.grad((ref * weight).sum(), params))
    for name, got, want in grads:
        assert (got - want).abs().max() <= 1e-10, f"the {form} form's gradient of {name}"


def stepped(module, x, state=None):
    outs = []
    for x_t in x.unbind(1):
        y_t, state = module.step(x_t, state)
        outs.append(y_t)
    return torch.stack(outs, dim=1), state


@pytest.mark.parametrize("selective", [True, False])
@pytest.mark.parametrize("scan", ["loop", "doubling"])
def test_parallel_form_equals_step_form_in_float64(selective, scan):
    torch.manual_seed(0)
    block = ResidualBlock(8, SelectiveSSM(8, selective=selective, scan=scan)).double()
    x = torch.randn(2, 64, 8, dtype=torch.float64)
    y, (conv, h) = block(x)
    y_steps, (conv_steps, h_steps) = stepped(block, x)
    assert (y - y_steps).abs().max() <= 1e-10
    assert (conv - conv_steps).abs().max() <= 1e-10 and (h - h_steps).abs().max() <= 1e-10


@pytest.mark.parametrize("selective", [True, False])
def test_float32_step_form_follows_the_parallel_form_over_512_steps(selective):
    torch.manual_seed(0)
    block = ResidualBlock(8, SelectiveSSM(8, selective=selective))
    x = torch.randn(2, 512, 8)
    with torch.no_grad():
        assert (block(x)[0] - stepped(block, x)[0]).abs().max() <= 1e-5


def test_state_carried_across_two_chunks_equals_one_pass():
    """Both parts of the state travel: the conv's last inputs and h."""
    torch.manual_seed(0)
    ssm = SelectiveSSM(8).double()
    x = torch.randn(2, 30, 8, dtype=torch.float64)
    whole, (conv, h) = ssm(x)
    first, state = ssm(x[:, :13])
    second, (conv_2, h_2) = ssm(x[:, 13:], state)
    assert (torch.cat([first, second], dim=1) - whole).abs().max() <= 1e-12
    assert (conv_2 - conv).abs().max() <= 1e-12 and (h_2 - h).abs().max() <= 1e-12


@pytest.mark.parametrize("selective", [True, False])
def test_output_at_t_ignores_every_later_input(selective):
    """Causality of the whole block (the conv's padding, the scan): the Jacobian is lower triangular."""
    torch.manual_seed(0)
    ssm = SelectiveSSM(4, selective=selective).double()
    x = torch.randn(1, 12, 4, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda x: ssm(x)[0], x)[0, :, :, 0]  # (T, D, T, D)
    later = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)  # [t, s]: s > t
    assert jac.abs().sum(dim=(1, 3))[later].max() == 0
    assert jac.abs().sum(dim=(1, 3))[~later].min() > 0  # and it does read the past and present


def test_control_is_time_invariant_and_the_selective_model_is_not():
    """selective=False: Δ, B, C (so a = exp(ΔA), b / u and C) are the same for any input."""
    torch.manual_seed(0)
    u1, u2 = torch.randn(2, 5, 16, dtype=torch.float64).unbind(0)
    control = SelectiveSSM(8, selective=False).double()
    a1, b1, C1 = control._coefficients(u1)
    a2, b2, C2 = control._coefficients(u2)
    assert torch.equal(a1, a2) and torch.equal(C1, C2)
    assert torch.allclose(b1 / u1.unsqueeze(-1), b2 / u2.unsqueeze(-1))
    selective = SelectiveSSM(8).double()
    a1, b1, C1 = selective._coefficients(u1)
    a2, b2, C2 = selective._coefficients(u2)
    assert not torch.allclose(a1, a2) and not torch.allclose(C1, C2)


def test_a_is_initialised_s4d_real():
    ssm = SelectiveSSM(4, d_state=16)
    assert torch.allclose(-torch.exp(ssm.A_log), -torch.arange(1.0, 17.0).expand(8, 16))
    dt = torch.nn.functional.softplus(SelectiveSSM(64).dt_proj.bias)
    assert dt.min() >= 1e-3 and dt.max() <= 0.1  # Mamba's Δ range at init


@pytest.mark.parametrize("carried", [True, False])
def test_fused_cpu_scan_has_the_materialised_scans_gradients(carried):
    """The selective SSM's hand-written `_SelectiveScan` (scan="loop") against autograd through the
    materialised (B, T, E, N) coefficients and the doubling scan: outputs, final state, every
    gradient; 75 steps span its recomputed chunks of 32 and a partial one."""
    torch.manual_seed(0)
    fused = SelectiveSSM(6, scan="loop").double()
    materialised = SelectiveSSM(6, scan="doubling").double()
    materialised.load_state_dict(fused.state_dict())
    x = torch.randn(2, 80, 6, dtype=torch.float64, requires_grad=True)
    state = None
    if carried:  # so dL/dh0 and dL/d(conv state) are checked too
        state = tuple(s.detach().requires_grad_() for s in fused(x[:, :5])[1])
    results = []
    for ssm in (fused, materialised):
        y, (_, h) = ssm(x[:, 5:], state)
        loss = (y * torch.linspace(-1, 1, y.numel(), dtype=torch.float64).view_as(y)).sum() + h.sum()
        results.append([y, h, *torch.autograd.grad(loss, [x, *(state or ()), *ssm.parameters()])])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-10


@pytest.mark.parametrize("selective", [True, False])
def test_cpu_pieces_change_nothing(selective):
    """A sequence run in CPU pieces of 7 steps gives the one-pass outputs, state and gradients."""
    torch.manual_seed(0)
    whole = SelectiveSSM(4, selective=selective, cpu_time_chunk=None).double()
    pieces = SelectiveSSM(4, selective=selective, cpu_time_chunk=7).double()
    pieces.load_state_dict(whole.state_dict())
    x = torch.randn(2, 30, 4, dtype=torch.float64, requires_grad=True)
    results = []
    for ssm in (whole, pieces):
        y, (conv, h) = ssm(x)
        loss = (y * torch.cos(y)).sum() + h.sum()
        results.append([y, conv, h, *torch.autograd.grad(loss, [x, *ssm.parameters()])])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-12


def test_fused_scan_takes_the_mixed_dtypes_of_cuda_bf16_autocast():
    """Under CUDA's bf16 autocast x_proj gives bf16 B, C while softplus gives an fp32 Δ; emulated
    here on the CPU, the fused scan must still run forward and backward (bmm refuses mixed dtypes)."""
    torch.manual_seed(0)
    ssm = SelectiveSSM(8, scan="loop")
    x_proj, dt_proj = ssm.x_proj.forward, ssm.dt_proj.forward
    ssm.x_proj.forward = lambda u: x_proj(u).bfloat16()
    ssm.dt_proj.forward = lambda dt: dt_proj(dt.float())
    x = torch.randn(2, 10, 8, requires_grad=True)
    y, _ = ssm(x)
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


@pytest.mark.parametrize("selective", [True, False])
def test_materialised_scan_in_checkpointed_pieces_changes_nothing(selective):
    """The GPU's path (doubling, the (B, K, E, N) coefficients) in pieces of 7 steps against one piece:
    outputs, state and every gradient, from a carried state (issue 69's chunked scan)."""
    torch.manual_seed(0)
    whole = SelectiveSSM(4, selective=selective, scan="doubling", cpu_time_chunk=None, scan_chunk=None).double()
    pieces = SelectiveSSM(4, selective=selective, scan="doubling", cpu_time_chunk=None, scan_chunk=7).double()
    pieces.load_state_dict(whole.state_dict())
    x = torch.randn(2, 30, 4, dtype=torch.float64, requires_grad=True)
    state = tuple(s.detach().requires_grad_() for s in whole(torch.randn(2, 3, 4, dtype=torch.float64))[1])
    results = []
    for ssm in (whole, pieces):
        y, (conv, h) = ssm(x, state)
        loss = (y * torch.cos(y)).sum() + h.sum()
        results.append([y, conv, h, *torch.autograd.grad(loss, [x, *state, *ssm.parameters()])])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-12


def test_the_materialised_scan_keeps_nothing_the_size_of_the_whole_windows_coefficients():
    """What the forward saves for the backward (every tensor autograd keeps) adds up to under half of one
    (B, T, E, N) tensor: the layer's (B, T, E) activations, while the pieces' coefficients and states are
    recomputed, not kept (kept, they are several times that tensor)."""
    torch.manual_seed(0)
    ssm = SelectiveSSM(8, d_state=32, scan="doubling", cpu_time_chunk=None, scan_chunk=16)
    x = torch.randn(2, 256, 8, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        y, _ = ssm(x)
    Bsz, T, E, N = 2, 256, ssm.d_inner, ssm.d_state
    assert sum(saved) < Bsz * T * E * N / 2
    y.sum().backward()  # and the recomputation gives the gradients (the piece test checks their values)
    assert x.grad.abs().sum() > 0
