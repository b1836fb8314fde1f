"""Multi-head scaled dot-product attention (Vaswani et al. 2017, §3.2), fast path beside the reference.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
    MultiHead(x, m)    = Concat(head_1, ..., head_h) W_O,   head_i = Attention(x W_Q,i, m W_K,i, m W_V,i)

Self-attention reads its own sequence (m = x); cross-attention, a decoder reading an encoder, reads
another one (m = the encoder output, with its own padding). Both run through one function that is
either `F.scaled_dot_product_attention` (flash / memory-efficient kernels on GPU, a fused kernel on
CPU) or `reference_attention`, the formula written out. The tests check that the two agree in outputs
and gradients, for every mask below.

Masks are boolean and say where query i MAY look at key j (True = allowed, SDPA's convention). Key
padding arrives the other way round, as in `nn.MultiheadAttention`: True marks a padding key.

    causal (T = 4)         key padding (k3 is padding)      causal + key padding
         k0 k1 k2 k3             k0 k1 k2 k3                     k0 k1 k2 k3
     q0   1  .  .  .         q0   1  1  1  .                 q0   1  .  .  .
     q1   1  1  .  .         q1   1  1  1  .                 q1   1  1  .  .
     q2   1  1  1  .         q2   1  1  1  .                 q2   1  1  1  .
     q3   1  1  1  1         q3   1  1  1  .                 q3   1  1  1  .

A query row with no allowed key (a padding query under left padding) outputs zeros in both paths,
which is what SDPA returns for such rows; a softmax over nothing would otherwise be NaN.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

AttentionImpl = Literal["sdpa", "reference"]


def attention_mask(T: int, S: int, causal: bool = False, key_padding_mask: Tensor | None = None,
                   device: torch.device | None = None) -> Tensor | None:
    """Boolean 'allowed' mask broadcastable to (B, nh, T, S), or None when every key is allowed.

    Causal masking aligns the last query with the last key, so a query never sees a key to its right
    (with T == S, the usual lower triangle).
    """
    allowed = None
    if causal:
        allowed = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)  # (T, S)
    if key_padding_mask is not None:
        keys = ~key_padding_mask.bool()[:, None, None, :]  # (B, S) -> (B, 1, 1, S)
        allowed = keys if allowed is None else allowed & keys  # (B, 1, T, S)
    return allowed


def attention_weights(q: Tensor, k: Tensor, allowed: Tensor | None = None) -> Tensor:
    """softmax(Q Kᵀ / √d_k): q (B, nh, T, hs), k (B, nh, S, hs) -> (B, nh, T, S), rows summing to 1."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, hs) x (B, nh, hs, S) -> (B, nh, T, S)
    if allowed is not None:
        has_key = allowed.any(dim=-1, keepdim=True)  # (.., T, 1): rows with at least one allowed key
        # a row without any key is left unmasked (finite softmax) and zeroed below, as SDPA does
        att = att.masked_fill(~(allowed | ~has_key), float("-inf"))
    att = F.softmax(att, dim=-1)
    if allowed is not None:
        att = att * has_key
    return att


def reference_attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None,
                        dropout_p: float = 0.0, training: bool = False) -> Tensor:
    """softmax(Q Kᵀ / √d_k) V, written out. q (B, nh, T, hs), k and v (B, nh, S, hs) -> (B, nh, T, hs)."""
    att = F.dropout(attention_weights(q, k, allowed), dropout_p, training)
    return att @ v  # (B, nh, T, S) x (B, nh, S, hs) -> (B, nh, T, hs)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, key_padding_mask: Tensor | None = None,
              dropout_p: float = 0.0, training: bool = False, impl: AttentionImpl = "sdpa") -> Tensor:
    """Scaled dot-product attention over heads; `impl` picks the fused kernel or the reference."""
    T, S = q.size(-2), k.size(-2)
    if impl == "sdpa":
        p = dropout_p if training else 0.0
        if key_padding_mask is None and (not causal or T == S):
            # no explicit mask: SDPA may pick the flash kernel, which builds the causal mask itself
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        allowed = attention_mask(T, S, causal, key_padding_mask, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
    if impl == "reference":
        allowed = attention_mask(T, S, causal, key_padding_mask, q.device)
        return reference_attention(q, k, v, allowed, dropout_p, training)
    raise ValueError(f"unknown attention implementation {impl!r}; choose 'sdpa' or 'reference'")


class MultiHeadAttention(nn.Module):
    """h heads of size d_model / h in parallel, then the output projection W_O.

    `cross=False` (self-attention) projects Q, K, V from x with one fused matrix; `cross=True` projects
    Q from x and K, V from `memory`, so a decoder block can read an encoder. `dropout` is applied to
    the attention weights (GPT-2, nanoGPT, PyTorch's nn.Transformer); the residual dropout of the
    paper belongs to the block.

    Set `record_weights = True` to keep the attention probabilities of the last call in `weights`
    (B, nh, T, S), computed by the reference formula beside whichever path runs (for pictures such
    as attention rollout; the fused kernels never materialise them).

    `cache` (a dict this module owns, `seqbench.nn.kv_cache`) serves decoding one token at a time:
    self-attention appends the new tokens' keys and values to those of the tokens read before, so a
    step projects only its own token; cross-attention projects the encoder output at the first step
    and reuses it. The new queries are the last T of the S positions, which the causal mask aligns.
    """

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0, bias: bool = True, cross: bool = False,
                 impl: AttentionImpl = "sdpa") -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} must be divisible by n_head={n_head}")
        self.n_head, self.d_model, self.cross = n_head, d_model, cross
        self.dropout, self.impl = dropout, impl
        if cross:
            self.q_proj = nn.Linear(d_model, d_model, bias=bias)
            self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.record_weights, self.weights = False, None

    def forward(self, x: Tensor, memory: Tensor | None = None, causal: bool = False,
                key_padding_mask: Tensor | None = None, cache: dict | None = None) -> Tensor:
        """x (B, T, C) [memory (B, S, C)] -> (B, T, C). `key_padding_mask` (B, S): True = padding key."""
        B, T, C = x.size()
        hs = C // self.n_head

        def heads(t: Tensor) -> Tensor:
            return t.view(B, -1, self.n_head, hs).transpose(1, 2)  # (B, S, C) -> (B, nh, S, hs)

        if self.cross:
            if cache is not None and "k" in cache:  # the encoder output, projected at the first step
                q, k, v = heads(self.q_proj(x)), cache["k"], cache["v"]
            else:
                if memory is None:
                    raise ValueError("cross-attention needs the encoder output as `memory`")
                k, v = self.kv_proj(memory).split(C, dim=2)  # (B, S, C) each
                q, k, v = heads(self.q_proj(x)), heads(k), heads(v)  # (B, nh, T|S, hs)
        else:
            q, k, v = (heads(t) for t in self.qkv_proj(x).split(C, dim=2))  # (B, nh, T, hs) each
            if cache is not None and "k" in cache:  # the keys and values of the tokens read before
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)  # (B, nh, S, hs)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        S = k.size(2)
        if self.record_weights:
            self.weights = attention_weights(q, k, attention_mask(T, S, causal, key_padding_mask, q.device)).detach()
        y = attention(q, k, v, causal, key_padding_mask, self.dropout, self.training, self.impl)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C)
        return self.out_proj(y)
