"""The convolutional family: a small VGG-style CNN (`seqbench.nn.cnn`), for images only.

It reads `batch["image"]` (B, C, H, W) and supports only the `image` task; any other pairing
(`model=cnn data=ptb`) fails before training with the list of tasks it supports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from seqbench.data.spec import TaskSpec
from seqbench.models.base import SeqModel
from seqbench.nn.cnn import SmallCNN


class ConvNetModel(SeqModel):
    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "epoch",
        scheduler_monitor: str | None = None,
        widths: list[int] | tuple[int, ...] = (32, 64),
        convs_per_block: int = 2,
        hidden: int = 128,
        dropout: float = 0.25,
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        extras = spec.extras or {}
        self.net = SmallCNN(extras["channels"], extras["height"], extras["width"], spec.num_classes,
                            tuple(widths), convs_per_block, hidden, dropout)

    def classify_image(self, batch: dict) -> torch.Tensor:
        return self.net(batch["image"])  # (B, classes)
