"""Position information for attention, which is otherwise blind to order.

Sinusoidal (Vaswani et al. 2017, §3.5): no parameters, defined for any length,

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

so PE(pos + k) is a linear function of PE(pos) for every offset k, which the paper hoped would let a
model attend by relative position. Learned (GPT, GPT-2): one trained vector per position up to a
fixed maximum, an `nn.Embedding`, so `num_params(non_embedding=True)` leaves it out as nanoGPT does.

Both return (T, d_model) for positions offset .. offset + T - 1, to be added to (B, T, d_model)
token embeddings by broadcasting.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """(length, d_model) float32 table of the formula above (d_model even)."""
    if d_model % 2:
        raise ValueError(f"sinusoidal positions need an even d_model, got {d_model}")
    pos = torch.arange(length, dtype=torch.float32)[:, None]  # (L, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))  # (d/2,)
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(pos * inv_freq)  # (L, d/2)
    table[:, 1::2] = torch.cos(pos * inv_freq)
    return table


class SinusoidalPositions(nn.Module):
    def __init__(self, d_model: int, max_len: int = 1024) -> None:
        super().__init__()
        self.d_model = d_model
        # not persistent: a function of the shape, so checkpoints do not carry it and any length works
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, T: int, offset: int = 0) -> Tensor:
        if offset + T > self.table.size(0):  # longer than ever seen: extend the table once
            self.table = sinusoidal_table(2 * (offset + T), self.d_model).to(self.table)
        return self.table[offset : offset + T]  # (T, d_model)


class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, T: int, offset: int = 0) -> Tensor:
        if offset + T > self.max_len:
            raise ValueError(f"a sequence of {offset + T} positions is longer than the {self.max_len} learned "
                             f"positions (model.context); crop the input or train with a longer context")
        return self.embedding(torch.arange(offset, offset + T, device=self.embedding.weight.device))  # (T, d_model)
