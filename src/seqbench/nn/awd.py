"""The regularisers of AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing LSTM
Language Models"), as pure torch pieces the recurrent language model switches on one by one.

* `LockedDropout` — variational dropout (Gal & Ghahramani 2016): one mask per sequence, the same at
  every time step, on the embedding output, between layers and on the output.
* `word_dropout` — embedding dropout: whole rows of the embedding table (words) are zeroed for the
  batch, the rest scaled by 1/(1-p), so a dropped word vanishes at every position it occurs.
* `DropConnect` / `drop_recurrent_weights` — weight drop (Wan et al. 2013) on the hidden-to-hidden
  matrices. The raw matrix stays the Parameter (what the optimizer updates and the checkpoint
  stores); a `torch.nn.utils.parametrize` parametrisation computes the dropped copy on each forward,
  in training only. nn.LSTM re-reads its weights when they change (`_update_flat_weights`), so the
  fused kernel still runs; run the forward inside `parametrize.cached()` so the one mask is drawn
  once per forward rather than once per read. That avoids the pitfalls of salesforce/awd-lstm-lm's
  `WeightDrop` (deleting the Parameter, a no-op `flatten_parameters`, and masks in eval).
* `activation_penalty` — AR (alpha · mean of the squared dropped outputs of the last layer) and TAR
  (beta · mean of the squared step-to-step change of its raw outputs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import parametrize


class LockedDropout(nn.Module):
    """Dropout whose mask is drawn once per sequence and reused at every time step (B, T, C)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        mask = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1 - self.p) / (1 - self.p)  # (B, 1, C)
        return x * mask  # broadcast over T


def word_dropout(embedding: nn.Embedding, tokens: Tensor, p: float, training: bool) -> Tensor:
    """Look up `tokens` (B, T) in an embedding whose rows (words) are dropped with probability p."""
    if not training or p == 0:
        return embedding(tokens)
    weight = embedding.weight
    keep = weight.new_empty(weight.size(0), 1).bernoulli_(1 - p) / (1 - p)  # (V, 1): one draw per word
    return F.embedding(tokens, weight * keep, embedding.padding_idx)  # (B, T, E)


class DropConnect(nn.Module):
    """A parametrisation: the weight with each entry dropped with probability p, in training only."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, weight: Tensor) -> Tensor:
        return F.dropout(weight, self.p, self.training)


def drop_recurrent_weights(rnn: nn.Module, p: float) -> nn.Module:
    """Put DropConnect on every hidden-to-hidden matrix (`weight_hh_l*`) of an RNN module, in place.

    The raw matrix moves to `parametrizations.weight_hh_lK.original` (still a leaf Parameter, found by
    `parameters()` and stored in the state dict); reading `rnn.weight_hh_lK` returns the dropped copy
    while the module trains and the raw matrix in eval mode.
    """
    if p <= 0:
        return rnn
    names = [name for name, _ in rnn.named_parameters(recurse=False) if name.startswith("weight_hh_l")]
    for name in names:
        parametrize.register_parametrization(rnn, name, DropConnect(p))
    return rnn


def release_dropped_weights(rnn: nn.Module) -> None:
    """Point a fused RNN's cached weight list back at the raw Parameters after a training forward.

    nn.LSTM/GRU/RNN keep the tensors of their last forward in `_flat_weights`; with weight drop that is
    the dropped matrix, a non-leaf holding its graph alive until the next forward, which
    `copy.deepcopy` refuses (Lightning's AveragedModel deep-copies the model). In eval mode DropConnect
    returns the Parameter itself, so re-reading the weights there leaves only leaves (and on a GPU,
    re-flattens them into cuDNN's single buffer).
    """
    if not isinstance(rnn, nn.RNNBase):
        return
    mode = rnn.training
    rnn.train(False)
    rnn._init_flat_weights()  # private, but the very method RNNBase uses when its weights change
    rnn.train(mode)


def activation_penalty(dropped: Tensor, raw: Tensor, alpha: float, beta: float) -> Tensor:
    """AR + TAR of the last layer's outputs (B, T, H): alpha·E[dropped²] + beta·E[(raw_t − raw_{t−1})²]."""
    penalty = dropped.new_zeros(())
    if alpha:
        penalty = penalty + alpha * dropped.pow(2).mean()
    if beta and raw.size(1) > 1:
        penalty = penalty + beta * (raw[:, 1:] - raw[:, :-1]).pow(2).mean()
    return penalty
