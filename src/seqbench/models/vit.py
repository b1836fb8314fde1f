"""The Vision Transformer family (`seqbench.nn.vit`): patches as tokens, for images only.

It reads `batch["image"]` (B, C, H, W) and supports only the `image` task; `model=vit data=ptb`
fails before training with the list of tasks it supports, and a patch size that does not divide
the image fails with the numbers. Trained from scratch on small data a ViT lacks the CNN's
built-in locality and translation equivariance (the paper's §4.2), so its recipe leans on
augmentation, AdamW with warmup and cosine decay (conf/model/vit.yaml).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

from seqbench.data.spec import TaskSpec
from seqbench.models.base import SeqModel
from seqbench.nn.vit import VisionTransformer


class ViTModel(SeqModel):
    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "step",
        scheduler_monitor: str | None = None,
        patch_size: int | None = None,
        d_model: int = 64,
        n_layer: int = 4,
        n_head: int = 4,
        d_ff: int | None = None,
        dropout: float = 0.0,
        pooling: Literal["cls", "mean"] = "cls",
        head_hidden: int | None = None,
        attn_impl: Literal["sdpa", "reference"] = "sdpa",
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        extras = spec.extras or {}
        # Unset, the image is cut into a 4 x 4 grid (16 tokens): patch 7 on MNIST's 28 x 28, 8 on CIFAR-10's
        # 32 x 32, so `model=vit` runs on either corpus; a finer grid costs quadratically more attention.
        patch_size = patch_size or max(1, extras["height"] // 4)
        self.net = VisionTransformer(extras["channels"], extras["height"], extras["width"], spec.num_classes,
                                     patch_size, d_model, n_layer, n_head, d_ff, dropout, pooling, head_hidden,
                                     attn_impl)

    def classify_image(self, batch: dict) -> torch.Tensor:
        return self.net(batch["image"])  # (B, classes)

    def param_groups(self, weight_decay: float) -> list[dict]:
        """As the base, but the [CLS] token and the position table are not decayed either (timm's ViT)."""
        skip = {id(self.net.cls_token), id(self.net.pos_embed)}
        groups = super().param_groups(weight_decay)
        moved = [p for p in groups[0]["params"] if id(p) in skip]
        groups[0]["params"] = [p for p in groups[0]["params"] if id(p) not in skip]
        groups[1]["params"] = groups[1]["params"] + moved
        return groups
