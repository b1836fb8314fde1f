"""Recurrent encoder-decoders: Sutskever et al. (2014), Bahdanau et al. (2015), Luong et al. (2015).

    encoder   source ids -> embedding -> (bi)RNN -> states k_1..k_S, final state
    bridge    decoder's initial state = the encoder's final state (Sutskever, "the context");
              with a bidirectional encoder, tanh(W [→h_S; ←h_1]) per layer (Bahdanau's s_0)
    decoder   one step i, from the previous target token y_{i-1}:
      none           s_i = RNN([E y_{i-1} (; f_{i-1})], s_{i-1});     o_i = s_i
      bahdanau       c_i = Attn(s_{i-1}, k);  s_i = RNN([E y_{i-1}; c_i (; f_{i-1})], s_{i-1})
                     o_i = tanh(W_o [s_i; c_i; E y_{i-1}])
      luong_*        s_i = RNN([E y_{i-1} (; f_{i-1})], s_{i-1});  c_i = Attn(s_i, k)
      scaled_dot     o_i = tanh(W_c [s_i; c_i])                        (Luong's "attentional vector")
    output    logits_i = W_out Dropout(o_i)

Input feeding (Luong §3.3) feeds f_{i-1} = o_{i-1} back into the next step, so the decoder knows
what it attended to before. Source reversal (Sutskever §3.3) reverses each source sentence's words
(its <eos> stays last), shortening the path between the first words of source and target. The
teacher forcing ratio is the chance that a training step is fed the reference token rather than the
model's own previous arg-max (Williams & Zipser 1989; Bengio et al. 2015 schedule it).

Every decoder state is kept batch-first (`h`: (B, L, H)) so the shared beam search can reorder it.
"""

from __future__ import annotations

import random

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqbench.nn.additive_attention import SourceAttention
from seqbench.nn.cells import make_rnn

ATTENTIONS = ("none", "bahdanau", "luong_dot", "luong_general", "scaled_dot")


def reverse_words(src: Tensor, lengths: Tensor) -> Tensor:
    """Reverse positions 0..len-2 of every row (the words), keeping <eos> at len-1 and the padding."""
    B, S = src.shape
    pos = torch.arange(S, device=src.device)[None, :].expand(B, S)
    words = (lengths - 1)[:, None]
    index = torch.where(pos < words, words - 1 - pos, pos)  # (B, S) an involution
    return src.gather(1, index)


class RecurrentSeq2Seq(nn.Module):
    def __init__(self, src_vocab: int, tgt_vocab: int, cell: str = "gru", embedding_size: int = 256,
                 hidden_size: int = 512, num_layers: int = 1, dropout: float = 0.3, bidirectional: bool = True,
                 attention: str = "bahdanau", input_feeding: bool = False, reverse_source: bool = False,
                 teacher_forcing: float = 1.0, pad_id: int = 0, nonlinearity: str = "tanh",
                 attention_size: int | None = None, tie_output: bool = False) -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}; choose one of {', '.join(ATTENTIONS)}")
        self.cell, self.num_layers, self.hidden_size = cell, num_layers, hidden_size
        self.attention_kind, self.input_feeding = attention, input_feeding and attention != "none"
        self.reverse_source, self.teacher_forcing, self.pad_id = reverse_source, teacher_forcing, pad_id
        self.src_embed = nn.Embedding(src_vocab, embedding_size, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, embedding_size, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.encoder = make_rnn(cell, embedding_size, hidden_size, num_layers, dropout, bidirectional, nonlinearity)
        self.bidirectional = bidirectional
        enc_size = hidden_size * (2 if bidirectional else 1)
        # bidirectional: Bahdanau's s_0 = tanh(W ←h_1), here from both directions' final states
        self.bridge = nn.Linear(enc_size, hidden_size) if bidirectional else None
        self.bridge_c = nn.Linear(enc_size, hidden_size) if bidirectional and cell == "lstm" else None
        self.attn = None
        key_size = enc_size
        if attention != "none":
            if attention in ("luong_dot", "scaled_dot") and enc_size != hidden_size:
                self.key_map: nn.Module = nn.Linear(enc_size, hidden_size, bias=False)  # dot products need one size
                key_size = hidden_size
            else:
                self.key_map = nn.Identity()
            self.attn = SourceAttention(attention, hidden_size, key_size, attention_size)
        rnn_in = embedding_size + (key_size if attention == "bahdanau" else 0) + (hidden_size if self.input_feeding else 0)
        self.decoder = make_rnn(cell, rnn_in, hidden_size, num_layers, dropout, False, nonlinearity)
        combine_in = {"none": 0, "bahdanau": hidden_size + key_size + embedding_size}.get(attention, hidden_size + key_size)
        self.combine = nn.Linear(combine_in, hidden_size) if combine_in else None
        self.out = nn.Linear(hidden_size, tgt_vocab)
        if tie_output and embedding_size == hidden_size:
            self.out.weight = self.tgt_embed.weight

    # -- encoder ----------------------------------------------------------------------------------
    def encode(self, src: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        """-> memory: keys/values (B, S, K), their prepared scores, padding (B, S), initial state."""
        B, S = src.shape
        if self.reverse_source:
            src = reverse_words(src, lengths)
        x = self.drop(self.src_embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, state = self.encoder(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, D)
        h, c = state if isinstance(state, tuple) else (state, None)  # (L * dirs, B, H)
        memory = {"padding": torch.arange(S, device=src.device)[None, :] >= lengths[:, None],
                  "h": self._bridge(h, self.bridge)}
        if c is not None:
            memory["c"] = self._bridge(c, self.bridge_c)
        if self.attn is not None:
            memory["values"] = self.key_map(states)  # (B, S, K)
            memory["prepared"] = self.attn.prepare(memory["values"])
        return memory

    def _bridge(self, final: Tensor, layer: nn.Linear | None) -> Tensor:
        """Encoder final states (L * dirs, B, H) -> decoder initial states, batch-first (B, L, H)."""
        if layer is None:
            return final.transpose(0, 1)
        L = self.num_layers
        both = final.view(L, 2, *final.shape[1:])  # (L, 2, B, H): forward, backward of each layer
        return torch.tanh(layer(torch.cat([both[:, 0], both[:, 1]], dim=-1))).transpose(0, 1)  # (B, L, H)

    def initial_state(self, memory: dict) -> dict[str, Tensor]:
        state = {"h": memory["h"]}
        if "c" in memory:
            state["c"] = memory["c"]
        if self.input_feeding:
            B = memory["h"].size(0)
            state["feed"] = memory["h"].new_zeros(B, self.hidden_size)
        return state

    # -- one decoder step -------------------------------------------------------------------------
    def step(self, y: Tensor, state: dict, memory: dict) -> tuple[Tensor, dict, Tensor | None]:
        """y (B,) previous tokens -> output o (B, H), the next state, attention weights (B, S) or None.

        The vocabulary projection `logits(o)` is left to the caller, so teacher forcing applies it
        once to all steps (one large matrix product instead of T small ones: most of the step's cost).
        """
        emb = self.drop(self.tgt_embed(y))  # (B, E)
        parts, weights, context = [emb], None, None
        h = state["h"].transpose(0, 1).contiguous()  # (B, L, H) -> (L, B, H)
        rnn_state = (h, state["c"].transpose(0, 1).contiguous()) if "c" in state else h
        if self.attention_kind == "bahdanau":  # attend with s_{i-1} before the step
            context, weights = self.attn(h[-1], memory["prepared"], memory["values"], memory["padding"])
            parts.append(context)
        if self.input_feeding:
            parts.append(state["feed"])
        out, rnn_state = self.decoder(torch.cat(parts, dim=-1)[:, None, :], rnn_state)  # (B, 1, H)
        s = out[:, 0]  # (B, H)
        if self.attention_kind == "none":
            o = s
        elif self.attention_kind == "bahdanau":
            o = torch.tanh(self.combine(torch.cat([s, context, emb], dim=-1)))
        else:  # Luong: attend with s_i after the step
            context, weights = self.attn(s, memory["prepared"], memory["values"], memory["padding"])
            o = torch.tanh(self.combine(torch.cat([s, context], dim=-1)))
        h, c = rnn_state if isinstance(rnn_state, tuple) else (rnn_state, None)
        new = {"h": h.transpose(0, 1)}
        if c is not None:
            new["c"] = c.transpose(0, 1)
        if self.input_feeding:
            new["feed"] = o
        return o, new, weights

    def logits(self, o: Tensor) -> Tensor:
        return self.out(self.drop(o))  # (..., H) -> (..., V)

    # -- teacher forcing --------------------------------------------------------------------------
    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """-> logits (B, T, V) [and attention weights (B, T, S), over the original source order]."""
        memory = self.encode(src, src_lengths)
        state = self.initial_state(memory)
        outputs, weights = [], []
        y = tgt_in[:, 0]
        for t in range(tgt_in.size(1)):
            o, state, w = self.step(y, state, memory)
            outputs.append(o)
            weights.append(w)
            if t + 1 < tgt_in.size(1):
                forced = not self.training or self.teacher_forcing >= 1 or random.random() < self.teacher_forcing
                y = tgt_in[:, t + 1] if forced else self.out(o).argmax(-1)
        logits = self.logits(torch.stack(outputs, dim=1))  # T x (B, H) -> (B, T, H) -> (B, T, V)
        if not return_attention:
            return logits
        if weights[0] is None:
            raise ValueError("a decoder without attention has no alignment to show")
        att = torch.stack(weights, dim=1)  # (B, T, S)
        if self.reverse_source:  # back to source order (reverse_words is its own inverse)
            index = reverse_words(torch.arange(att.size(-1), device=att.device).expand(att.size(0), -1), src_lengths)
            att = att.gather(2, index[:, None, :].expand_as(att))
        return logits, att
