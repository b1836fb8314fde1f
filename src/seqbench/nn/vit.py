"""The Vision Transformer (Dosovitskiy et al. 2021): an image read as a sequence of patches.

    image (B, C, H, W) --cut into N = (H/P)(W/P) patches of P x P--> (B, N, C P²)
        --linear projection E--> (B, N, D)  ++ [CLS] in front, + learned positions (B, N + 1, D)
        --L pre-LN Transformer encoder blocks (no mask: every token sees every token)-->
        --LayerNorm, the [CLS] state (or the mean of the patch states)--> head --> logits (B, classes)

For a 28 x 28 digit and P = 7 the grid is 4 x 4:

    +----+----+----+----+
    |  1 |  2 |  3 |  4 |      token 0 is [CLS]; patch tokens are numbered in raster order
    +----+----+----+----+      (row by row, left to right), which is the order `patchify` uses
    |  5 |  6 |  7 |  8 |      and the order of the position table.
    ...

The projection E is a convolution with kernel = stride = P, the same map as a linear layer on
`patchify(x)` (with weight E.reshape(D, C P²)) but without materialising the patches. The encoder
is the project's own `TransformerStack` (seqbench.nn.transformer, SDPA attention), the same blocks
the text models use, with the ViT paper's choices: pre-LN, GELU, d_ff = 4D unless given.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from seqbench.errors import ConfigError
from seqbench.nn.attention import AttentionImpl
from seqbench.nn.transformer import TransformerStack


def patchify(images: Tensor, patch: int) -> Tensor:
    """(B, C, H, W) -> (B, N, C * P * P): patches in raster order, each flattened as (C, P, P)."""
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch)  # (B, C, gh, P, gw, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, gh, gw, C, P, P)
    return x.reshape(B, (H // patch) * (W // patch), C * patch * patch)  # (B, N, C P²)


def unpatchify(patches: Tensor, patch: int, channels: int, height: int, width: int) -> Tensor:
    """(B, N, C * P * P) -> (B, C, H, W), the inverse of `patchify`."""
    B = patches.size(0)
    gh, gw = height // patch, width // patch
    x = patches.reshape(B, gh, gw, channels, patch, patch)  # (B, gh, gw, C, P, P)
    x = x.permute(0, 3, 1, 4, 2, 5)  # (B, C, gh, P, gw, P)
    return x.reshape(B, channels, height, width)


def check_patch_size(height: int, width: int, patch: int) -> None:
    if patch < 1 or height % patch or width % patch:
        divisors = [p for p in range(1, min(height, width) + 1) if height % p == 0 and width % p == 0]
        raise ConfigError(f"model.patch_size={patch} does not divide the {height}x{width} images into whole "
                          f"patches ({height} % {patch} = {height % max(patch, 1)}, {width} % {patch} = "
                          f"{width % max(patch, 1)}); choose one of {', '.join(map(str, divisors))}.")


class VisionTransformer(nn.Module):
    def __init__(self, channels: int, height: int, width: int, num_classes: int, patch_size: int = 7,
                 d_model: int = 64, n_layer: int = 4, n_head: int = 4, d_ff: int | None = None,
                 dropout: float = 0.0, pooling: Literal["cls", "mean"] = "cls", head_hidden: int | None = None,
                 attn_impl: AttentionImpl = "sdpa") -> None:
        super().__init__()
        check_patch_size(height, width, patch_size)
        self.patch_size, self.grid = patch_size, (height // patch_size, width // patch_size)
        self.num_patches = self.grid[0] * self.grid[1]
        self.pooling = pooling
        self.patch_embed = nn.Conv2d(channels, d_model, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_patches + 1, d_model))
        self.dropout = nn.Dropout(dropout)
        self.encoder = TransformerStack(n_layer, d_model, n_head, d_ff, dropout, norm_first=True,
                                        activation="gelu", attn_impl=attn_impl)
        # the paper pre-trains with a one-hidden-layer tanh MLP head and fine-tunes with one linear layer
        self.head = (nn.Sequential(nn.Linear(d_model, head_hidden), nn.Tanh(), nn.Linear(head_hidden, num_classes))
                     if head_hidden else nn.Linear(d_model, num_classes))
        self.apply(self._init)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)  # timm's ViT init
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def tokens(self, images: Tensor) -> Tensor:
        """(B, C, H, W) -> encoder states (B, N + 1, D); index 0 is [CLS]."""
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, D, gh, gw) -> (B, D, N) -> (B, N, D)
        cls = self.cls_token.expand(x.size(0), -1, -1)  # (B, 1, D)
        x = torch.cat([cls, x], dim=1) + self.pos_embed  # (B, N + 1, D)
        return self.encoder(self.dropout(x))

    def forward(self, images: Tensor) -> Tensor:
        states = self.tokens(images)  # (B, N + 1, D)
        summary = states[:, 0] if self.pooling == "cls" else states[:, 1:].mean(1)  # (B, D)
        return self.head(summary)  # (B, classes)

    def attention_modules(self) -> list[nn.Module]:
        """The self-attention of each block, first to last (set `record_weights` on them for rollout)."""
        return [block.self_attn for block in self.encoder.blocks]
