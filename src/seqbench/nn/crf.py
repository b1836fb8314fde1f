"""A linear-chain conditional random field (Lafferty et al. 2001) on top of per-token scores.

For emissions e (B, T, K) from an encoder and learned transition scores A (K, K), start s (K) and
end f (K), a tag path y of a sentence scores

    score(y) = s[y_1] + e_1[y_1] + sum_t (A[y_{t-1}, y_t] + e_t[y_t]) + f[y_T]

and p(y | x) = exp(score(y)) / Z with Z = sum over all K^T paths, computed by the forward
recursion in log space (alpha_t[k] = logsumexp_j(alpha_{t-1}[j] + A[j, k]) + e_t[k]); the best path
by the same recursion with max (Viterbi) and back-pointers. Lample et al. (2016) put this on a
BiLSTM for NER: the transitions learn that I-PER never follows B-ORG.

The chain functions are shared with the hidden Markov model (`seqbench.nn.hmm`): with log
probabilities as scores, Z is the HMM's marginal likelihood p(x) (the forward algorithm) and the
best path is its Viterbi path. Masks may have holes (a word's later subword pieces): a masked
position is skipped — alpha and the back-pointers pass through it unchanged — so transitions link
consecutive *scored* positions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _broadcast(emissions: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return torch.ones(emissions.shape[:2], dtype=torch.bool, device=emissions.device)
    return mask.bool()


def chain_log_partition(emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor,
                        mask: Tensor | None = None) -> Tensor:
    """log Z (B,) for emissions (B, T, K): logsumexp over every tag path of the masked positions."""
    mask = _broadcast(emissions, mask)
    B, T, K = emissions.shape
    alpha = start.expand(B, K)  # (B, K): "before the first scored token"
    started = torch.zeros(B, 1, dtype=torch.bool, device=emissions.device)
    for t in range(T):
        e = emissions[:, t]  # (B, K)
        moved = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + e  # (B, K, 1) + (K, K) -> (B, K)
        new = torch.where(started, moved, alpha + e)  # the first scored token takes the start score
        m = mask[:, t].unsqueeze(1)  # (B, 1)
        alpha = torch.where(m, new, alpha)
        started = started | m
    return torch.logsumexp(alpha + end, dim=1)


def chain_score(emissions: Tensor, tags: Tensor, transitions: Tensor, start: Tensor, end: Tensor,
                mask: Tensor | None = None) -> Tensor:
    """score(y) (B,) of the given tag paths (B, T); tags at masked positions are ignored."""
    mask = _broadcast(emissions, mask)
    B, T, _ = emissions.shape
    tags = tags.masked_fill(~mask, 0)
    score = emissions.new_zeros(B)
    prev = torch.zeros(B, dtype=torch.long, device=emissions.device)
    started = torch.zeros(B, dtype=torch.bool, device=emissions.device)
    for t in range(T):
        y, m = tags[:, t], mask[:, t]
        step = emissions[:, t].gather(1, y.unsqueeze(1)).squeeze(1)  # (B,)
        step = step + torch.where(started, transitions[prev, y], start[y])
        score = score + torch.where(m, step, torch.zeros_like(step))
        prev = torch.where(m, y, prev)
        started = started | m
    return score + torch.where(started, end[prev], torch.zeros_like(score))


def chain_viterbi(emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor,
                  mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The best tag path (B, T) and its score (B,); masked positions carry their neighbour's tag."""
    mask = _broadcast(emissions, mask)
    B, T, K = emissions.shape
    delta = start.expand(B, K)
    started = torch.zeros(B, 1, dtype=torch.bool, device=emissions.device)
    identity = torch.arange(K, device=emissions.device).expand(B, K)
    pointers = []
    for t in range(T):
        e = emissions[:, t]
        best, arg = (delta.unsqueeze(2) + transitions).max(dim=1)  # (B, K): best predecessor of each tag
        new = torch.where(started, best + e, delta + e)
        m = mask[:, t].unsqueeze(1)
        pointers.append(torch.where(m & started, arg, identity))
        delta = torch.where(m, new, delta)
        started = started | m
    score, cur = (delta + end).max(dim=1)  # (B,)
    path = torch.empty(B, T, dtype=torch.long, device=emissions.device)
    for t in range(T - 1, -1, -1):
        path[:, t] = cur
        cur = pointers[t].gather(1, cur.unsqueeze(1)).squeeze(1)
    return path, score


class CRF(nn.Module):
    """Transition, start and end scores, learned; `nll` trains, `decode` predicts (the tagging task
    calls both through the family's `crf` attribute)."""

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]
        self.start = nn.Parameter(torch.zeros(num_tags))
        self.end = nn.Parameter(torch.zeros(num_tags))

    def nll(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """-log p(tags | x) summed over the batch and divided by the scored tokens (a per-token loss,
        on the same scale as the per-token cross-entropy it replaces)."""
        emissions = emissions.float()
        log_z = chain_log_partition(emissions, self.transitions, self.start, self.end, mask)
        score = chain_score(emissions, tags, self.transitions, self.start, self.end, mask)
        return (log_z - score).sum() / mask.sum().clamp_min(1)

    def decode(self, emissions: Tensor, mask: Tensor) -> Tensor:
        return chain_viterbi(emissions.float(), self.transitions, self.start, self.end, mask)[0]
