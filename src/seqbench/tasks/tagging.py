"""Sequence tagging (named entities, parts of speech, per-position synthetic probes).

Batches are dicts with `input` (B, T), `lengths` (B,) and `tags` (B, T), where positions that are
not scored (padding, a probe's filler) hold `IGNORE_INDEX`. A family supports the task by
implementing `tag(batch) -> emissions (B, T, K)`; a family whose `crf` attribute is set is scored
with that CRF's negative log-likelihood and decoded with its Viterbi path instead of per-position
argmax. Token accuracy is computed here; span-level F1 for entity tags is added by
`seqbench.metrics.spans` when the data declares a tag scheme.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seqbench.data.streams import IGNORE_INDEX
from seqbench.tasks.classification import Classification


class Tagging(Classification):
    """Per-token classification: the metrics and epoch logging are the classification task's, with
    padding (IGNORE_INDEX) left out of the accuracy."""

    name = "tagging"
    method = "tag"

    def __init__(self, num_classes: int) -> None:
        super().__init__(num_classes, ignore_index=IGNORE_INDEX)

    def count_tokens(self, batch: dict) -> int:
        return int((batch["tags"] != IGNORE_INDEX).sum())

    def loss_and_predictions(self, model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        emissions = model.tag(batch)  # (B, T, K)
        tags = batch["tags"]
        crf = getattr(model, "crf", None)
        if crf is not None:
            mask = tags != IGNORE_INDEX
            return crf.nll(emissions, tags, mask), crf.decode(emissions, mask)
        loss = F.cross_entropy(emissions.flatten(0, 1).float(), tags.flatten(), ignore_index=IGNORE_INDEX)
        return loss, emissions.argmax(-1)

    def step(self, model, batch: dict, stage: str) -> torch.Tensor:
        loss, predictions = self.loss_and_predictions(model, batch)
        tags = batch["tags"]
        self.metric(stage, "acc").update(predictions.detach(), tags)
        self.metric(stage, "loss").update(loss.detach(), weight=(tags != IGNORE_INDEX).sum())
        if stage == "train":
            model.log("train/loss", loss, prog_bar=True)
        return loss
