"""The recurrent language model: embedding -> stacked RNN/LSTM/GRU -> linear decoder.

Dropout follows Zaremba et al. (2014): on the non-recurrent connections only — the embedding
output, between layers, and before the decoder — never on the recurrent state, which is what lets
large LSTMs regularise without forgetting. Weight tying (Press & Wolf 2017; Inan et al. 2017) shares
the embedding with the decoder and needs `embedding_size == hidden_size`.

AWD-LSTM's regularisers (Merity et al. 2018; `seqbench.nn.awd`) are options, all off by default:
`lock_dropout` draws the three dropouts' masks once per sequence (and runs the layers as separate
single-layer kernels so the mask between them can be locked; with tied weights the last layer is
then `embedding_size` wide, so the hidden size is free), `word_dropout` drops whole words from the
embedding, `weight_drop` is DropConnect on the hidden-to-hidden matrices, and `ar` / `tar` add
activation and temporal activation regularisation to the training loss (`penalty`).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from seqbench.errors import ConfigError
from seqbench.nn.awd import (LockedDropout, activation_penalty, drop_recurrent_weights, release_dropped_weights,
                             word_dropout)
from seqbench.nn.cells import make_rnn
from seqbench.nn.flops import recurrent_forward_flops, train_flops
from seqbench.nn.positions_scored import at_positions


class RecurrentLM(nn.Module):
    def __init__(self, vocab_size: int, cell: str = "lstm", embedding_size: int = 200, hidden_size: int = 200,
                 num_layers: int = 2, dropout: float = 0.0, embedding_dropout: float | None = None,
                 output_dropout: float | None = None, tie_weights: bool = False, init_range: float | None = 0.1,
                 nonlinearity: str = "tanh", impl: str = "fused", hidden_dropout: float | None = None,
                 lock_dropout: bool = False, word_dropout: float = 0.0, weight_drop: float = 0.0,
                 ar: float = 0.0, tar: float = 0.0) -> None:
        super().__init__()
        if tie_weights and embedding_size != hidden_size and not lock_dropout:
            raise ConfigError(
                f"model.tie_weights=true needs model.embedding_size == model.hidden_size "
                f"(got {embedding_size} and {hidden_size}); set them equal or tie_weights=false "
                f"(or model.lock_dropout=true, whose last layer is embedding_size wide, as in AWD-LSTM)."
            )
        self.cell, self.num_layers, self.hidden_size = cell, num_layers, hidden_size
        self.word_dropout, self.weight_drop, self.ar, self.tar = word_dropout, weight_drop, ar, tar
        self.penalty: Tensor | None = None  # AR + TAR of the last training forward, for the loss
        self.embedding_size, self.vocab_size = embedding_size, vocab_size
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        p_in = dropout if embedding_dropout is None else embedding_dropout
        p_hid = dropout if hidden_dropout is None else hidden_dropout
        p_out = dropout if output_dropout is None else output_dropout
        drop = LockedDropout if lock_dropout else nn.Dropout
        self.embedding_dropout, self.output_dropout = drop(p_in), drop(p_out)
        if lock_dropout:
            # AWD-LSTM's stack: one single-layer kernel per layer, a locked mask between them
            last = embedding_size if tie_weights else hidden_size
            self.sizes = [hidden_size] * (num_layers - 1) + [last]
            inputs = [embedding_size] + self.sizes[:-1]
            self.layers = nn.ModuleList(drop_recurrent_weights(
                make_rnn(cell, i, o, 1, nonlinearity=nonlinearity, impl=impl), weight_drop)
                for i, o in zip(inputs, self.sizes))
            self.hidden_dropout = LockedDropout(p_hid)
            self.rnn = None
        else:
            self.sizes = [hidden_size] * num_layers
            self.rnn = drop_recurrent_weights(make_rnn(cell, embedding_size, hidden_size, num_layers, p_hid,
                                                       nonlinearity=nonlinearity, impl=impl), weight_drop)
            self.layers = None
        self.decoder = nn.Linear(self.sizes[-1], vocab_size)
        if tie_weights:
            self.decoder.weight = self.embedding.weight
        self.reset_parameters(init_range)

    def reset_parameters(self, init_range: float | None) -> None:
        if init_range:  # Zaremba et al.: every parameter ~ U(-r, r)
            for p in self.parameters():
                nn.init.uniform_(p, -init_range, init_range)
        else:  # word_language_model: U(±0.1) embeddings/decoder, zero decoder bias, PyTorch's RNN init
            nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: Tensor, state=None, positions: Tensor | None = None) -> tuple[Tensor, object]:
        """tokens (B, T) -> logits (B, T, V) and the final state for the next window; with `positions`
        (B, T) bool, the decoder at those alone: (N, V)."""
        out, state = self.hidden_states(tokens, state)
        return self.decoder(at_positions(out, positions)), state

    def hidden_states(self, tokens: Tensor, state=None) -> tuple[Tensor, object]:
        """tokens (B, T) -> the top layer's outputs (B, T, H) after output dropout, and the final state."""
        x = self.embedding_dropout(word_dropout(self.embedding, tokens, self.word_dropout, self.training))  # (B, T, E)
        # weight drop: one DropConnect mask per forward, however often the kernel reads the weight
        with parametrize.cached() if self.weight_drop else contextlib.nullcontext():
            if self.layers is None:
                raw, state = self.rnn(x, state)  # (B, T, H)
            else:
                raw, state = self._run_layers(x, state)
        if self.weight_drop and self.training:
            for rnn in self.layers if self.layers is not None else [self.rnn]:
                release_dropped_weights(rnn)
        out = self.output_dropout(raw)
        self.penalty = activation_penalty(out, raw, self.ar, self.tar) if self.training and (self.ar or self.tar) else None
        return out, state

    def _run_layers(self, x: Tensor, state):
        """The lock_dropout stack; its state is a tuple with one entry per layer ((1, B, H_l) or (h, c))."""
        states = []
        for k, layer in enumerate(self.layers):
            if k > 0:
                x = self.hidden_dropout(x)
            x, s = layer(x, None if state is None else state[k])  # (B, T, H_k)
            states.append(s)
        return x, tuple(states)

    def last_logits(self, tokens: Tensor, state=None) -> tuple[Tensor, object]:
        """tokens (B, T) -> logits (B, V) of the token after them, and the state; the decoder runs on
        the last step only (a (B, T, V) tensor of a 1000-token read would not fit in memory)."""
        out, state = self.hidden_states(tokens, state)
        return self.decoder(out[:, -1]), state

    def flops_per_token(self, T: int | None = None) -> float:
        """Training FLOPs per token (`seqbench.nn.flops`); a recurrent step's cost does not depend on T."""
        return train_flops(recurrent_forward_flops(self.cell, self.embedding_size, self.sizes, self.num_layers,
                                                   self.vocab_size))


def map_state(fn, state):
    """Apply `fn` to the tensor(s) of a recurrent state: h, the LSTM's (h, c), or a tuple of per-layer ones."""
    if state is None:
        return None
    return tuple(map_state(fn, s) for s in state) if isinstance(state, (tuple, list)) else fn(state)


def detach_state(state):
    """Cut the graph between windows: without it, backprop would run to the start of the corpus."""
    return map_state(torch.Tensor.detach, state)
