"""T5's encoder-decoder (Raffel et al. 2020, §2.1), the differences from Vaswani et al. written out.

    - RMS norm without bias or mean subtraction: y = g · x / sqrt(mean(x²) + ε)      (`RMSNorm`)
    - pre-norm residual blocks, dropout on each sublayer's output, a final norm per stack
    - no absolute positions: a learned scalar bias b(bucket(j - i)) per head is added to the
      self-attention logits, computed once per stack and shared by its layers; cross-attention has none
    - buckets: exact for small offsets, logarithmic up to `max_distance`, the same bucket beyond it;
      the encoder distinguishes left from right (half the buckets each), the decoder only looks back
    - no biases anywhere, no 1/√d_k scale (folded into the initialisation of W_Q, as in Mesh TF)
    - one embedding table for encoder, decoder and output, the decoder output scaled by d_model^-1/2
      before the tied projection

Text-to-text: the family prepends a task prefix ("translate German to English: ") to every source
(`seqbench.models.t5`), and `seqbench.data.span_corruption` poses the pre-training objective on
monolingual text as the same text-to-text task.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqbench.nn.kv_cache import past_length


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def relative_bucket(offset: Tensor, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> Tensor:
    """offset = key position - query position -> bucket id in [0, num_buckets) (T5's mesh-tf function)."""
    bucket = torch.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (offset > 0).long() * num_buckets  # right of the query: the upper half
        distance = offset.abs()
    else:
        distance = (-offset).clamp_min(0)  # a decoder never looks right
    exact = num_buckets // 2
    log_bucket = exact + (torch.log(distance.float().clamp_min(1) / exact) / math.log(max_distance / exact)
                          * (num_buckets - exact)).long()
    log_bucket = log_bucket.clamp_max(num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, log_bucket)


class RelativePositionBias(nn.Module):
    def __init__(self, n_head: int, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> None:
        super().__init__()
        self.bidirectional, self.num_buckets, self.max_distance = bidirectional, num_buckets, max_distance
        self.bias = nn.Embedding(num_buckets, n_head)

    def forward(self, T: int, S: int, device) -> Tensor:
        """-> (1, nh, T, S) additive logits for queries 0..T-1 (the last T of S positions) and keys 0..S-1."""
        q = torch.arange(S - T, S, device=device)[:, None]
        k = torch.arange(S, device=device)[None, :]
        buckets = relative_bucket(k - q, self.bidirectional, self.num_buckets, self.max_distance)  # (T, S)
        return self.bias(buckets).permute(2, 0, 1).unsqueeze(0)  # (T, S, nh) -> (1, nh, T, S)


class T5Attention(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_kv: int, dropout: float, cross: bool = False) -> None:
        super().__init__()
        self.n_head, self.d_kv, self.dropout, self.cross = n_head, d_kv, dropout, cross
        self.q = nn.Linear(d_model, n_head * d_kv, bias=False)
        self.k = nn.Linear(d_model, n_head * d_kv, bias=False)
        self.v = nn.Linear(d_model, n_head * d_kv, bias=False)
        self.o = nn.Linear(n_head * d_kv, d_model, bias=False)
        self.keep_weights = False  # the alignment pictures ask for the softmax weights
        self.weights: Tensor | None = None

    def forward(self, x: Tensor, kv: Tensor, bias: Tensor, cache: dict | None = None) -> Tensor:
        """x (B, T, C), kv (B, S, C), bias (B or 1, nh, T, S) with -inf where not allowed -> (B, T, C).

        `cache` (`seqbench.nn.kv_cache`): self-attention appends the new tokens' keys and values to the
        kept ones (kv is then x, the new tokens only); cross-attention projects kv once and keeps it."""
        B, T, _ = x.shape

        def heads(t: Tensor) -> Tensor:
            return t.view(B, -1, self.n_head, self.d_kv).transpose(1, 2)  # (B, S, nh * dk) -> (B, nh, S, dk)

        q = heads(self.q(x))  # (B, nh, T, dk)
        if self.cross and cache is not None and "k" in cache:
            k, v = cache["k"], cache["v"]  # the encoder output, projected at the first step
        else:
            k, v = heads(self.k(kv)), heads(self.v(kv))  # (B, nh, S, dk)
            if cache is not None and "k" in cache:  # self-attention: the tokens read before come first
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        p = self.dropout if self.training else 0.0
        if self.keep_weights:
            self.weights = torch.softmax(q @ k.transpose(-2, -1) + bias, dim=-1)  # (B, nh, T, S)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=p, scale=1.0)
        return self.o(y.transpose(1, 2).reshape(B, T, self.n_head * self.d_kv))  # (B, T, nh * dk) -> (B, T, C)


class T5Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_kv: int, d_ff: int, dropout: float, cross: bool) -> None:
        super().__init__()
        self.self_norm, self.self_attn = RMSNorm(d_model), T5Attention(d_model, n_head, d_kv, dropout)
        self.cross_norm = RMSNorm(d_model) if cross else None
        self.cross_attn = T5Attention(d_model, n_head, d_kv, dropout, cross=True) if cross else None
        self.ff_norm = RMSNorm(d_model)
        self.wi, self.wo = nn.Linear(d_model, d_ff, bias=False), nn.Linear(d_ff, d_model, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, bias: Tensor, memory: Tensor | None = None, memory_bias: Tensor | None = None,
                cache: dict | None = None):
        self_cache, cross_cache = (None, None) if cache is None else (cache["self"], cache["cross"])
        h = self.self_norm(x)
        x = x + self.drop(self.self_attn(h, h, bias, self_cache))
        if self.cross_attn is not None:
            x = x + self.drop(self.cross_attn(self.cross_norm(x), memory, memory_bias, cross_cache))
        return x + self.drop(self.wo(self.drop(F.relu(self.wi(self.ff_norm(x))))))


class T5Stack(nn.Module):
    def __init__(self, n_layer: int, d_model: int, n_head: int, d_kv: int, d_ff: int, dropout: float,
                 decoder: bool, num_buckets: int, max_distance: int) -> None:
        super().__init__()
        self.decoder = decoder
        self.position_bias = RelativePositionBias(n_head, not decoder, num_buckets, max_distance)
        self.blocks = nn.ModuleList(T5Block(d_model, n_head, d_kv, d_ff, dropout, decoder) for _ in range(n_layer))
        self.norm = RMSNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, padding: Tensor | None = None, memory: Tensor | None = None,
                memory_padding: Tensor | None = None, cache: list[dict] | None = None) -> Tensor:
        """x (B, T, C) -> (B, T, C). With `cache` (decoding, `seqbench.nn.kv_cache`) x holds the T tokens
        after the P already read: their queries are the last T of S = P + T positions, so a step
        computes only its own row of the position bias (1, nh, 1, S), never the earlier rows again."""
        T = x.size(1)
        S = past_length(cache) + T
        bias = self.position_bias(T, S, x.device)  # (1, nh, T, S), shared by every layer
        if self.decoder:
            causal = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)
            bias = bias.masked_fill(~causal, float("-inf"))
        if padding is not None:
            bias = bias.masked_fill(padding[:, None, None, :], float("-inf"))  # (B, nh, T, S)
        memory_bias = None
        if memory is not None:
            memory_bias = torch.zeros(memory.size(0), 1, 1, memory.size(1), device=x.device)
            if memory_padding is not None:
                memory_bias = memory_bias.masked_fill(memory_padding[:, None, None, :], float("-inf"))
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, bias, memory, memory_bias, None if cache is None else cache[i])
        return self.drop(self.norm(x))


class T5(nn.Module):
    def __init__(self, vocab_size: int, n_layer: int = 3, n_dec_layer: int | None = None, n_head: int = 4,
                 d_model: int = 256, d_kv: int = 64, d_ff: int = 1024, dropout: float = 0.1,
                 num_buckets: int = 32, max_distance: int = 128) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.encoder = T5Stack(n_layer, d_model, n_head, d_kv, d_ff, dropout, False, num_buckets, max_distance)
        self.decoder = T5Stack(n_dec_layer or n_layer, d_model, n_head, d_kv, d_ff, dropout, True, num_buckets,
                               max_distance)
        self.reset_parameters(n_head, d_kv, d_ff)

    def reset_parameters(self, n_head: int, d_kv: int, d_ff: int) -> None:
        """Mesh TF / HF T5 initialisation: the attention scale lives in W_Q's std."""
        d = self.d_model
        nn.init.normal_(self.embed.weight, std=1.0)
        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 2)[-2] if name.count(".") else name
            std = {"q": (d * d_kv) ** -0.5, "k": d**-0.5, "v": d**-0.5, "o": (n_head * d_kv) ** -0.5,
                   "wi": d**-0.5, "wo": d_ff**-0.5, "bias": 1.0}.get(leaf)
            if std is not None and p.dim() == 2:
                nn.init.normal_(p, std=std)

    def encode(self, src: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        padding = torch.arange(src.size(1), device=src.device)[None, :] >= lengths[:, None]  # (B, S) True = pad
        return {"memory": self.encoder(self.embed(src), padding), "padding": padding}

    def decode(self, memory: dict[str, Tensor], tgt_in: Tensor, cache: list[dict] | None = None) -> Tensor:
        """tgt_in (B, T) -> logits (B, T, V); with `cache`, only the tokens after those already read."""
        y = self.decoder(self.embed(tgt_in), memory=memory["memory"], memory_padding=memory["padding"], cache=cache)
        return (y * self.d_model**-0.5) @ self.embed.weight.t()  # tied output (B, T, V)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(self.encode(src, lengths), tgt_in)

    @torch.no_grad()
    def cross_attention_weights(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """-> (B, n_dec_layer, n_head, T, S): each decoder layer's cross-attention weights."""
        modules = [block.cross_attn for block in self.decoder.blocks]
        for m in modules:
            m.keep_weights = True
        try:
            self.forward(src, lengths, tgt_in)
            return torch.stack([m.weights for m in modules], dim=1)
        finally:
            for m in modules:
                m.keep_weights, m.weights = False, None
