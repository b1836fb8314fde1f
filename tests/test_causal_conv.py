"""The Mamba blocks' causal depthwise conv as shifted multiply-adds (seqbench.nn.causal_conv) against
`F.conv1d` with one group per channel: outputs and every gradient, from zeros and from a carried state."""

from __future__ import annotations

import pytest
import torch

from seqbench.nn import causal_conv


@pytest.mark.parametrize("carried", [False, True])
def test_shifted_conv_is_the_grouped_conv1d_in_float64(carried, monkeypatch):
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(5, 5, 4, groups=5).double()
    u = torch.randn(2, 9, 5, dtype=torch.float64, requires_grad=True)
    state = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True) if carried else None
    weight = torch.randn(2, 9, 5, dtype=torch.float64)
    results = []
    for depthwise in (causal_conv.depthwise, causal_conv.depthwise_reference):
        monkeypatch.setattr(causal_conv, "depthwise", depthwise)
        out, new_state = causal_conv.causal_conv(conv, u, state)
        inputs = [u, *conv.parameters(), *([state] if carried else [])]
        results.append([out, new_state, *torch.autograd.grad((out * weight).sum(), inputs)])
    for got, want in zip(*results):
        assert (got - want).abs().max() <= 1e-12


def test_the_conv_is_causal_and_its_state_is_the_last_inputs():
    """Output t reads inputs t-3..t only (the kernel's taps in order), and the state is the last 3 inputs."""
    conv = torch.nn.Conv1d(1, 1, 4).double()
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([[[1.0, 10.0, 100.0, 1000.0]]]))
        conv.bias.zero_()
    u = torch.arange(1.0, 7.0, dtype=torch.float64).view(1, 6, 1)
    out, state = causal_conv.causal_conv(conv, u, None)
    assert out.view(-1).tolist() == [1000.0, 2100.0, 3210.0, 4321.0, 5432.0, 6543.0]
    assert state.view(-1).tolist() == [4.0, 5.0, 6.0]
