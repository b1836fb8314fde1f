"""The recurrent family beyond language modelling: padding, direction, pooling, and the task math."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.errors import ConfigError
from seqbench.models.recurrent import RecurrentModel
from seqbench.nn.cells import GATES
from seqbench.nn.recurrent_encoder import RecurrentEncoder


def _model(task="classification", **kw):
    spec = TaskSpec(task=task, vocab_size=20, num_classes=3, pad_id=0)
    return RecurrentModel(spec, optimizer=partial(torch.optim.SGD, lr=0.1), embedding_size=8, hidden_size=8,
                          num_layers=2, **kw).eval()


@pytest.mark.parametrize("cell", sorted(GATES))
def test_reference_encoder_with_lengths_matches_packed_fused_encoder(cell):
    torch.manual_seed(0)
    fused = RecurrentEncoder(cell, 6, num_layers=2, bidirectional=True, vocab_size=20, embedding_size=5).eval()
    ref = RecurrentEncoder(cell, 6, num_layers=2, bidirectional=True, vocab_size=20, embedding_size=5,
                           impl="reference").eval()
    ref.load_state_dict(fused.state_dict())
    x, lengths = torch.randint(1, 20, (4, 9)), torch.tensor([9, 3, 6, 1])
    states_f, final_f = fused(x, lengths)
    states_r, final_r = ref(x, lengths)
    mask = torch.arange(9)[None, :] < lengths[:, None]
    torch.testing.assert_close(states_r[mask], states_f[mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(final_r, final_f, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pooling", ["last", "mean", "max"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_does_not_change_a_sentence(pooling, bidirectional):
    torch.manual_seed(1)
    model = _model(bidirectional=bidirectional, pooling=pooling)
    short = torch.randint(1, 20, (1, 4))
    alone = model.classify({"input": short, "lengths": torch.tensor([4])})
    padded = torch.cat([short, torch.randint(1, 20, (1, 5))], 1)  # garbage after the end
    batched = model.classify({"input": torch.cat([padded, torch.randint(1, 20, (1, 9))]),
                              "lengths": torch.tensor([4, 9])})
    torch.testing.assert_close(batched[0], alone[0], atol=1e-5, rtol=1e-5)


def test_bidirectional_outputs_depend_on_later_tokens_and_unidirectional_do_not():
    torch.manual_seed(2)
    x = torch.randint(1, 20, (1, 7))
    later = x.clone()
    later[0, 6] = (later[0, 6] % 19) + 1  # change only the last token
    for bidirectional, should_change in [(True, True), (False, False)]:
        model = _model("tagging", bidirectional=bidirectional)
        first = model.tag({"input": x})[0, 0]
        changed = model.tag({"input": later})[0, 0]
        assert (not torch.allclose(first, changed)) == should_change


def test_language_models_cannot_be_bidirectional():
    with pytest.raises(ConfigError, match="bidirectional"):
        _model("lm", bidirectional=True)


@pytest.mark.parametrize("task", ["classification", "tagging"])
def test_embedding_dropout_is_the_rate_on_the_embeddings_of_every_task(task):
    """model.embedding_dropout was once read by language models only and silently ignored here."""
    assert _model(task, dropout=0.5, embedding_dropout=0.6).encoder.input_dropout.p == 0.6
    assert _model(task, dropout=0.5).encoder.input_dropout.p == 0.5  # unset: the model's dropout
    model = _model(task, dropout=0.0, embedding_dropout=1.0).train()  # every embedding dropped: a constant input
    x = torch.randint(1, 20, (2, 5))
    a = model.encoder.summary(x, torch.tensor([5, 5]), "mean")
    b = model.encoder.summary(torch.randint(1, 20, (2, 5)), torch.tensor([5, 5]), "mean")
    torch.testing.assert_close(a, b)


class _Fixed:
    """Stands in for a family: returns given outputs, records what is logged."""

    crf = None

    def __init__(self, outputs):
        self.outputs, self.logged = list(outputs), {}

    def classify(self, batch):
        return self.outputs.pop(0)

    tag = classify

    def log(self, name, value, **kw):
        self.logged[name] = float(value)


def test_classification_accuracy_is_per_example_over_uneven_batches():
    task = _model().task
    logits = [torch.tensor([[5.0, 0, 0], [0, 5.0, 0]]), torch.tensor([[0, 0, 5.0]])]
    labels = [torch.tensor([0, 2]), torch.tensor([2])]
    fake = _Fixed(logits)
    for y in labels:
        task.step(fake, {"label": y}, "val")
    task.epoch_end(fake, "val")
    assert fake.logged["val/acc"] == pytest.approx(2 / 3)  # not the mean of batch accuracies (0.75)


def test_tagging_scores_only_real_positions():
    task = _model("tagging").task
    emissions = torch.full((1, 4, 3), -5.0)
    emissions[0, :, 1] = 5.0  # predicts tag 1 everywhere
    tags = torch.tensor([[1, 1, IGNORE_INDEX, IGNORE_INDEX]])
    logs = _Fixed([emissions])
    task.step(logs, {"tags": tags}, "test")
    task.epoch_end(logs, "test")
    assert logs.logged["test/acc"] == 1.0
    assert logs.logged["test/loss"] == pytest.approx(-math.log(torch.softmax(emissions[0, 0], 0)[1].item()), rel=1e-3)


def test_the_language_model_recipe_on_another_task_is_pointed_out(cfg_factory, caplog):
    """With recipes turned off (`recipe=none`), `model=lstm data=sst2` keeps the family's defaults, the
    PTB recipe (SGD at lr 20): a warning says so. With its recipe (the default) there is nothing to say."""
    import logging

    from seqbench.training.run import build

    with caplog.at_level(logging.WARNING, logger="seqbench.models.recurrent"):
        build(cfg_factory(["model=lstm", "data=sst2", "recipe=none"]))
    assert "language-model recipe" in caplog.text and "recipe" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="seqbench.models.recurrent"):
        build(cfg_factory(["model=lstm", "data=sst2"]))
    assert "language-model recipe" not in caplog.text
