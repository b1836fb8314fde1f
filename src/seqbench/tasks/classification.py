"""Sequence classification (SST-2 sentiment, associative recall, MNIST read as a sequence).

Batches are dicts with `input` (B, T) token ids or (B, T, F) features, `lengths` (B,) and `label`
(B,). A family supports the task by implementing `classify(batch) -> logits (B, C)`. Loss is
cross-entropy; accuracy is torchmetrics' micro accuracy, one object per stage, so it is exact
under DDP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from seqbench.tasks.samples import text_of

STAGES = ("train", "val", "test")


def with_auxiliary(model, loss: torch.Tensor, stage: str) -> torch.Tensor:
    """L2 + λ·L1 when the family computed an auxiliary loss in this step (GPT fine-tuning's LM loss,
    Radford et al. 2018 §3.2); the metrics and `val/loss` stay the task's own L2."""
    take = getattr(model, "auxiliary_loss", None)
    aux = take() if callable(take) else None
    if aux is None:
        return loss
    value, weight = aux
    if stage == "train":
        model.log("train/task_loss", loss)
        model.log("train/aux_lm_loss", value)
    return loss + weight * value


class Classification(nn.Module):
    name = "classification"
    method = "classify"
    label_key = "label"
    directions = {"loss": "min", "acc": "max"}  # which way each val/ metric improves (seqbench.training.dashboard)

    @classmethod
    def from_spec(cls, spec):
        return cls(spec.num_classes)

    def __init__(self, num_classes: int, ignore_index: int | None = None) -> None:
        super().__init__()
        for stage in STAGES:  # attributes, not a ModuleDict: "train" would shadow nn.Module.train
            setattr(self, f"{stage}_acc", MulticlassAccuracy(num_classes, average="micro", ignore_index=ignore_index))
            setattr(self, f"{stage}_loss", MeanMetric())

    def metric(self, stage: str, name: str):
        return getattr(self, f"{stage}_{name}")

    def count_tokens(self, batch: dict) -> int:
        lengths = batch.get("lengths")
        return int(lengths.sum()) if lengths is not None else int(batch[self.label_key].numel())

    def step(self, model, batch: dict, stage: str) -> torch.Tensor:
        logits = getattr(model, self.method)(batch)  # (B, C)
        labels = batch[self.label_key]
        loss = F.cross_entropy(logits.float(), labels)
        self.metric(stage, "acc").update(logits.detach(), labels)
        self.metric(stage, "loss").update(loss.detach(), weight=labels.numel())
        loss = with_auxiliary(model, loss, stage)
        if stage == "train":
            model.log("train/loss", loss, prog_bar=True)
        return loss

    def reset(self, stage: str) -> None:
        for name in ("acc", "loss"):
            self.metric(stage, name).reset()

    def epoch_end(self, model, stage: str) -> None:
        if self.metric(stage, "loss").update_count == 0:
            return
        suffix = "_epoch" if stage == "train" else ""
        model.log(f"{stage}/loss{suffix}", self.metric(stage, "loss").compute(), sync_dist=True)
        model.log(f"{stage}/acc", self.metric(stage, "acc").compute(), sync_dist=True, prog_bar=stage == "val")
        self.reset(stage)

    def samples(self, model, batch: dict, n: int):
        """The misclassified examples among the first validation batch (at most `n`), with the
        predicted class's probability: the same pool every validation, so a row that stays is an
        example the model keeps getting wrong."""
        probs = getattr(model, self.method)(batch).float().softmax(-1)  # (B, C)
        confidence, predicted = probs.max(-1)
        gold = batch[self.label_key]
        names = (model.spec.extras or {}).get("label_names")
        name = (lambda c: names[c]) if names else (lambda c: c)
        wrong = (predicted != gold).nonzero().flatten()[:n].tolist()
        return ["example", "gold", "predicted", "p(predicted)"], [
            [self.example(model, batch, i), name(int(gold[i])), name(int(predicted[i])), float(confidence[i])]
            for i in wrong]

    def example(self, model, batch: dict, i: int):
        return text_of(batch, i, model.spec.tokenizer)
