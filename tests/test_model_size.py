"""The model-size table: the components of every model sum to its parameter count, and each component
holds what its name says."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.analysis.model_size import components, main, tied
from seqbench.data.spec import TaskSpec
from seqbench.models.gpt import GPTModel
from seqbench.models.recurrent import RecurrentModel
from seqbench.models.transformer import TransformerModel

OPT = partial(torch.optim.SGD, lr=0.1)
LM = TaskSpec(task="lm", vocab_size=50)
TAG = TaskSpec(task="tagging", vocab_size=12, num_classes=12, max_len=30)
ADD = TaskSpec(task="regression", input_dim=2, max_len=30)


@pytest.mark.parametrize("make", [
    lambda: RecurrentModel(LM, OPT, cell="lstm", embedding_size=8, hidden_size=8, num_layers=2, tie_weights=True),
    lambda: RecurrentModel(TAG, OPT, cell="gru", embedding_size=4, hidden_size=6, num_layers=1, bidirectional=True),
    lambda: RecurrentModel(ADD, OPT, cell="rnn", hidden_size=5, num_layers=1),
    lambda: TransformerModel(LM, OPT, n_layer=2, n_head=2, d_model=8, context=16),
    lambda: TransformerModel(ADD, OPT, n_layer=1, n_head=2, d_model=8, norm_first=True),
    lambda: GPTModel(LM, OPT, n_layer=2, n_head=2, d_model=8, context=16),
    lambda: GPTModel(TAG, OPT, n_layer=1, n_head=2, d_model=8, context=16),
])
def test_components_sum_to_the_parameter_count(make):
    model = make()
    assert sum(components(model).values()) == model.num_params()


def test_components_hold_the_textbook_counts():
    E = H = 8
    lstm = components(RecurrentModel(LM, OPT, cell="lstm", embedding_size=E, hidden_size=H, num_layers=2,
                                     tie_weights=True))
    assert lstm["recurrent"] == 2 * 4 * (H * (E + H) + 2 * H)  # 4 gates: W_ih, W_hh, two biases per layer
    assert lstm["embeddings"] == 50 * E and lstm["output"] == 50  # tied: the decoder adds only its bias
    d, L = 8, 2
    gpt = components(GPTModel(LM, OPT, n_layer=L, n_head=2, d_model=d, context=16))
    assert gpt["attention"] == L * (4 * d * d + 4 * d)  # Q, K, V, O with biases
    assert gpt["ffn"] == L * (2 * 4 * d * d + 4 * d + d)
    assert gpt["norms"] == (2 * L + 1) * 2 * d  # two per block and the final one, gain and bias
    assert gpt["positions"] == 16 * d and gpt["embeddings"] == 50 * d and gpt["output"] == 0
    sinusoidal = components(TransformerModel(LM, OPT, n_layer=1, n_head=2, d_model=8, context=16))
    assert sinusoidal["positions"] == 0
    adding = components(TransformerModel(ADD, OPT, n_layer=1, n_head=2, d_model=8))
    assert adding["embeddings"] == 2 * 8 + 8 and adding["output"] == 8 + 1  # input map; regression head


def test_tied_detects_shared_output_weights():
    assert tied(RecurrentModel(LM, OPT, embedding_size=8, hidden_size=8, tie_weights=True))
    assert not tied(RecurrentModel(LM, OPT, embedding_size=8, hidden_size=8, tie_weights=False))


def test_command_prints_a_row_per_preset():
    text = main(["--vocab", "100", "--families", "probe"])
    lines = text.splitlines()
    assert lines[0].startswith("| preset | data | embeddings |")
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[2:] if line.startswith("|")}
    assert {"model=lstm", "model=gpt_nano", "model=transformer", "family=probe/gru"} <= set(rows)
    assert "lm, vocab 100" in rows["model=lstm"] and "tagging, vocab 10" in rows["family=probe/gru"]
