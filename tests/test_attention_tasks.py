"""The attention families beyond language modelling: masks, padding, pooling, feature inputs, learning."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.gpt import GPTModel
from seqbench.models.transformer import TransformerModel

FAMILIES = {"transformer": TransformerModel, "gpt": GPTModel}


def _model(family="transformer", task="classification", spec_kw=None, **kw):
    spec = TaskSpec(**{"task": task, "vocab_size": 20, "num_classes": 3, "pad_id": 0, **(spec_kw or {})})
    sizes = dict(n_layer=2, n_head=2, d_model=16, context=16, dropout=0.0)
    return FAMILIES[family](spec, optimizer=partial(torch.optim.AdamW, lr=3e-3), **{**sizes, **kw}).eval()


@pytest.mark.parametrize("family", ["transformer", "gpt"])
def test_sequence_tasks_are_supported(family):
    assert {"lm", "classification", "tagging", "regression"} <= set(FAMILIES[family].supported_tasks())


@pytest.mark.parametrize("family, pooling", [("transformer", "mean"), ("transformer", "max"),
                                             ("transformer", "last"), ("gpt", "last"), ("gpt", "mean")])
def test_padding_does_not_change_a_sentence(family, pooling):
    torch.manual_seed(1)
    model = _model(family, pooling=pooling)
    short = torch.randint(1, 20, (1, 4))
    alone = model.classify({"input": short, "lengths": torch.tensor([4])})
    padded = torch.cat([short, torch.randint(1, 20, (1, 5))], 1)  # garbage after the end
    batched = model.classify({"input": torch.cat([padded, torch.randint(1, 20, (1, 9))]),
                              "lengths": torch.tensor([4, 9])})
    torch.testing.assert_close(batched[0], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family, causal, should_change", [("transformer", None, True),
                                                           ("transformer", True, False), ("gpt", None, False)])
def test_only_a_bidirectional_encoder_reads_later_tokens(family, causal, should_change):
    torch.manual_seed(2)
    kw = {"causal": causal} if family == "transformer" else {}
    model = _model(family, "tagging", **kw)
    x = torch.randint(1, 20, (1, 7))
    later = x.clone()
    later[0, 6] = (later[0, 6] % 19) + 1  # change only the last token
    first, changed = model.tag({"input": x})[0, 0], model.tag({"input": later})[0, 0]
    assert (not torch.allclose(first, changed)) == should_change
    assert model.tag({"input": x}).shape == (1, 7, 3)


def test_a_transformer_language_model_cannot_be_bidirectional():
    with pytest.raises(ConfigError, match="causal"):
        _model("transformer", "lm", causal=False)


@pytest.mark.parametrize("family", ["transformer", "gpt"])
def test_feature_inputs_regress_without_a_vocabulary_or_lm_head(family):
    model = _model(family, "regression", spec_kw={"vocab_size": None, "input_dim": 2})
    y = model.regress({"input": torch.randn(3, 11, 2)})
    assert y.shape == (3,)
    assert model.net.lm_head is None if family == "gpt" else model.net.head is None


def test_learned_positions_cover_the_datas_longest_sequence():
    model = _model("gpt", spec_kw={"max_len": 40})  # context 16 in the config
    assert model.classify({"input": torch.randint(1, 20, (2, 40))}).shape == (2, 3)


@pytest.mark.parametrize("family", ["transformer", "gpt"])
def test_a_tiny_model_learns_whether_a_token_occurs(family, seed, record_property):
    """Class 1 iff token 7 occurs anywhere: the head must gather evidence from every position."""
    torch.set_num_threads(1)  # conftest restores the count after the test
    model = _model(family).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def batch(n):
        x = torch.randint(1, 7, (n, 12))
        y = torch.randint(0, 2, (n,))
        where = torch.randint(0, 12, (n,))
        x[y == 1, where[y == 1]] = 7
        return {"input": x, "label": y}

    for _ in range(250):
        b = batch(32)
        loss = torch.nn.functional.cross_entropy(model.classify(b), b["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    test = batch(500)
    with torch.no_grad():
        accuracy = (model.classify(test).argmax(-1) == test["label"]).float().mean().item()
    record_property("learned", accuracy)
    assert accuracy > 0.95, accuracy
