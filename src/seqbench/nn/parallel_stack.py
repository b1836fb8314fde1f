"""The networks of the parallel-recurrence families (minGRU, minLSTM, the selective SSM, Mamba-2's SSD).

One stack for all four, as Feng et al. (2024) and Mamba (Gu & Dao 2023) build their language
models: embedding -> N pre-norm residual blocks of the layer (`seqbench.nn.ssm.ResidualBlock`) ->
a final LayerNorm -> the head. Every layer maps (B, T, d) -> (B, T, d), so the residual stream keeps
one width and the block needs no projection of its own (the SSM and SSD expand inside themselves).

Each stack runs two ways on the same weights: `forward(x, state)` over a whole sequence (the
parallel scan, for training and for reading a prompt) and `step(x_t, state)` one token at a time
(generation, O(1) per token). The state is a tuple with one entry per layer (minGRU/minLSTM: h
(B, d); SSM and SSD: (conv inputs, h)), batch first, carried across truncated-BPTT windows by the model.

`ParallelEncoder` reads whole sentences or images for the encoder heads. A causal stack reads right-
padded rows correctly as they are (no padding precedes a real position); the bidirectional one adds a
second stack that reads each row's real positions reversed (`reverse_each`), so padding stays behind
them in that direction too, as packing does for the fused RNNs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor, nn

from seqbench.nn.min_rnn import MinGRU, MinLSTM
from seqbench.nn.mixer import MixerLayer, resolve
from seqbench.nn.recurrent_encoder import masked_pool
from seqbench.nn.ssd import SSD
from seqbench.nn.ssm import ResidualBlock, SelectiveSSM
from seqbench.nn.positions_scored import at_positions

def _min_rnn(cls) -> Callable[..., nn.Module]:
    return lambda d_model, scan=None, **_: cls(d_model, d_model, scan)  # no SSM options: they have no state size


# The layer each family stacks, by the model config's `layer` value: the one table of this module's
# layers (the registry says which family is which layer; config_check reads the Literal below).
LAYERS: dict[str, Callable[..., nn.Module]] = {
    "mingru": _min_rnn(MinGRU),
    "minlstm": _min_rnn(MinLSTM),
    "ssm": lambda d_model, d_state=16, expand=2, d_conv=4, selective=True, scan=None, **_: SelectiveSSM(
        d_model, d_state, expand, d_conv, selective=selective, scan=scan),
    # Mamba-2: its chunked SSD needs no scan method (the recurrence runs over chunks, not steps)
    "ssd": lambda d_model, d_state=64, expand=2, d_conv=4, headdim=64, **_: SSD(
        d_model, d_state, expand, d_conv, headdim),
}
Layer = Literal[tuple(LAYERS)]


def make_layer(layer: str, d_model: int, d_state: int = 16, expand: int = 2, d_conv: int = 4,
               selective: bool = True, scan: str | None = None, headdim: int = 64,
               mixer_options: dict | None = None) -> nn.Module:
    """One sequence mixer of width d_model: forward(x, state) and step(x_t, state), both -> (y, state).
    `layer` is a name of `LAYERS`, or the import path of a layer from outside (`seqbench.nn.mixer`), built
    with `mixer_options`."""
    if layer in LAYERS:
        return LAYERS[layer](d_model, d_state=d_state, expand=expand, d_conv=d_conv, selective=selective, scan=scan,
                             headdim=headdim)
    if ":" in layer or "." in layer:
        return MixerLayer(resolve(layer), d_model, layer, **dict(mixer_options or {}))
    raise ValueError(f"unknown layer {layer!r}; choose one of {', '.join(LAYERS)} or give an import path")


class ParallelStack(nn.Module):
    """N pre-norm residual blocks of one layer kind and the final norm: (B, T, d) -> (B, T, d)."""

    def __init__(self, layer: str, d_model: int, num_layers: int, **layer_options):
        super().__init__()
        self.blocks = nn.ModuleList(ResidualBlock(d_model, make_layer(layer, d_model, **layer_options))
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, state: tuple | None = None) -> tuple[Tensor, tuple]:
        states = []
        for k, block in enumerate(self.blocks):
            x, s = block(x, None if state is None else state[k])
            states.append(s)
        return self.norm(x), tuple(states)

    def step(self, x_t: Tensor, state: tuple | None = None) -> tuple[Tensor, tuple]:
        states = []
        for k, block in enumerate(self.blocks):
            x_t, s = block.step(x_t, None if state is None else state[k])
            states.append(s)
        return self.norm(x_t), tuple(states)


class ParallelLM(nn.Module):
    """The language model: tokens -> embedding -> `ParallelStack` -> (tied) decoder.

    Dropout on the embedding and before the decoder only, never on the state (Zaremba et al.'s
    rule for the recurrent family, which the residual stream of a pre-norm stack also wants kept whole).
    The embedding starts at N(0, 0.02), as GPT-2's and Mamba's: with a tied decoder reading a
    LayerNorm'd stream, PyTorch's N(0, 1) would start the logits at a standard deviation of sqrt(d)."""

    def __init__(self, vocab_size: int, layer: str, d_model: int, num_layers: int, dropout: float = 0.0,
                 tie_weights: bool = True, **layer_options):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)
        self.stack = ParallelStack(layer, d_model, num_layers, **layer_options)
        self.decoder = nn.Linear(d_model, vocab_size)
        nn.init.zeros_(self.decoder.bias)
        if tie_weights:
            self.decoder.weight = self.embedding.weight

    def hidden_states(self, tokens: Tensor, state: tuple | None = None) -> tuple[Tensor, tuple]:
        """tokens (B, T) -> the normed top of the stack (B, T, d) after dropout, and the final state."""
        out, state = self.stack(self.dropout(self.embedding(tokens)), state)
        return self.dropout(out), state

    def forward(self, tokens: Tensor, state: tuple | None = None,
                positions: Tensor | None = None) -> tuple[Tensor, tuple]:
        """tokens (B, T) -> logits (B, T, V) and the state after the last token (the parallel form); with
        `positions` (B, T) bool, the decoder at those alone: (N, V)."""
        out, state = self.hidden_states(tokens, state)
        return self.decoder(at_positions(out, positions)), state

    def last_logits(self, tokens: Tensor, state: tuple | None = None) -> tuple[Tensor, tuple]:
        """tokens (B, T) -> logits (B, V) of the token after them (the decoder on the last step only)."""
        out, state = self.hidden_states(tokens, state)
        return self.decoder(out[:, -1]), state

    def step(self, token: Tensor, state: tuple | None = None) -> tuple[Tensor, tuple]:
        """token (B,) -> logits (B, V) of the next one and the new state (the step form)."""
        out, state = self.stack.step(self.dropout(self.embedding(token)), state)
        return self.decoder(self.dropout(out)), state


def reverse_each(x: Tensor, lengths: Tensor) -> Tensor:
    """(B, T, ...) with the first lengths[b] positions of each row reversed, padding left in place; its
    own inverse."""
    t = torch.arange(x.size(1), device=x.device)[None, :]  # (1, T)
    last = (lengths.to(x.device) - 1)[:, None]  # (B, 1)
    index = torch.where(t <= last, last - t, t)  # (B, T)
    return x.gather(1, index.view(*index.shape, *[1] * (x.dim() - 2)).expand_as(x))


class ParallelEncoder(nn.Module):
    """Token ids (B, T) or feature vectors (B, T, F) -> per-position states (B, T, D) and a summary.

    D = d_model, or 2 d_model when bidirectional (the left-to-right and right-to-left stacks'
    states side by side, as a BiLSTM's)."""

    def __init__(self, layer: str, d_model: int, num_layers: int, dropout: float = 0.0,
                 bidirectional: bool = False, vocab_size: int | None = None, input_dim: int | None = None,
                 padding_idx: int | None = None, **layer_options):
        super().__init__()
        if (vocab_size is None) == (input_dim is None):
            raise ValueError("give exactly one of vocab_size (token ids) or input_dim (feature vectors)")
        self.embed = (nn.Embedding(vocab_size, d_model, padding_idx=padding_idx) if vocab_size is not None
                      else nn.Linear(input_dim, d_model))
        self.dropout = nn.Dropout(dropout)
        self.forward_stack = ParallelStack(layer, d_model, num_layers, **layer_options)
        self.backward_stack = (ParallelStack(layer, d_model, num_layers, **layer_options) if bidirectional
                               else None)
        self.output_size = d_model * (2 if bidirectional else 1)

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """-> states (B, T, D) and lengths (B,) (all T when none were given)."""
        B, T = x.shape[:2]
        x = self.dropout(self.embed(x.float() if x.dtype.is_floating_point else x))  # (B, T, d)
        if lengths is None:
            lengths = torch.full((B,), T, dtype=torch.long, device=x.device)
        states, _ = self.forward_stack(x)
        if self.backward_stack is not None:
            backward, _ = self.backward_stack(reverse_each(x, lengths))
            states = torch.cat([states, reverse_each(backward, lengths)], dim=-1)
        return self.dropout(states), lengths

    def summary(self, x: Tensor, lengths: Tensor | None, pooling: Literal["last", "mean", "max"]) -> Tensor:
        """(B, D): the state after each row's last real position (each direction's last read), or the
        mean or max over its real positions."""
        states, lengths = self(x, lengths)
        if pooling != "last":
            return masked_pool(states, lengths, pooling)
        d = self.forward_stack.norm.normalized_shape[0]
        rows = torch.arange(states.size(0), device=states.device)
        last = states[rows, lengths.to(states.device) - 1]  # (B, D)
        return last if self.backward_stack is None else torch.cat([last[:, :d], states[:, 0, d:]], dim=-1)
