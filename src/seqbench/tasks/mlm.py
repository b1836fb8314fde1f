"""BERT pre-training: masked language modelling plus next-sentence prediction (Devlin et al. 2019).

Batches are dicts with `input` (B, T) pieces with masks applied, `segments` (B, T), `lengths` (B,),
`mlm_labels` (B, T) (the original piece at the masked positions, IGNORE_INDEX elsewhere) and
`nsp_label` (B,) (1 = B follows A). A family supports the task by implementing
`pretrain_logits(batch) -> (mlm (N, V), nsp (B, 2))`, the MLM logits at the N masked positions
(`mlm_labels != IGNORE_INDEX`, in row-major order: the unmasked ones are never scored). The loss is
the sum of the two cross-entropies, as in the paper; MLM accuracy counts masked positions only, NSP
accuracy pairs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from seqbench.data.streams import IGNORE_INDEX
from seqbench.tasks.samples import first_rows

STAGES = ("train", "val", "test")


class MaskedLMPretraining(nn.Module):
    name = "mlm"
    method = "pretrain_logits"
    directions = {"loss": "min", "mlm_loss": "min", "nsp_loss": "min", "mlm_acc": "max", "nsp_acc": "max"}

    @classmethod
    def from_spec(cls, spec):
        return cls(spec.vocab_size)

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        for stage in STAGES:
            setattr(self, f"{stage}_mlm_acc", MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE_INDEX))
            setattr(self, f"{stage}_nsp_acc", MulticlassAccuracy(2, average="micro"))
            for name in ("loss", "mlm_loss", "nsp_loss"):
                setattr(self, f"{stage}_{name}", MeanMetric())

    def metric(self, stage: str, name: str):
        return getattr(self, f"{stage}_{name}")

    def count_tokens(self, batch: dict) -> int:
        return int(batch["lengths"].sum())

    def step(self, model, batch: dict, stage: str) -> torch.Tensor:
        mlm, nsp = model.pretrain_logits(batch)  # (N, V), (B, 2)
        masked = batch["mlm_labels"] != IGNORE_INDEX
        targets = batch["mlm_labels"][masked]  # (N,)
        mlm_loss = F.cross_entropy(mlm.float(), targets)
        nsp_loss = F.cross_entropy(nsp.float(), batch["nsp_label"])
        loss = mlm_loss + nsp_loss
        self.metric(stage, "mlm_acc").update(mlm.detach(), targets)
        self.metric(stage, "nsp_acc").update(nsp.detach(), batch["nsp_label"])
        for name, value, weight in (("loss", loss, 1), ("mlm_loss", mlm_loss, masked.sum()), ("nsp_loss", nsp_loss, 1)):
            self.metric(stage, name).update(value.detach(), weight=weight)
        if stage == "train":
            model.log("train/loss", loss, prog_bar=True)
        return loss

    def samples(self, model, batch: dict, n: int):
        """The first `n` validation pairs with their masks, the masked pieces and the model's guesses,
        and the next-sentence label against the prediction."""
        batch = first_rows(batch, n)
        mlm, nsp = model.pretrain_logits(batch)  # (N, V) in row-major order of the masked positions
        guesses = iter(mlm.argmax(-1).tolist())
        piece = model.spec.tokenizer.id_to_token
        rows = []
        for b in range(len(batch["lengths"])):
            ids = batch["input"][b, : int(batch["lengths"][b])].tolist()
            gold = [t for t in batch["mlm_labels"][b].tolist() if t != IGNORE_INDEX]
            guessed = [next(guesses) for _ in gold]
            rows.append([" ".join(piece(i) for i in ids), " ".join(map(piece, gold)), " ".join(map(piece, guessed)),
                         sum(g == p for g, p in zip(gold, guessed)), int(batch["nsp_label"][b]),
                         int(nsp[b].argmax())])
        return ["input", "masked pieces", "predicted pieces", "correct pieces", "is next", "predicted is next"], rows

    def reset(self, stage: str) -> None:
        for name in ("mlm_acc", "nsp_acc", "loss", "mlm_loss", "nsp_loss"):
            self.metric(stage, name).reset()

    def epoch_end(self, model, stage: str) -> None:
        if self.metric(stage, "loss").update_count == 0:
            return
        suffix = "_epoch" if stage == "train" else ""
        for name in ("loss", "mlm_loss", "nsp_loss"):
            model.log(f"{stage}/{name}{suffix}", self.metric(stage, name).compute(), sync_dist=True)
        model.log(f"{stage}/mlm_acc", self.metric(stage, "mlm_acc").compute(), sync_dist=True, prog_bar=stage == "val")
        model.log(f"{stage}/nsp_acc", self.metric(stage, "nsp_acc").compute(), sync_dist=True)
        self.reset(stage)
