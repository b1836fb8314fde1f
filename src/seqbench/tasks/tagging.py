"""Sequence tagging (named entities, parts of speech, per-position synthetic probes).

Batches are dicts with `input` (B, T), `lengths` (B,) and `tags` (B, T), where positions that are
not scored (padding, a probe's filler) hold `IGNORE_INDEX`. A family supports the task by
implementing `tag(batch) -> emissions (B, T, K)`; a family whose `crf` attribute is set is scored
with that CRF's negative log-likelihood and decoded with its Viterbi path instead of per-position
argmax. Token accuracy is computed here; when the data declares a tag scheme (`spec.extras`
holds `tag_scheme` and `tag_names`, as CoNLL-2003's NER labels do) entity-level precision, recall and
F1 are added, scored like conlleval by `seqbench.metrics.spans.SpanF1` (`val/f1`, `test/f1`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seqbench.data.streams import IGNORE_INDEX
from seqbench.metrics.spans import SpanF1, chunks
from seqbench.tasks.classification import Classification, with_auxiliary
from seqbench.tasks.samples import first_rows, spans_text, text_of


class Tagging(Classification):
    """Per-token classification: the metrics and epoch logging are the classification task's, with
    padding (IGNORE_INDEX) left out of the accuracy."""

    name = "tagging"
    method = "tag"
    directions = {"loss": "min", "acc": "max", "precision": "max", "recall": "max", "f1": "max"}

    @classmethod
    def from_spec(cls, spec):
        extras = spec.extras or {}
        return cls(spec.num_classes, extras.get("tag_names") if extras.get("tag_scheme") else None)

    def __init__(self, num_classes: int, tag_names: list[str] | None = None) -> None:
        super().__init__(num_classes, ignore_index=IGNORE_INDEX)
        self.spans = tag_names is not None
        if self.spans:
            for stage in ("train", "val", "test"):
                setattr(self, f"{stage}_spans", SpanF1(tag_names, IGNORE_INDEX))

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
        if self.spans and stage != "train":  # chunking is Python per sentence: evaluation only
            self.metric(stage, "spans").update(predictions.detach(), tags)
        self.metric(stage, "loss").update(loss.detach(), weight=(tags != IGNORE_INDEX).sum())
        loss = with_auxiliary(model, loss, stage)
        if stage == "train":
            model.log("train/loss", loss, prog_bar=True)
        return loss

    def reset(self, stage: str) -> None:
        super().reset(stage)
        if self.spans:
            self.metric(stage, "spans").reset()

    def samples(self, model, batch: dict, n: int):
        """Gold and predicted entity spans of the first `n` validation sentences (with a tag scheme),
        or their gold and predicted tags (a probe, parts of speech)."""
        batch = first_rows(batch, n)
        _, predictions = self.loss_and_predictions(model, batch)
        names = (model.spec.extras or {}).get("tag_names")
        rows = []
        for i, (gold_row, pred_row) in enumerate(zip(batch["tags"].tolist(), predictions.tolist())):
            keep = [t for t, g in enumerate(gold_row) if g != IGNORE_INDEX]
            gold = [names[gold_row[t]] if names else str(gold_row[t]) for t in keep]
            pred = [names[pred_row[t]] if names else str(pred_row[t]) for t in keep]
            if self.spans:
                words = batch["words"][i] if batch.get("words") is not None else [str(t) for t in keep]
                g, p = chunks(gold), chunks(pred)
                rows.append([" ".join(words), spans_text(g, words), spans_text(p, words), len(g & p), len(g)])
            else:
                rows.append([text_of(batch, i, model.spec.tokenizer), " ".join(gold), " ".join(pred),
                             sum(a == b for a, b in zip(gold, pred)), len(gold)])
        if self.spans:
            return ["sentence", "gold spans", "predicted spans", "correct spans", "gold spans (n)"], rows
        return ["input", "gold tags", "predicted tags", "correct tags", "scored tags"], rows

    def epoch_end(self, model, stage: str) -> None:
        if self.spans and self.metric(stage, "spans").update_count:
            for name, value in self.metric(stage, "spans").compute().items():
                model.log(f"{stage}/{name}", value, sync_dist=True, prog_bar=stage == "val" and name == "f1")
        super().epoch_end(model, stage)
