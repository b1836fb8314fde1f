"""The Transformer encoder-decoder of Vaswani et al. (2017), from the blocks of `seqbench.nn.transformer`.

    source (B, S) -> embed x √d + positions -> encoder stack (self-attention, padding keys masked)
                                                 -> memory (B, S, C)
    target (B, T) -> embed x √d + positions -> decoder stack (causal self-attention,
                     cross-attention to memory, source padding masked) -> W_out -> logits (B, T, V)

Embeddings (§3.4): `share_embeddings` uses one table for source, target and output (the paper, on
a joint BPE vocabulary; needs `data.joint_vocab=true`); `tie_output` ties only the target
embedding and the output projection (Press & Wolf 2017). Targets are right-padded, so under the
causal mask a real target position never reads a padding key and needs no target padding mask.

`cross_attention_weights` recomputes, for every decoder layer, the softmax(QKᵀ/√d_k) that the
cross-attention used (B, heads, T, S): the alignment pictures read it. It hooks the inputs of each
cross-attention module, so the fast SDPA path stays as it is.

Decoding reads one token per step and keeps the decoder's keys and values (`decode(..., cache)`,
`seqbench.nn.kv_cache`); with a cache the new tokens' positions continue from the cached length.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from seqbench.nn.attention import AttentionImpl, MultiHeadAttention, attention_mask
from seqbench.nn.kv_cache import past_length
from seqbench.nn.positions import LearnedPositions, SinusoidalPositions
from seqbench.nn.transformer import TransformerStack


class TransformerSeq2Seq(nn.Module):
    def __init__(self, src_vocab: int, tgt_vocab: int, max_len: int = 256, n_layer: int = 3,
                 n_dec_layer: int | None = None, n_head: int = 8, d_model: int = 256, d_ff: int | None = None,
                 dropout: float = 0.1, norm_first: bool = False,
                 positions: Literal["sinusoidal", "learned"] = "sinusoidal", share_embeddings: bool = False,
                 tie_output: bool = True, attn_impl: AttentionImpl = "sdpa", bias: bool = True) -> None:
        super().__init__()
        if share_embeddings and src_vocab != tgt_vocab:
            raise ValueError("shared source/target embeddings need one joint vocabulary (data.joint_vocab=true)")
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = self.src_embed if share_embeddings else nn.Embedding(tgt_vocab, d_model)
        if positions == "sinusoidal":
            self.positions: nn.Module = SinusoidalPositions(d_model, max_len)
        elif positions == "learned":
            self.positions = LearnedPositions(max_len, d_model)
        else:
            raise ValueError(f"unknown positions {positions!r}; choose 'sinusoidal' or 'learned'")
        self.drop = nn.Dropout(dropout)
        d_ff = d_ff or 4 * d_model
        self.encoder = TransformerStack(n_layer, d_model, n_head, d_ff, dropout, norm_first, "relu", False, bias,
                                        attn_impl)
        self.decoder = TransformerStack(n_dec_layer or n_layer, d_model, n_head, d_ff, dropout, norm_first, "relu",
                                        True, bias, attn_impl)
        self.head = nn.Linear(d_model, tgt_vocab, bias=False)
        self.reset_parameters()
        if share_embeddings or tie_output:
            self.head.weight = self.tgt_embed.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform matrices (tensor2tensor, nn.Transformer); embeddings N(0, d^-1/2) (fairseq)."""
        for stack in (self.encoder, self.decoder):
            for name, p in stack.named_parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                elif name.endswith("bias") and "norm" not in name:
                    nn.init.zeros_(p)
        for table in {id(t): t for t in (self.src_embed, self.tgt_embed, self.head)}.values():
            nn.init.normal_(table.weight, mean=0.0, std=self.d_model**-0.5)

    def embed(self, table: nn.Embedding, ids: Tensor, offset: int = 0) -> Tensor:
        """ids (B, T) at positions offset .. offset + T - 1 -> (B, T, C)."""
        return self.drop(table(ids) * math.sqrt(self.d_model) + self.positions(ids.size(1), offset))

    def encode(self, src: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        padding = torch.arange(src.size(1), device=src.device)[None, :] >= lengths[:, None]  # (B, S) True = pad
        memory = self.encoder(self.embed(self.src_embed, src), key_padding_mask=padding)  # (B, S, C)
        return {"memory": memory, "padding": padding}

    def decode(self, memory: dict[str, Tensor], tgt_in: Tensor, cache: list[dict] | None = None) -> Tensor:
        """tgt_in (B, T) -> logits (B, T, V). With `cache` (`seqbench.nn.kv_cache`), tgt_in holds only the
        tokens after those already read into it, and their keys and values are added to it."""
        x = self.embed(self.tgt_embed, tgt_in, past_length(cache))
        y = self.decoder(x, memory["memory"], causal=True, memory_padding_mask=memory["padding"],
                         cache=cache)  # (B, T, C)
        return self.head(y)  # (B, T, V)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(self.encode(src, lengths), tgt_in)

    @torch.no_grad()
    def cross_attention_weights(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """-> (B, n_dec_layer, n_head, T, S): each decoder layer's cross-attention weights."""
        seen: list[tuple[MultiHeadAttention, Tensor, Tensor, Tensor]] = []
        hooks = [block.cross_attn.register_forward_hook(
            lambda mod, args, kwargs, out: seen.append((mod, args[0], args[1], kwargs["key_padding_mask"])),
            with_kwargs=True) for block in self.decoder.blocks]
        try:
            self.forward(src, lengths, tgt_in)
        finally:
            for hook in hooks:
                hook.remove()
        maps = []
        for mod, x, mem, padding in seen:
            B, T, C = x.shape
            S, hs = mem.size(1), C // mod.n_head
            q = mod.q_proj(x).view(B, T, mod.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
            k = mod.kv_proj(mem).split(C, dim=2)[0].view(B, S, mod.n_head, hs).transpose(1, 2)  # (B, nh, S, hs)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, S)
            allowed = attention_mask(T, S, key_padding_mask=padding, device=x.device)  # (B, 1, 1, S)
            maps.append(scores.masked_fill(~allowed, float("-inf")).softmax(-1))
        return torch.stack(maps, dim=1)
