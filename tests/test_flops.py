"""Each family's training-FLOPs formula (seqbench.nn.flops) against torch's FlopCounterMode on one step.

FlopCounterMode counts the matmuls torch dispatches, forward and backward. Two fused CPU kernels are
opaque to it (it sees no matmul inside): oneDNN's LSTM and SDPA's causal flash kernel. For those the
check runs the textbook implementation of the same network (`impl=reference`, `attn_impl=reference`),
which does the same matmuls in readable form (tests/test_cells.py and test_attention.py check they
agree numerically). The window is longer than d_model so that the attention term is over 10 % of the
count: leaving it out, or halving it for the causal mask, fails the check.

The formulas match the counter within 0.25 %, so the check allows 1 %: smaller mistakes than a
missing term fail it too. The sizes are chosen so that each part of a formula is visible: the
embedding is narrower than the hidden state and there are three layers (a layer above the first read
at the embedding's width is 4-10 % off), the Transformer's d_ff is not 4·d_model (a formula that
assumes 4·d fails), and AWD-LSTM's stack has a last layer as wide as the embedding (per-layer widths).
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from seqbench.data.spec import TaskSpec
from seqbench.models.gpt import GPTModel
from seqbench.models.recurrent import RecurrentModel
from seqbench.models.transformer import TransformerModel
from seqbench.tasks.lm import token_nll

V, B, T = 60, 4, 64
SGD = functools.partial(torch.optim.SGD, lr=0.1)
SPEC = TaskSpec("lm", vocab_size=V)

STACK = dict(embedding_size=16, hidden_size=40, num_layers=3)  # E != H, three layers
FAMILIES = {
    "rnn": lambda: RecurrentModel(SPEC, SGD, cell="rnn", **STACK),
    "lstm": lambda: RecurrentModel(SPEC, SGD, cell="lstm", impl="reference", **STACK),
    "gru": lambda: RecurrentModel(SPEC, SGD, cell="gru", **STACK),
    "awd_lstm": lambda: RecurrentModel(SPEC, SGD, cell="lstm", impl="reference", lock_dropout=True, tie_weights=True,
                                       **STACK),  # layer widths 40, 40, 16
    "transformer": lambda: TransformerModel(SPEC, SGD, n_layer=3, n_head=2, d_model=32, d_ff=48, context=T),
    "gpt": lambda: GPTModel(SPEC, SGD, n_layer=3, n_head=2, d_model=32, context=T, attn_impl="reference"),
}


def counted_flops_per_token(model) -> float:
    x = torch.randint(V, (B, T + 1))
    batch = {"input": x[:, :-1], "target": x[:, 1:], "window": 0}
    model.train()
    with FlopCounterMode(display=False) as counter:
        nll, n = token_nll(model.lm_logits(batch, "train"), batch["target"])
        (nll / n).backward()
    return counter.get_total_flops() / (B * T)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_formula_matches_the_flop_counter_on_a_training_step(family):
    torch.manual_seed(0)
    model = FAMILIES[family]()
    assert model.flops_per_token(T) == pytest.approx(counted_flops_per_token(model), rel=0.01)


def test_attention_term_grows_with_the_window_and_recurrent_cost_does_not():
    gpt, lstm = FAMILIES["gpt"](), FAMILIES["lstm"]()
    # QKᵀ and AV: 4·T·d per layer forward (3 layers of d = 32), x 3 for training
    assert gpt.flops_per_token(2 * T) - gpt.flops_per_token(T) == 3 * 4 * 3 * 32 * T
    assert lstm.flops_per_token(2 * T) == lstm.flops_per_token(T)


def test_families_without_a_count_say_none():
    classifier = RecurrentModel(TaskSpec("classification", vocab_size=V, num_classes=2, pad_id=0), SGD)
    assert classifier.flops_per_token() is None
