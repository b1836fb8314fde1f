"""The attention of the recurrent encoder-decoders, written out: one query per decoder step.

    bahdanau       e_j = vᵀ tanh(W q + U k_j)         (Bahdanau et al. 2015, "additive"; q = s_{i-1})
    luong_dot      e_j = qᵀ k_j                       (Luong et al. 2015, "dot"; q = h_i)
    luong_general  e_j = qᵀ W k_j                     (Luong et al. 2015, "general")
    scaled_dot     e_j = qᵀ k_j / √d                  (Vaswani et al. 2017, one head)

    α_j = softmax_j(e_j) over the real source positions only,   c = Σ_j α_j k_j

Padding positions get e_j = -inf, hence α_j = 0 exactly, and the weights of the real positions sum
to one; a sentence's context is the same whatever it is batched with. The part of the score that
depends only on the source (U k_j for additive, W k_j for general) is computed once per sentence
by `prepare`, not at every decoder step.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

Scorer = Literal["bahdanau", "luong_dot", "luong_general", "scaled_dot"]
SCORERS = ("bahdanau", "luong_dot", "luong_general", "scaled_dot")


class SourceAttention(nn.Module):
    def __init__(self, kind: Scorer, query_size: int, key_size: int, attention_size: int | None = None) -> None:
        super().__init__()
        if kind not in SCORERS:
            raise ValueError(f"unknown attention {kind!r}; choose one of {', '.join(SCORERS)}")
        if kind in ("luong_dot", "scaled_dot") and query_size != key_size:
            raise ValueError(f"{kind} attention needs queries and keys of one size, got {query_size} and {key_size}")
        self.kind = kind
        if kind == "bahdanau":
            attention_size = attention_size or query_size
            self.query_proj = nn.Linear(query_size, attention_size, bias=False)  # W
            self.key_proj = nn.Linear(key_size, attention_size)  # U (its bias is the b of the tanh)
            self.v = nn.Linear(attention_size, 1, bias=False)
        elif kind == "luong_general":
            self.key_proj = nn.Linear(key_size, query_size, bias=False)  # W, applied to the keys once

    def prepare(self, keys: Tensor) -> Tensor:
        """keys (B, S, K) -> what the score reads for them: U k (B, S, A), W k (B, S, Q) or k itself."""
        return self.key_proj(keys) if self.kind in ("bahdanau", "luong_general") else keys

    def scores(self, query: Tensor, prepared: Tensor) -> Tensor:
        """query (B, Q), prepared keys (B, S, .) -> scores e (B, S)."""
        if self.kind == "bahdanau":
            hidden = torch.tanh(self.query_proj(query)[:, None, :] + prepared)  # (B, 1, A) + (B, S, A)
            return self.v(hidden).squeeze(-1)  # (B, S, 1) -> (B, S)
        e = torch.bmm(prepared, query.unsqueeze(-1)).squeeze(-1)  # (B, S, Q) x (B, Q, 1) -> (B, S)
        return e / math.sqrt(query.size(-1)) if self.kind == "scaled_dot" else e

    def forward(self, query: Tensor, prepared: Tensor, values: Tensor, padding: Tensor) -> tuple[Tensor, Tensor]:
        """-> context (B, K) and weights α (B, S); `padding` (B, S) is True at padding positions."""
        e = self.scores(query, prepared).masked_fill(padding, float("-inf"))
        weights = torch.softmax(e.float(), dim=-1).to(values.dtype)  # (B, S)
        context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, 1, S) x (B, S, K) -> (B, K)
        return context, weights
