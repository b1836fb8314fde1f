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
