"""GPT, the decoder-only Transformer language model (Radford et al. 2018, 2019), after nanoGPT.

    tokens (B, T) -> token embedding + learned position embedding -> dropout
                  -> n_layer pre-LN blocks (masked self-attention, GELU MLP) -> LayerNorm
                  -> linear head tied to the token embedding -> logits (B, T, V)

GPT-2 choices, each with its reason: pre-LN blocks and a final LayerNorm (GPT-2 §2.3) train deep
stacks without a long warmup; weights ~ N(0, 0.02); the projections that write into the residual
stream ~ N(0, 0.02 / sqrt(2 n_layer)), because every block adds two of them to the stream and its
variance would otherwise grow with depth (GPT-2 §2.3); the head shares the embedding matrix (Press &
Wolf 2017). Unlike nanoGPT the vocabulary is not padded to a multiple of 64: the padded logits would
take probability mass, and every family on a corpus must score the same vocabulary.

`features` returns the final LayerNorm's states, the input of both the LM head and a fine-tuning
head (GPT §3.2: the last token's state feeds the task's linear layer); with `input_dim` the model
reads feature vectors (B, T, F) through a linear map and has no LM head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqbench.nn.flops import attention_forward_flops, train_flops
from seqbench.nn.kv_cache import new_cache, past_length
from seqbench.nn.positions import LearnedPositions
from seqbench.nn.transformer import TransformerStack
from seqbench.nn.positions_scored import at_positions


@dataclass
class GPTConfig:
    vocab_size: int
    context: int = 256  # block size: the longest sequence, and the size of the position table
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0  # nanoGPT: 0 for pretraining, 0.1+ for small corpora that overfit
    bias: bool = True  # biases in Linear and LayerNorm; nanoGPT: False is a little better and faster
    attn_impl: str = "sdpa"  # "reference": softmax(QKᵀ/√d)V written out (slow, for study and tests)
    input_dim: int | None = None  # feature vectors instead of token ids (no vocabulary, no LM head)


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = (nn.Embedding(cfg.vocab_size, cfg.d_model) if cfg.input_dim is None
                        else nn.Linear(cfg.input_dim, cfg.d_model))
        self.pos_emb = LearnedPositions(cfg.context, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = TransformerStack(cfg.n_layer, cfg.d_model, cfg.n_head, 4 * cfg.d_model, cfg.dropout,
                                       norm_first=True, activation="gelu", bias=cfg.bias, attn_impl=cfg.attn_impl)
        self.lm_head = None
        if cfg.input_dim is None:
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
            self.lm_head.weight = self.tok_emb.weight  # weight tying (Press & Wolf 2017)
        self.apply(self._init_weights)
        for proj in self.blocks.residual_projections():
            nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def features(self, x: Tensor, causal: bool = True, key_padding_mask: Tensor | None = None,
                 cache: list[dict] | None = None) -> Tensor:
        """x (B, T) ids or (B, T, F) features -> states (B, T, C). A decoder-only model reads left to right.
        With `cache` (`new_cache()`, `seqbench.nn.kv_cache`) x holds only the tokens after those read."""
        if not causal:
            raise ValueError("GPT is decoder-only and reads left to right; use model=transformer or bert "
                             "for a bidirectional encoder")
        T = x.size(1)
        h = self.tok_emb(x) + self.pos_emb(T, past_length(cache))  # (B, T, C) + (T, C)
        return self.blocks(self.drop(h), causal=True, key_padding_mask=key_padding_mask, cache=cache)  # (B, T, C)

    def forward(self, tokens: Tensor, cache: list[dict] | None = None, positions: Tensor | None = None) -> Tensor:
        """tokens (B, T) -> logits (B, T, V); with `positions` (B, T) bool, the head at those alone: (N, V)."""
        return self.lm_head(at_positions(self.features(tokens, cache=cache), positions))

    def new_cache(self) -> list[dict]:
        return new_cache(self.cfg.n_layer)

    def last_logits(self, tokens: Tensor) -> Tensor:
        """tokens (B, T) -> logits (B, V) of the token after them (the head on the last state only)."""
        return self.lm_head(self.features(tokens)[:, -1])

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameters; `non_embedding` leaves out the position table (the tied token table is the head)."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.pos_emb.embedding.weight.numel() if non_embedding else n

    def flops_per_token(self, T: int | None = None) -> float:
        """Training FLOPs per token on windows of T tokens (default: the context); `seqbench.nn.flops`."""
        if self.lm_head is None:
            raise ValueError("FLOPs per token are counted for the language model (token ids), not feature input")
        return train_flops(attention_forward_flops(self.cfg.n_layer, self.cfg.d_model, 4 * self.cfg.d_model,
                                                   T or self.cfg.context, self.cfg.vocab_size))
