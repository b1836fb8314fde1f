"""The model-size table: each component of a model holds the count its architecture gives, so the
components sum to the parameter count because every one is right, not because of a catch-all."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.analysis.model_size import COMPONENTS, components, main, tied
from seqbench.data.spec import TaskSpec
from seqbench.models.gpt import GPTModel
from seqbench.models.parallel_recurrent import ParallelRecurrentModel
from seqbench.models.recurrent import RecurrentModel
from seqbench.models.transformer import TransformerModel

OPT = partial(torch.optim.SGD, lr=0.1)
LM = TaskSpec(task="lm", vocab_size=50)
TAG = TaskSpec(task="tagging", vocab_size=12, num_classes=12, max_len=30)
ADD = TaskSpec(task="regression", input_dim=2, max_len=30)


def rnn(gates: int, inputs: int, hidden: int) -> int:
    """One layer and direction of a fused RNN: W_ih, W_hh and two biases per gate."""
    return gates * (hidden * inputs + hidden * hidden + 2 * hidden)


def block(d: int) -> dict[str, int]:
    """One Transformer block of width d: Q, K, V, O with biases; a 4d-wide FFN; two LayerNorms."""
    return {"attention": 4 * d * d + 4 * d, "ffn": 2 * 4 * d * d + 4 * d + d, "norms": 2 * 2 * d}


def blocks(n: int, d: int, final_norm: bool) -> dict[str, int]:
    one = block(d)
    return {"attention": n * one["attention"], "ffn": n * one["ffn"], "norms": n * one["norms"] + final_norm * 2 * d}


# each model beside its counts written from the architecture (V vocabulary, E embedding, H hidden,
# C classes, d width): not from a parameter walk, so a parameter filed under the wrong component, or
# one the walk misses, changes a count
CASES = {
    "lstm-lm-tied": (lambda: RecurrentModel(LM, OPT, cell="lstm", embedding_size=8, hidden_size=8, num_layers=2,
                                            tie_weights=True),
                     {"embeddings": 50 * 8, "recurrent": rnn(4, 8, 8) + rnn(4, 8, 8), "output": 50}),  # tied: bias
    "bigru-tagger": (lambda: RecurrentModel(TAG, OPT, cell="gru", embedding_size=4, hidden_size=6, num_layers=1,
                                            bidirectional=True),
                     {"embeddings": 12 * 4, "recurrent": 2 * rnn(3, 4, 6), "output": 2 * 6 * 12 + 12}),
    "rnn-adding": (lambda: RecurrentModel(ADD, OPT, cell="rnn", hidden_size=5, num_layers=1),
                   {"recurrent": rnn(1, 2, 5), "output": 5 + 1}),  # features go straight in: no embedding
    # minGRU: one input projection to two gate pre-activations per layer; pre-norm blocks, final norm, tied
    "mingru-lm": (lambda: ParallelRecurrentModel(LM, OPT, layer="mingru", d_model=8, num_layers=2),
                  {"embeddings": 50 * 8, "recurrent": 2 * (8 * 2 * 8 + 2 * 8), "norms": 3 * 2 * 8, "output": 50}),
    "transformer-lm": (lambda: TransformerModel(LM, OPT, n_layer=2, n_head=2, d_model=8, context=16),
                       {"embeddings": 50 * 8, **blocks(2, 8, final_norm=False)}),  # sinusoidal; post-norm; tied
    "transformer-adding": (lambda: TransformerModel(ADD, OPT, n_layer=1, n_head=2, d_model=8, norm_first=True),
                           {"embeddings": 2 * 8 + 8, **blocks(1, 8, final_norm=True), "output": 8 + 1}),
    "gpt-lm": (lambda: GPTModel(LM, OPT, n_layer=2, n_head=2, d_model=8, context=16),
               {"embeddings": 50 * 8, "positions": 16 * 8, **blocks(2, 8, final_norm=True)}),  # tied head
    "gpt-tagger": (lambda: GPTModel(TAG, OPT, n_layer=1, n_head=2, d_model=8, context=16),
                   {"embeddings": 12 * 8, "positions": 30 * 8,  # learned positions cover max_len 30
                    **blocks(1, 8, final_norm=True), "output": 8 * 12 + 12}),
}


@pytest.mark.parametrize("make, expected", CASES.values(), ids=CASES.keys())
def test_each_component_holds_its_textbook_count(make, expected):
    model = make()
    assert components(model) == {name: expected.get(name, 0) for name in COMPONENTS}
    assert model.num_params() == sum(expected.values())


def test_tied_detects_shared_output_weights():
    assert tied(RecurrentModel(LM, OPT, embedding_size=8, hidden_size=8, tie_weights=True))
    assert not tied(RecurrentModel(LM, OPT, embedding_size=8, hidden_size=8, tie_weights=False))


def test_command_prints_a_row_per_preset():
    text = main(["--vocab", "100", "--families", "probe"])
    lines = text.splitlines()
    assert lines[0].startswith("| preset | data | embeddings |")
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[2:] if line.startswith("|")}
    assert {"model=lstm", "model=gpt_nano", "model=transformer", "preset=probe/gru"} <= set(rows)
    assert "lm, vocab 100" in rows["model=lstm"] and "tagging, vocab 10" in rows["preset=probe/gru"]
