"""Word features from characters: a convolution over each word's characters, max-pooled (Ma & Hovy
2016). Without pre-trained embeddings the characters carry what a word id cannot — capitals, digits,
suffixes, and every word never seen in training — which is most of the gap to the CoNLL-2003 numbers
of Lample et al. (2016) with random embeddings."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class CharCNN(nn.Module):
    def __init__(self, num_chars: int, embedding_size: int = 25, channels: int = 50, kernel: int = 3,
                 padding_idx: int = 0) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_chars, embedding_size, padding_idx=padding_idx)
        self.conv = nn.Conv1d(embedding_size, channels, kernel, padding=kernel // 2)
        self.padding_idx = padding_idx
        self.output_size = channels

    def forward(self, chars: Tensor) -> Tensor:
        """chars (B, T, W) ids -> (B, T, channels); padding characters never win the max."""
        B, T, W = chars.shape
        pad = chars.reshape(B * T, 1, W) == self.padding_idx  # (B*T, 1, W)
        # padding characters read as the conv's own zero padding, whatever the table's pad row holds
        # (a model-wide uniform init overwrites it), so a word's features do not depend on the batch
        x = self.embed(chars.reshape(B * T, W)).transpose(1, 2).masked_fill(pad, 0.0)  # (B*T, E, W)
        h = self.conv(x)  # (B*T, C, W)
        h = h.masked_fill(pad, float("-inf")).amax(dim=2)  # (B*T, C)
        h = torch.where(torch.isinf(h), torch.zeros_like(h), h)  # a padding word (all pads) -> 0
        return h.reshape(B, T, -1)  # (B, T, C)
