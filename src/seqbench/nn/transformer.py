"""Transformer blocks (Vaswani et al. 2017) that serve as encoder, decoder and causal language model.

One block is self-attention, optionally cross-attention to an encoder's output, and a position-wise
feed-forward network, each wrapped in a residual connection with LayerNorm and dropout:

    post-LN (the paper, §3.1 and §5.4):   x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN  (GPT-2; Xiong et al. 2020):   x = x + Dropout(Sublayer(LayerNorm(x)))

Post-LN normalises the residual stream after every sublayer and needs a learning-rate warmup to
train deep stacks; pre-LN leaves the stream unnormalised (so a stack ends with one more LayerNorm)
and trains stably with less warmup. How a stack is used decides its masks, not its class:

    encoder           TransformerStack(cross_attention=False)   forward(x, key_padding_mask=src_pad)
    decoder           TransformerStack(cross_attention=True)    forward(y, memory, causal=True, ...)
    causal LM         TransformerStack(cross_attention=False)   forward(x, causal=True)
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

from seqbench.nn.attention import AttentionImpl, MultiHeadAttention

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2 at every position (§3.3); d_ff = 4 d_model in the paper."""

    def __init__(self, d_model: int, d_ff: int, activation: Literal["relu", "gelu"] = "relu", bias: bool = True):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
        self.fc_in = nn.Linear(d_model, d_ff, bias=bias)
        self.act = ACTIVATIONS[activation]()
        self.fc_out = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc_out(self.act(self.fc_in(x)))  # (B, T, C) -> (B, T, d_ff) -> (B, T, C)


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_ff: int | None = None, dropout: float = 0.1,
                 norm_first: bool = False, activation: Literal["relu", "gelu"] = "relu",
                 cross_attention: bool = False, bias: bool = True, attn_impl: AttentionImpl = "sdpa") -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout, bias, cross=False, impl=attn_impl)
        self.norm_self = nn.LayerNorm(d_model, bias=bias)
        self.cross_attn = None
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_head, dropout, bias, cross=True, impl=attn_impl)
            self.norm_cross = nn.LayerNorm(d_model, bias=bias)
        self.ffn = FeedForward(d_model, d_ff or 4 * d_model, activation, bias)
        self.norm_ffn = nn.LayerNorm(d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)  # "residual dropout" (§5.4): on each sublayer's output

    def residual(self, x: Tensor, norm: nn.LayerNorm, sublayer) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(norm(x)))
        return norm(x + self.dropout(sublayer(x)))

    def forward(self, x: Tensor, memory: Tensor | None = None, causal: bool = False,
                key_padding_mask: Tensor | None = None, memory_padding_mask: Tensor | None = None,
                cache: dict | None = None) -> Tensor:
        """x (B, T, C), memory (B, S, C) -> (B, T, C). Padding masks: True marks a padding position.
        `cache`: this block's {"self": {}, "cross": {}} when decoding step by step (`seqbench.nn.kv_cache`)."""
        self_cache, cross_cache = (None, None) if cache is None else (cache["self"], cache["cross"])
        x = self.residual(x, self.norm_self, lambda h: self.self_attn(h, causal=causal,
                                                                       key_padding_mask=key_padding_mask,
                                                                       cache=self_cache))
        if self.cross_attn is not None:
            x = self.residual(x, self.norm_cross, lambda h: self.cross_attn(h, memory,
                                                                             key_padding_mask=memory_padding_mask,
                                                                             cache=cross_cache))
        return self.residual(x, self.norm_ffn, self.ffn)

    def residual_projections(self) -> list[nn.Linear]:
        """The layers whose output is added to the residual stream (GPT-2 scales their init)."""
        attn = [self.self_attn] + ([self.cross_attn] if self.cross_attn is not None else [])
        return [a.out_proj for a in attn] + [self.ffn.fc_out]


class TransformerStack(nn.Module):
    """`n_layer` blocks, plus the final LayerNorm a pre-LN stack needs (post-LN output is normalised)."""

    def __init__(self, n_layer: int, d_model: int, n_head: int, d_ff: int | None = None, dropout: float = 0.1,
                 norm_first: bool = False, activation: Literal["relu", "gelu"] = "relu",
                 cross_attention: bool = False, bias: bool = True, attn_impl: AttentionImpl = "sdpa") -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_head, d_ff, dropout, norm_first, activation, cross_attention, bias, attn_impl)
            for _ in range(n_layer)
        )
        self.norm = nn.LayerNorm(d_model, bias=bias) if norm_first else nn.Identity()

    def forward(self, x: Tensor, memory: Tensor | None = None, causal: bool = False,
                key_padding_mask: Tensor | None = None, memory_padding_mask: Tensor | None = None,
                cache: list[dict] | None = None) -> Tensor:
        """`cache`: `new_cache(len(self.blocks))` filled by earlier steps; x then holds only the new tokens."""
        for i, block in enumerate(self.blocks):
            x = block(x, memory, causal, key_padding_mask, memory_padding_mask, None if cache is None else cache[i])
        return self.norm(x)

    def residual_projections(self) -> list[nn.Linear]:
        return [p for block in self.blocks for p in block.residual_projections()]
