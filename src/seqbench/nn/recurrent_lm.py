"""The recurrent language model: embedding -> stacked RNN/LSTM/GRU -> linear decoder.

Dropout follows Zaremba et al. (2014): on the non-recurrent connections only — the embedding
output, between layers, and before the decoder — never on the recurrent state, which is what lets
large LSTMs regularise without forgetting. Weight tying (Press & Wolf 2017; Inan et al. 2017) shares
the embedding with the decoder and needs `embedding_size == hidden_size`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqbench.errors import ConfigError
from seqbench.nn.cells import make_rnn
from seqbench.nn.flops import recurrent_forward_flops, train_flops


class RecurrentLM(nn.Module):
    def __init__(self, vocab_size: int, cell: str = "lstm", embedding_size: int = 200, hidden_size: int = 200,
                 num_layers: int = 2, dropout: float = 0.0, embedding_dropout: float | None = None,
                 output_dropout: float | None = None, tie_weights: bool = False, init_range: float | None = 0.1,
                 nonlinearity: str = "tanh", impl: str = "fused") -> None:
        super().__init__()
        if tie_weights and embedding_size != hidden_size:
            raise ConfigError(
                f"model.tie_weights=true needs model.embedding_size == model.hidden_size "
                f"(got {embedding_size} and {hidden_size}); set them equal or tie_weights=false."
            )
        self.cell, self.num_layers, self.hidden_size = cell, num_layers, hidden_size
        self.embedding_size, self.vocab_size = embedding_size, vocab_size
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        self.embedding_dropout = nn.Dropout(dropout if embedding_dropout is None else embedding_dropout)
        self.rnn = make_rnn(cell, embedding_size, hidden_size, num_layers, dropout, nonlinearity=nonlinearity,
                            impl=impl)
        self.output_dropout = nn.Dropout(dropout if output_dropout is None else output_dropout)
        self.decoder = nn.Linear(hidden_size, vocab_size)
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

    def init_state(self, batch_size: int, like: Tensor):
        h = like.new_zeros(self.num_layers, batch_size, self.hidden_size, dtype=self.decoder.weight.dtype)
        return (h, h.clone()) if self.cell == "lstm" else h

    def forward(self, tokens: Tensor, state=None) -> tuple[Tensor, object]:
        """tokens (B, T) -> logits (B, T, V) and the final state for the next window."""
        x = self.embedding_dropout(self.embedding(tokens))  # (B, T, E)
        out, state = self.rnn(x, state)  # (B, T, H)
        return self.decoder(self.output_dropout(out)), state


    def flops_per_token(self, T: int | None = None) -> float:
        """Training FLOPs per token (`seqbench.nn.flops`); a recurrent step's cost does not depend on T."""
        return train_flops(recurrent_forward_flops(self.cell, self.embedding_size, self.hidden_size, self.num_layers,
                                                   self.vocab_size))


def map_state(fn, state):
    """Apply `fn` to the tensor(s) of a recurrent state: h, or the LSTM's (h, c)."""
    if state is None:
        return None
    return tuple(fn(s) for s in state) if isinstance(state, tuple) else fn(state)


def detach_state(state):
    """Cut the graph between windows: without it, backprop would run to the start of the corpus."""
    return map_state(torch.Tensor.detach, state)
