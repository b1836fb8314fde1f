"""The textbook cells against PyTorch's fused kernels: same parameters, same outputs and gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from seqbench.nn.cells import GATES, ReferenceRNN, gru_cell, lstm_cell, make_rnn


@pytest.mark.parametrize("mode,nonlinearity", [*((cell, "tanh") for cell in GATES), ("rnn", "relu")])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_reference_matches_fused_outputs_and_gradients(mode, nonlinearity, bidirectional):
    torch.manual_seed(0)
    fused = make_rnn(mode, 5, 7, num_layers=2, bidirectional=bidirectional, nonlinearity=nonlinearity).double()
    ref = make_rnn(mode, 5, 7, num_layers=2, bidirectional=bidirectional, nonlinearity=nonlinearity,
                   impl="reference").double()
    ref.load_state_dict(fused.state_dict())  # identical parameter names and layout
    x = torch.randn(3, 11, 5, dtype=torch.double, requires_grad=True)
    out_f, state_f = fused(x)
    out_r, state_r = ref(x)
    torch.testing.assert_close(out_r, out_f, atol=1e-5, rtol=1e-5)
    for a, b in zip(state_r if mode == "lstm" else [state_r], state_f if mode == "lstm" else [state_f]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    grads = []
    for module in (fused, ref):
        x.grad = None
        module.zero_grad()
        out, _ = module(x)
        out.pow(2).sum().backward()
        grads.append([x.grad.clone()] + [p.grad.clone() for _, p in sorted(module.named_parameters())])
    for gf, gr in zip(*grads):
        torch.testing.assert_close(gr, gf, atol=1e-5, rtol=1e-5)


def test_float32_reference_matches_to_1e5_with_a_carried_state():
    torch.manual_seed(1)
    fused = nn.LSTM(4, 6, num_layers=2, batch_first=True)
    ref = ReferenceRNN("lstm", 4, 6, num_layers=2)
    ref.load_state_dict(fused.state_dict())
    h0 = (torch.randn(2, 3, 6), torch.randn(2, 3, 6))
    x = torch.randn(3, 9, 4)
    torch.testing.assert_close(ref(x, h0)[0], fused(x, h0)[0], atol=1e-5, rtol=1e-5)


def test_lstm_cell_gates_follow_the_equations():
    # with zero weights every gate is sigmoid(bias); choose biases that make the arithmetic visible
    H = 2
    w_ih, w_hh = torch.zeros(4 * H, 3), torch.zeros(4 * H, H)
    b = torch.tensor([30.0] * H + [-30.0] * H + [0.5] * H + [30.0] * H)  # i open, f shut, g=tanh(.5), o open
    h, c = lstm_cell(torch.randn(1, 3), (torch.zeros(1, H), torch.full((1, H), 5.0)), w_ih, w_hh, b, torch.zeros(4 * H))
    torch.testing.assert_close(c, torch.full((1, H), torch.tanh(torch.tensor(0.5)).item()), atol=1e-4, rtol=0)
    torch.testing.assert_close(h, torch.tanh(c), atol=1e-4, rtol=0)


def test_gru_update_gate_keeps_the_old_state_when_shut():
    H = 3
    h0 = torch.randn(1, H)
    b_ih = torch.tensor([0.0] * H + [20.0] * H + [0.0] * H)  # z = sigmoid(20) ~ 1: keep h
    h = gru_cell(torch.randn(1, 2), h0, torch.randn(3 * H, 2), torch.randn(3 * H, H), b_ih, torch.zeros(3 * H))
    torch.testing.assert_close(h, h0, atol=1e-6, rtol=0)


def test_unknown_cell_names_the_choices():
    with pytest.raises(ValueError, match=", ".join(GATES)):
        make_rnn("transformer", 3, 3)
