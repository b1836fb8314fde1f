"""model.forget_bias and model.recurrent_init set exactly what they say, on every recurrent layer."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.data.synthetic import AddingDataModule, CopyDataModule
from seqbench.errors import ConfigError
from seqbench.models.recurrent import RecurrentModel
from seqbench.nn.cells import GATES, make_rnn
from seqbench.nn.recurrent_init import init_recurrence

H = 6


def _biases(rnn, suffix):
    return getattr(rnn, f"bias_ih{suffix}"), getattr(rnn, f"bias_hh{suffix}")


@pytest.mark.parametrize("impl", ["fused", "reference"])
def test_forget_bias_sets_the_sum_of_both_bias_vectors_in_every_layer_and_direction(impl):
    torch.manual_seed(0)
    rnn = make_rnn("lstm", 4, H, num_layers=2, bidirectional=True, impl=impl)
    before = {n: p.clone() for n, p in rnn.named_parameters()}
    init_recurrence(rnn, forget_bias=1.0)
    for suffix in ("_l0", "_l0_reverse", "_l1", "_l1_reverse"):
        b_ih, b_hh = _biases(rnn, suffix)
        torch.testing.assert_close(b_ih[H : 2 * H] + b_hh[H : 2 * H], torch.ones(H))  # the forget gate (i, f, g, o)
        for name, b in (("bias_ih", b_ih), ("bias_hh", b_hh)):  # the other gates keep PyTorch's init
            old = before[f"{name}{suffix}"]
            assert torch.equal(b[:H], old[:H]) and torch.equal(b[2 * H :], old[2 * H :])
    for name, p in rnn.named_parameters():  # weights untouched
        if name.startswith("weight"):
            assert torch.equal(p, before[name])


def test_the_default_forget_bias_is_pytorchs_uniform_init_with_mean_zero():
    torch.manual_seed(0)
    rnn = make_rnn("lstm", 4, 512)
    summed = rnn.bias_ih_l0[512:1024] + rnn.bias_hh_l0[512:1024]
    assert abs(summed.mean().item()) < 0.01 and summed.abs().max().item() <= 2 / 512**0.5


@pytest.mark.parametrize("cell, gates", sorted(GATES.items()))
@pytest.mark.parametrize("how", ["orthogonal", "identity"])
def test_recurrent_init_makes_each_gates_block_orthogonal_or_the_identity(cell, gates, how):
    torch.manual_seed(0)
    rnn = make_rnn(cell, 4, H, num_layers=2)
    w_ih = rnn.weight_ih_l0.clone()
    init_recurrence(rnn, recurrent_init=how)
    for layer in (0, 1):
        w = getattr(rnn, f"weight_hh_l{layer}")
        assert w.shape == (gates * H, H)
        for k in range(gates):
            block = w[k * H : (k + 1) * H]
            if how == "identity":
                assert torch.equal(block, torch.eye(H))
            else:
                torch.testing.assert_close(block @ block.T, torch.eye(H), atol=1e-5, rtol=0)
                assert not torch.allclose(block, torch.eye(H))
    assert torch.equal(rnn.weight_ih_l0, w_ih)  # input weights untouched


def test_the_options_reach_the_model_on_every_probe_task():
    copy = CopyDataModule(T=5).spec
    model = RecurrentModel(copy, partial(torch.optim.Adam), cell="lstm", hidden_size=H, num_layers=1,
                           init_range=0.1, forget_bias=2.0, recurrent_init="orthogonal")
    rnn = model.encoder.rnn
    torch.testing.assert_close(rnn.bias_ih_l0[H : 2 * H] + rnn.bias_hh_l0[H : 2 * H], torch.full((H,), 2.0))
    torch.testing.assert_close(rnn.weight_hh_l0[:H] @ rnn.weight_hh_l0[:H].T, torch.eye(H), atol=1e-5, rtol=0)
    gru = RecurrentModel(AddingDataModule(T=5).spec, partial(torch.optim.Adam), cell="gru", hidden_size=H,
                         num_layers=1, recurrent_init="identity")
    assert torch.equal(gru.encoder.rnn.weight_hh_l0[2 * H :], torch.eye(H))


def test_forget_bias_on_a_net_without_an_lstm_and_an_unknown_init_fail_in_one_sentence():
    spec = CopyDataModule(T=5).spec
    with pytest.raises(ConfigError, match="model.forget_bias sets the LSTM's forget gate"):
        RecurrentModel(spec, partial(torch.optim.Adam), cell="gru", hidden_size=H, forget_bias=1.0)
    with pytest.raises(ConfigError, match="choose one of default, orthogonal, identity"):
        RecurrentModel(spec, partial(torch.optim.Adam), cell="lstm", hidden_size=H, recurrent_init="xavier")


def test_the_recurrent_init_reaches_a_weight_dropped_matrix():
    """AWD-LSTM's weight drop moves weight_hh under a parametrization; the init must still set it."""
    from seqbench.nn.recurrent_lm import RecurrentLM
    from seqbench.nn.recurrent_init import init_recurrence

    net = RecurrentLM(50, "lstm", 8, 8, 2, weight_drop=0.5, lock_dropout=True, tie_weights=True)
    init_recurrence(net, forget_bias=1.0, recurrent_init="identity")
    for layer in net.layers:
        raw = layer.parametrizations.weight_hh_l0.original
        H = layer.hidden_size
        assert torch.equal(raw[:H], torch.eye(H))
        assert torch.equal(layer.bias_ih_l0[H:2 * H] + layer.bias_hh_l0[H:2 * H], torch.ones(H))
