"""Sequence regression (the adding problem): `regress(batch) -> (B,)` against `target` (B,), MSE.

The trivial baseline of a probe (predict the mean) has MSE = Var(target); the data module logs it
so a curve can be read against it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from seqbench.tasks.samples import first_rows

STAGES = ("train", "val", "test")


class Regression(nn.Module):
    name = "regression"
    method = "regress"
    directions = {"loss": "min", "mse": "min"}  # which way each val/ metric improves (seqbench.training.dashboard)

    @classmethod
    def from_spec(cls, spec) -> "Regression":
        return cls()

    def __init__(self) -> None:
        super().__init__()
        for stage in STAGES:
            setattr(self, f"{stage}_mse", MeanMetric())

    def count_tokens(self, batch: dict) -> int:
        lengths = batch.get("lengths")
        return int(lengths.sum()) if lengths is not None else int(batch["input"].shape[:2].numel())

    def step(self, model, batch: dict, stage: str) -> torch.Tensor:
        prediction = model.regress(batch)  # (B,)
        target = batch["target"].to(prediction.dtype)
        loss = F.mse_loss(prediction.float(), target.float())
        getattr(self, f"{stage}_mse").update(loss.detach(), weight=target.numel())
        if stage == "train":
            model.log("train/loss", loss, prog_bar=True)
        return loss

    def reset(self, stage: str) -> None:
        getattr(self, f"{stage}_mse").reset()

    def samples(self, model, batch: dict, n: int):
        """Target and prediction of the first `n` validation sequences."""
        batch = first_rows(batch, n)
        prediction = model.regress(batch).float()
        return ["target", "prediction", "squared error"], [
            [float(t), float(p), float((p - t) ** 2)] for t, p in zip(batch["target"].float(), prediction)]

    def epoch_end(self, model, stage: str) -> None:
        metric = getattr(self, f"{stage}_mse")
        if metric.update_count == 0:
            return
        value = metric.compute()
        suffix = "_epoch" if stage == "train" else ""
        model.log(f"{stage}/loss{suffix}", value, sync_dist=True)
        model.log(f"{stage}/mse", value, sync_dist=True, prog_bar=stage == "val")
        metric.reset()
