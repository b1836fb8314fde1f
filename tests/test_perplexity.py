"""Perplexity arithmetic: exp of the token-weighted mean NLL, identical to torchmetrics' Perplexity."""

from __future__ import annotations

import math

import torch
from torchmetrics.text import Perplexity

from seqbench.data.streams import IGNORE_INDEX
from seqbench.tasks.lm import LanguageModelling, token_nll


class _Recorder:
    """Stands in for a LightningModule: returns fixed logits and records what is logged."""

    def __init__(self, logits):
        self.logits, self.logged = logits, {}

    def lm_logits(self, batch, stage):
        return self.logits.pop(0)

    def log(self, name, value, **kwargs):
        self.logged[name] = float(value)


def test_perplexity_is_token_weighted_not_a_mean_of_batch_perplexities():
    torch.manual_seed(0)
    V = 11
    batches, logits = [], []
    for T, pad in [(7, 0), (5, 3), (1, 0)]:  # unequal batches, one with padding
        target = torch.randint(V, (2, T))
        if pad:
            target[1, -pad:] = IGNORE_INDEX
        batches.append({"input": torch.zeros_like(target), "target": target})
        logits.append(torch.randn(2, T, V))
    reference = Perplexity(ignore_index=IGNORE_INDEX)
    for lg, b in zip(logits, batches):
        reference.update(lg, b["target"])

    task, model = LanguageModelling(), _Recorder([lg.clone() for lg in logits])
    for b in batches:
        task.step(model, b, "val")
    task.epoch_end(model, "val")
    assert math.isclose(model.logged["val/ppl"], reference.compute().item(), rel_tol=1e-5)

    total_nll = sum(token_nll(lg, b["target"])[0] for lg, b in zip(logits, batches))
    tokens = sum(int((b["target"] != IGNORE_INDEX).sum()) for b in batches)
    assert math.isclose(model.logged["val/ppl"], math.exp(total_nll / tokens), rel_tol=1e-5)
    batch_mean = sum(math.exp(token_nll(lg, b["target"])[0] / (b["target"] != IGNORE_INDEX).sum())
                     for lg, b in zip(logits, batches)) / len(batches)
    assert not math.isclose(model.logged["val/ppl"], batch_mean, rel_tol=1e-3)


def test_uniform_prediction_has_perplexity_equal_to_vocabulary_size():
    V = 37
    task, model = LanguageModelling(), _Recorder([torch.zeros(3, 8, V)])
    task.step(model, {"input": torch.zeros(3, 8, dtype=torch.long), "target": torch.randint(V, (3, 8))}, "test")
    task.epoch_end(model, "test")
    assert math.isclose(model.logged["test/ppl"], V, rel_tol=1e-6)
    assert math.isclose(model.logged["test/loss"], math.log(V), rel_tol=1e-6)


def test_bits_per_byte_is_the_loss_over_ln_2_where_the_data_counts_bytes():
    # uniform over 256 bytes is 8 bits a byte; a trained-looking prediction's bpc is its loss / ln 2.
    # Bugs caught: bpc in log10 units, or log2 taken of the loss instead of dividing it by ln 2
    from seqbench.data.spec import TaskSpec

    task = LanguageModelling.from_spec(TaskSpec("lm", vocab_size=256, extras={"token_unit": "byte"}))
    model = _Recorder([torch.zeros(2, 16, 256)])
    task.step(model, {"input": torch.zeros(2, 16, dtype=torch.long), "target": torch.randint(256, (2, 16))}, "test")
    task.epoch_end(model, "test")
    assert math.isclose(model.logged["test/bpc"], 8.0, rel_tol=1e-6)
    torch.manual_seed(1)
    logits = torch.randn(3, 9, 256) * 4
    target = torch.randint(256, (3, 9))
    model = _Recorder([logits])
    task.step(model, {"input": torch.zeros_like(target), "target": target}, "val")
    task.epoch_end(model, "val")
    assert math.isclose(model.logged["val/bpc"], model.logged["val/loss"] / math.log(2), rel_tol=1e-6)
    assert model.logged["val/loss"] > 1.5  # far from 1, where log2(loss) and loss / ln 2 would be near
    assert task.directions["bpc"] == "min"


def test_corpora_that_do_not_count_bytes_log_what_they_always_did():
    # PTB, Tiny Shakespeare: no token unit declared, no bpc; their recorded metric names stay as they were
    from seqbench.data.spec import TaskSpec

    for extras in (None, {"label_names": ["a"]}):
        task = LanguageModelling.from_spec(TaskSpec("lm", vocab_size=5, extras=extras))
        model = _Recorder([torch.zeros(1, 4, 5)])
        task.step(model, {"input": torch.zeros(1, 4, dtype=torch.long), "target": torch.randint(5, (1, 4))}, "val")
        task.epoch_end(model, "val")
        assert sorted(model.logged) == ["val/loss", "val/ppl"] and "bpc" not in task.directions
