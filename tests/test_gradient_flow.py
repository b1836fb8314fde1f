"""The gradient-flow probe: one norm per position, equal to autograd through an independent path."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

from seqbench.analysis.gradient_flow import by_distance, gradient_norms, input_gradients, main, measure
from seqbench.data.synthetic import CopyDataModule
from seqbench.data.streams import IGNORE_INDEX
from seqbench.families import FAMILIES
from seqbench.models.gpt import GPTModel
from seqbench.models.parallel_recurrent import ParallelRecurrentModel
from seqbench.models.recurrent import RecurrentModel
from seqbench.models.transformer import TransformerModel

OPT = partial(torch.optim.Adam, lr=1e-3)
PARALLEL = [name for name, family in FAMILIES.items() if family.cls is ParallelRecurrentModel]


def _data(T=6):
    dm = CopyDataModule(T=T, num_symbols=4, copy_length=2, batch_size=4, eval_batch_size=4, train_size=4,
                        val_size=4, test_size=4, seed=0)
    dm.setup()
    return dm.spec, dm.fixed["val"]


def _last_position_loss(emissions, tags):
    return F.cross_entropy(emissions[:, -1].float(), tags[:, -1])


def _models(spec):
    torch.manual_seed(0)
    return {
        "lstm": RecurrentModel(spec, OPT, cell="lstm", embedding_size=5, hidden_size=7, num_layers=2),
        "rnn": RecurrentModel(spec, OPT, cell="rnn", embedding_size=5, hidden_size=7, num_layers=1),
        "transformer": TransformerModel(spec, OPT, n_layer=2, n_head=2, d_model=8, dropout=0.0, tie_weights=False),
        "gpt": GPTModel(spec, OPT, n_layer=2, n_head=2, d_model=8, dropout=0.0),
        **{name: ParallelRecurrentModel(spec, OPT, layer=FAMILIES[name].selector["layer"], d_model=8, num_layers=2,
                                        d_state=4, headdim=4) for name in PARALLEL},
    }


def _independent_gradient(name, model, batch):
    """dL/dx recomputed without hooks: the first layer's input built by hand as a leaf."""
    tokens, tags = batch["input"], batch["tags"]
    if name in ("lstm", "rnn"):
        x = model.encoder.embed(tokens).detach().requires_grad_(True)
        states, _ = model.encoder.rnn(x)
        emissions = model.head(states)
    elif name in PARALLEL:  # the parallel recurrences: the embedding enters the left-to-right stack
        x = model.encoder.embed(tokens).detach().requires_grad_(True)
        states, _ = model.encoder.forward_stack(x)
        emissions = model.head(states)
    elif name == "transformer":
        net = model.net
        x = (net.embedding(tokens) * math.sqrt(net.d_model) + net.positions(tokens.size(1))).detach().requires_grad_(True)
        emissions = model.head(net.stack(x, causal=False))
    else:
        net = model.net
        x = (net.tok_emb(tokens) + net.pos_emb(tokens.size(1))).detach().requires_grad_(True)
        emissions = model.head(net.blocks(x, causal=True))
    (grad,) = torch.autograd.grad(_last_position_loss(emissions, tags), x)
    return grad


@pytest.mark.parametrize("name", list(_models(_data()[0])))
def test_probe_matches_autograd_through_an_independent_path(name):
    spec, batch = _data()
    model = _models(spec)[name].eval()
    grad = input_gradients(model, batch)
    expected = _independent_gradient(name, model, batch)
    assert grad.shape == expected.shape == (4, spec.max_len, expected.size(-1))
    torch.testing.assert_close(grad, expected, atol=1e-6, rtol=1e-5)
    norms = gradient_norms(model, batch)
    assert norms.shape == (spec.max_len,)  # one norm per position
    torch.testing.assert_close(norms, expected.norm(dim=-1).mean(0))
    rows = by_distance(norms)
    assert [d for d, _ in rows] == list(range(spec.max_len)) and rows[0][1] == pytest.approx(norms[-1].item())


def test_a_causal_model_gets_no_gradient_from_the_future():
    spec, batch = _data()
    tags = batch["tags"].clone()
    tags[:, 5] = 1  # score a position in the middle
    norms = gradient_norms(_models(spec)["gpt"], {**batch, "tags": tags}, position=5)
    assert (norms[6:] == 0).all() and (norms[:6] > 0).all()
    assert by_distance(norms, position=5)[-1][0] == 5  # distances 0..5 only


def test_a_fresh_tanh_rnn_loses_gradient_with_distance():
    spec, batch = _data(T=30)
    norms = gradient_norms(_models(spec)["rnn"], batch)
    assert norms[-1] > 1e3 * norms[0]  # the loss sits at the last position; position 0 is 33 steps back


def test_the_probe_ignores_scored_positions_other_than_the_chosen_one():
    spec, batch = _data()
    tags = batch["tags"].clone()
    tags[:, 0] = 1  # would add a loss at position 0 if it were scored
    other = {**batch, "tags": tags}
    model = _models(spec)["lstm"]
    torch.testing.assert_close(input_gradients(model, other), input_gradients(model, batch))
    assert (batch["tags"][:, :-2] == IGNORE_INDEX).all()


def test_command_writes_csv_and_png(tmp_path):
    result = main(["--T", "5", "--n", "4", "--families", "lstm", "transformer", "--out", str(tmp_path),
                   "--wandb", "disabled"])
    assert result["png"].is_file() and result["png"].stat().st_size > 1000
    lines = result["csv"].read_text().splitlines()
    assert lines[0] == "family,distance,grad_norm" and len(lines) == 1 + 2 * (5 + 2 * 10)


@pytest.mark.parametrize("family", [name for name in PARALLEL if FAMILIES[name].compared])  # those with probe presets
def test_the_probe_reads_each_parallel_recurrence_built_from_its_probe_preset(family):
    """The command's path (`probe/<family>` preset, copy-memory data at gap T): one finite norm per
    distance, and the gradient reaches the first position, T + 2 x copy_length - 1 tokens back."""
    T = 5
    (rows,) = measure([family], T, n=4).values()
    copy_length = 10  # conf/data/copy.yaml
    assert [d for d, _ in rows] == list(range(T + 2 * copy_length))
    norms = torch.tensor([v for _, v in rows])
    assert torch.isfinite(norms).all() and norms[-1] > 0
