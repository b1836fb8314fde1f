"""The Transformer of Vaswani et al. (2017) as a language model: its decoder without cross-attention.

    tokens (B, T) -> embedding x √d_model + sinusoidal positions -> dropout
                  -> n_layer blocks of masked self-attention + ReLU FFN, post-LN (or pre-LN)
                  -> linear output tied to the embedding -> logits (B, T, V)

The paper's choices, with their sections: embeddings multiplied by √d_model (§3.4) so they are not
drowned by the unit-scale positional signal; sinusoidal positions (§3.5); residual dropout on every
sublayer output and on the embedding sum (§5.4, P_drop = 0.1); the output projection shares the
embedding matrix (§3.4, after Press & Wolf 2017). Weights are Xavier-uniform as in PyTorch's
nn.Transformer and the tensor2tensor code, the embedding N(0, d_model^-1/2) (fairseq) so that
after the √d_model scale it has unit variance. The same blocks with cross-attention make the
translation decoder, so this family grows into the encoder-decoder without a second implementation.

`features` returns the last block's states instead of logits, causal or not and with key padding, so
the same network serves as the paper's encoder for classification and tagging; with `input_dim` it
reads feature vectors (B, T, F) through a linear map instead of an embedding (the adding problem).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from seqbench.nn.attention import AttentionImpl
from seqbench.nn.flops import attention_forward_flops, train_flops
from seqbench.nn.kv_cache import new_cache, past_length
from seqbench.nn.positions import LearnedPositions, SinusoidalPositions
from seqbench.nn.sampling import sample_next
from seqbench.nn.transformer import TransformerStack
from seqbench.nn.positions_scored import at_positions


class TransformerLM(nn.Module):
    def __init__(self, vocab_size: int, context: int = 256, n_layer: int = 4, n_head: int = 4, d_model: int = 128,
                 d_ff: int | None = None, dropout: float = 0.1, norm_first: bool = False,
                 positions: Literal["sinusoidal", "learned"] = "sinusoidal", tie_weights: bool = True,
                 attn_impl: AttentionImpl = "sdpa", bias: bool = True, input_dim: int | None = None) -> None:
        super().__init__()
        self.context, self.d_model, self.n_layer = context, d_model, n_layer
        self.d_ff, self.vocab_size = d_ff or 4 * d_model, vocab_size
        # token ids -> embedding; feature vectors -> a linear map (no vocabulary, so no LM head)
        self.embedding = nn.Embedding(vocab_size, d_model) if input_dim is None else nn.Linear(input_dim, d_model)
        if positions == "sinusoidal":
            self.positions = SinusoidalPositions(d_model, context)
        elif positions == "learned":
            self.positions = LearnedPositions(context, d_model)
        else:
            raise ValueError(f"unknown positions {positions!r}; choose 'sinusoidal' or 'learned'")
        self.drop = nn.Dropout(dropout)
        self.stack = TransformerStack(n_layer, d_model, n_head, d_ff or 4 * d_model, dropout, norm_first, "relu",
                                      cross_attention=False, bias=bias, attn_impl=attn_impl)
        self.head = nn.Linear(d_model, vocab_size, bias=False) if input_dim is None else None
        self.reset_parameters()
        if tie_weights and self.head is not None:
            self.head.weight = self.embedding.weight

    def reset_parameters(self) -> None:
        for name, p in self.stack.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias") and "norm" not in name:
                nn.init.zeros_(p)
        for table in (self.embedding, self.head):
            if table is not None:
                nn.init.normal_(table.weight, mean=0.0, std=self.d_model**-0.5)
        if isinstance(self.embedding, nn.Linear):
            nn.init.zeros_(self.embedding.bias)
        if isinstance(self.positions, LearnedPositions):
            nn.init.normal_(self.positions.embedding.weight, mean=0.0, std=0.02)

    def features(self, x: Tensor, causal: bool = True, key_padding_mask: Tensor | None = None,
                 cache: list[dict] | None = None) -> Tensor:
        """x (B, T) ids or (B, T, F) features -> states (B, T, C); `key_padding_mask` (B, T), True = padding.
        With `cache` (`new_cache()`, `seqbench.nn.kv_cache`) x holds only the tokens after those read."""
        T = x.size(1)
        h = self.embedding(x) * math.sqrt(self.d_model) + self.positions(T, past_length(cache))  # (B, T, C) + (T, C)
        return self.stack(self.drop(h), causal=causal, key_padding_mask=key_padding_mask, cache=cache)  # (B, T, C)

    def forward(self, tokens: Tensor, cache: list[dict] | None = None, positions: Tensor | None = None) -> Tensor:
        """tokens (B, T) -> logits (B, T, V); with `positions` (B, T) bool, the head at those alone: (N, V)."""
        return self.head(at_positions(self.features(tokens, causal=True, cache=cache), positions))

    def new_cache(self) -> list[dict]:
        return new_cache(self.n_layer)

    def last_logits(self, tokens: Tensor) -> Tensor:
        """tokens (B, T) -> logits (B, V) of the token after them (the head on the last state only)."""
        return self.head(self.features(tokens, causal=True)[:, -1])

    def flops_per_token(self, T: int | None = None) -> float:
        """Training FLOPs per token on windows of T tokens (default: the context); `seqbench.nn.flops`.
        The tied or untied head costs the same d x V matmul."""
        if self.head is None:
            raise ValueError("FLOPs per token are counted for the language model (token ids), not feature input")
        return train_flops(attention_forward_flops(self.n_layer, self.d_model, self.d_ff, T or self.context,
                                                   self.vocab_size))


@torch.no_grad()
def generate_windowed(net: nn.Module, prompt: Tensor, max_new_tokens: int, context: int,
                      temperature: float = 1.0, top_k: int | None = None, use_cache: bool = True) -> Tensor:
    """Sample from a fixed-context LM: prompt (B, T) -> (B, T + max_new_tokens).

    Each new token reads the last `context` tokens, so a prompt or a sample longer than the context
    slides along, as in nanoGPT. With `use_cache` (`net(tokens, cache)`, `net.new_cache()`) a step
    reads only its new token and the keys and values kept from the earlier ones, while the sequence
    fits in the context. Once the window slides, every kept token's absolute position (learned or
    sinusoidal) shifts by one and its keys and values change, so from then on each step re-reads the
    whole window, exactly as without the cache: the tokens are the same either way.

        tokens      p p p s s s s s s               context = 6
        step reads  [p p p]                        the prompt, filling the cache
                          [s]   [s]   [s]          one token each, positions 3, 4, 5
                      [p p s s s s]                  window full: re-read at positions 0..5
    """
    tokens, cache = prompt, None
    for _ in range(max_new_tokens):
        if use_cache and cache is not None and past_length(cache) < context:
            logits = net(tokens[:, -1:], cache=cache)  # (B, 1, V): the new token only
        else:
            cache = net.new_cache() if use_cache else None
            logits = net(tokens[:, -context:], cache=cache)  # (B, <=context, V)
        tokens = torch.cat([tokens, sample_next(logits[:, -1], temperature, top_k)], dim=1)  # (B, T + 1)
    return tokens
