"""Batched greedy and beam-search decoding, shared by every encoder-decoder family.

A family exposes two functions and this module does the rest:

    encode(batch)                           -> memory   (tensors with the batch first, any nesting)
    decode_step(memory, tokens, state)      -> logits (B, V), state
        tokens (B, t): everything decoded so far, <bos> first; state: None when nothing has been
        read (the family then reads all t tokens), else what the family returned at the previous
        step, having read all but the last token (tensors with the batch first, any nesting). A
        recurrent decoder carries its hidden state; an attention decoder the keys and values of the
        tokens it read (`seqbench.nn.kv_cache`), so both read only the last token.

`use_cache=False` passes state None at every step, so a family re-reads the whole prefix each time
(O(t²) for n steps instead of O(t)): the slow path the cache is checked and measured against.

Beam search (Graves 2012; Sutskever et al. 2014; the GNMT length penalty of Wu et al. 2016) keeps K
hypotheses per sentence in a (B*K)-row batch. A hypothesis that emitted <eos> stays in the beam
with its score frozen (it may only be extended by <pad> at log-prob 0), so finished and live
hypotheses compete on equal terms; the winner is the best by score / lp(length), with
lp(n) = ((5 + n) / 6)^alpha. With K = 1 every step keeps the single arg-max, which is greedy decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor


def tree_map(fn: Callable[[Tensor], Tensor], tree: Any) -> Any:
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(fn, v) for v in tree)
    return tree


def never_special(scores: Tensor, bos: int, pad: int) -> Tensor:
    """A live hypothesis never continues with <bos> or <pad> (they are never targets in training)."""
    scores = scores.clone()
    scores[:, [bos, pad]] = float("-inf")
    return scores


def max_steps(batch: dict, a: float, b: int) -> int:
    return int(a * int(batch["src_lengths"].max()) + b)


@torch.no_grad()
def greedy(model, batch: dict, bos: int, eos: int, pad: int, steps: int, use_cache: bool = True) -> Tensor:
    """-> (B, <=steps) token ids after <bos>; rows that finished are padded after their <eos>."""
    memory = model.encode(batch)
    B = batch["src"].size(0)
    tokens = torch.full((B, 1), bos, dtype=torch.long, device=batch["src"].device)
    done = torch.zeros(B, dtype=torch.bool, device=tokens.device)
    state = None
    for _ in range(steps):
        logits, state = model.decode_step(memory, tokens, state)  # (B, V)
        state = state if use_cache else None
        nxt = never_special(logits, bos, pad).argmax(-1).masked_fill(done, pad)  # (B,)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done |= nxt == eos
        if bool(done.all()):
            break
    return tokens[:, 1:]


def length_penalty(lengths: Tensor, alpha: float) -> Tensor:
    return ((5.0 + lengths.float()) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model, batch: dict, bos: int, eos: int, pad: int, steps: int, beam: int = 5,
                alpha: float = 1.0, use_cache: bool = True) -> Tensor:
    """-> (B, <=steps) the best hypothesis per sentence by length-normalised log-probability.

    When beams are re-ranked, the state (a key/value cache too) follows each kept hypothesis: row i
    of the next step continues row `origin[i]` of this one."""
    if beam == 1:
        return greedy(model, batch, bos, eos, pad, steps, use_cache)
    B, K = batch["src"].size(0), beam
    device = batch["src"].device
    rows = torch.arange(B, device=device).repeat_interleave(K)  # (B*K,) sentence of each beam row
    memory = tree_map(lambda t: t.index_select(0, rows), model.encode(batch))
    tokens = torch.full((B * K, 1), bos, dtype=torch.long, device=device)
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = float("-inf")  # all beams start identical: keep only the first alive at step 1
    done = torch.zeros(B * K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B * K, dtype=torch.long, device=device)
    state = None
    for _ in range(steps):
        logits, state = model.decode_step(memory, tokens, state)  # (B*K, V)
        state = state if use_cache else None
        logp = never_special(torch.log_softmax(logits.float(), dim=-1), bos, pad)
        V = logp.size(-1)
        # a finished hypothesis continues only with <pad>, at no cost
        frozen = torch.full_like(logp, float("-inf"))
        frozen[:, pad] = 0.0
        logp = torch.where(done[:, None], frozen, logp)
        cand = (scores.view(B * K, 1) + logp).view(B, K * V)  # (B, K*V)
        scores, flat = cand.topk(K, dim=-1)  # (B, K)
        origin = (flat // V) + torch.arange(B, device=device)[:, None] * K  # (B, K) row it extends
        origin, nxt = origin.view(-1), (flat % V).view(-1)  # (B*K,)
        tokens = torch.cat([tokens.index_select(0, origin), nxt[:, None]], dim=1)
        was_done = done.index_select(0, origin)
        lengths = lengths.index_select(0, origin) + (~was_done).long()
        done = was_done | (nxt == eos)
        state = tree_map(lambda t: t.index_select(0, origin), state)
        if bool(done.all()):
            break
    normalised = scores / length_penalty(lengths.view(B, K), alpha)  # (B, K)
    best = normalised.argmax(-1) + torch.arange(B, device=device) * K  # (B,)
    return tokens.index_select(0, best)[:, 1:]
