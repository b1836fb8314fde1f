"""The key/value cache of incremental decoding: what an attention decoder keeps between steps.

Without it, decoding step t re-reads all t tokens: every layer projects t queries, keys and values
and runs t rows through its feed-forward network to use only the last row, so n steps cost O(n²)
token passes. Keys and values of a token never change once it is read (a causal decoder's earlier
positions do not see later ones), so a step can read its one new token and attend to the keys and
values kept from before: O(n) token passes, plus attention over the kept keys.

    cache = new_cache(n_layer)         [{"self": {}, "cross": {}}, ...]  one dict per layer
    after reading t tokens:            layer["self"]  = {"k": (B, nh, t, hs), "v": (B, nh, t, hs)}
                                       layer["cross"] = {"k": (B, nh, S, hs), "v": ...}  the encoder
                                                        output, projected once per source

Each attention module reads and fills its own dict (`MultiHeadAttention`, `T5Attention`); the new
token's position is `past_length(cache)`. The cache is plain nested dicts of batch-first tensors, so
beam search reorders it with the same `index_select` as every other decoder state
(`seqbench.nn.decoding.tree_map`).
"""

from __future__ import annotations


def new_cache(n_layer: int) -> list[dict]:
    """An empty cache for a stack of `n_layer` blocks."""
    return [{"self": {}, "cross": {}} for _ in range(n_layer)]


def past_length(cache: list[dict] | None) -> int:
    """Tokens already read into `cache` (0 for none): the position of the next token."""
    if not cache or "k" not in cache[0]["self"]:
        return 0
    return cache[0]["self"]["k"].size(2)
