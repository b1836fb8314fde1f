"""minGRU and minLSTM: the paper's equations, parallel form against the step form, carried state."""

from __future__ import annotations

import pytest
import torch

from seqbench.nn.min_rnn import MinGRU, MinLSTM, g
from seqbench.nn.ssm import ResidualBlock

LAYERS = [MinGRU, MinLSTM]
SCANS = ["loop", "doubling", "log"]


def paper_states(layer, x, h):
    """Feng et al. (2024), Algorithms 2 and 4 (sequential mode), written from the paper, per step."""
    states = []
    for x_t in x.unbind(1):
        k = layer.proj(x_t)
        if isinstance(layer, MinGRU):
            k_z, k_h = k.chunk(2, dim=-1)
            z = torch.sigmoid(k_z)
            h = (1 - z) * h + z * g(k_h)
        else:
            k_f, k_i, k_h = k.chunk(3, dim=-1)
            f, i = torch.sigmoid(k_f), torch.sigmoid(k_i)
            h = f / (f + i) * h + i / (f + i) * g(k_h)
        states.append(h)
    return torch.stack(states, dim=1)


def test_g_is_the_papers_positive_activation():
    x = torch.tensor([-30.0, -1.0, 0.0, 2.0])
    torch.testing.assert_close(g(x), torch.tensor([torch.sigmoid(torch.tensor(-30.0)).item(),
                                                   torch.sigmoid(torch.tensor(-1.0)).item(), 0.5, 2.5]))


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("scan", SCANS)
def test_parallel_form_is_the_papers_recurrence_in_float64(cls, scan):
    """Outputs, the final state and every gradient equal the paper's step loop to 1e-10."""
    torch.manual_seed(0)
    layer = cls(5, 6, scan=scan).double()
    x = torch.randn(2, 300, 5, dtype=torch.float64, requires_grad=True)
    h0 = torch.rand(2, 6, dtype=torch.float64) + 0.1  # positive, as every state of these layers is
    h, h_last = layer(x, h0)
    ref = paper_states(layer, x, h0)
    assert (h - ref).abs().max() <= 1e-10 and torch.equal(h_last, h[:, -1])
    weight = torch.randn_like(h)
    params = [x, *layer.parameters()]
    grads = torch.autograd.grad((h * weight).sum(), params)
    ref_grads = torch.autograd.grad((ref * weight).sum(), params)
    for got, want in zip(grads, ref_grads):
        assert (got - want).abs().max() <= 1e-10


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("scan", ["loop", "doubling"])
def test_float32_step_form_follows_the_parallel_form_over_512_steps(cls, scan):
    """Generation (`step`, one token at a time) reproduces training's parallel outputs to 1e-5."""
    torch.manual_seed(0)
    block = ResidualBlock(16, cls(16, 16, scan=scan))
    x = torch.randn(2, 512, 16)
    with torch.no_grad():
        y, _ = block(x)
        state, steps = None, []
        for x_t in x.unbind(1):
            y_t, state = block.step(x_t, state)
            steps.append(y_t)
    assert (torch.stack(steps, dim=1) - y).abs().max() <= 1e-5


@pytest.mark.parametrize("cls", LAYERS)
def test_state_carried_across_two_chunks_equals_one_pass(cls):
    """Truncated BPTT: the second chunk starting from the first's last state continues exactly."""
    torch.manual_seed(0)
    layer = cls(4, 8).double()
    x = torch.randn(3, 40, 4, dtype=torch.float64)
    whole, last = layer(x)
    first, h = layer(x[:, :17])
    second, last_2 = layer(x[:, 17:], h)
    assert (torch.cat([first, second], dim=1) - whole).abs().max() <= 1e-12
    assert (last_2 - last).abs().max() <= 1e-12


@pytest.mark.parametrize("cls", LAYERS)
def test_cpu_pieces_change_nothing(cls):
    """A sequence run in CPU pieces of 7 steps gives the one-pass outputs, state and gradients."""
    torch.manual_seed(0)
    whole, pieces = cls(4, 5, cpu_time_chunk=None).double(), cls(4, 5, cpu_time_chunk=7).double()
    pieces.load_state_dict(whole.state_dict())
    x = torch.randn(2, 30, 4, dtype=torch.float64, requires_grad=True)
    results = []
    for layer in (whole, pieces):
        h, h_last = layer(x)
        results.append([h, h_last, *torch.autograd.grad((h * torch.cos(h)).sum(), [x, *layer.parameters()])])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-12
