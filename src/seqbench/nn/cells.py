"""Recurrent cells written from the textbook equations, in PyTorch's parameter layout.

These are the readable reference for the fused cuDNN/oneDNN kernels behind `nn.RNN/LSTM/GRU`. They
use the same parameter names and gate order (`weight_ih_l0`, `bias_hh_l1_reverse`, ...; LSTM gates
i, f, g, o; GRU gates r, z, n), so one state_dict loads into either implementation and the tests
can check they agree to 1e-5. With x the input, h the previous hidden state and c the cell:

LSTM (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000):
    i = σ(W_ii x + b_ii + W_hi h + b_hi)        input gate
    f = σ(W_if x + b_if + W_hf h + b_hf)        forget gate
    g = tanh(W_ig x + b_ig + W_hg h + b_hg)     candidate cell
    o = σ(W_io x + b_io + W_ho h + b_ho)        output gate
    c' = f ⊙ c + i ⊙ g,   h' = o ⊙ tanh(c')

GRU (Cho et al. 2014):
    r = σ(W_ir x + b_ir + W_hr h + b_hr)        reset gate
    z = σ(W_iz x + b_iz + W_hz h + b_hz)        update gate
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
    h' = (1 − z) ⊙ n + z ⊙ h

Elman RNN:  h' = tanh(W_ih x + b_ih + W_hh h + b_hh)   (or relu)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

GATES = {"lstm": 4, "gru": 3, "rnn": 1}  # gate blocks per cell: the weight layout here, the FLOPs in nn.flops


def lstm_cell(x: Tensor, state: tuple[Tensor, Tensor], w_ih: Tensor, w_hh: Tensor, b_ih: Tensor,
              b_hh: Tensor) -> tuple[Tensor, Tensor]:
    h, c = state
    i, f, g, o = (x @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def gru_cell(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    x_r, x_z, x_n = (x @ w_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h @ w_hh.T + b_hh).chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)  # the reset gate scales the recurrent term only, as in cuDNN
    return (1 - z) * n + z * h


def rnn_cell(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor,
             nonlinearity: str = "tanh") -> Tensor:
    pre = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    return torch.tanh(pre) if nonlinearity == "tanh" else torch.relu(pre)


class ReferenceRNN(nn.Module):
    """A drop-in for `nn.RNN/LSTM/GRU(batch_first=True)` that runs the cells above in a Python loop.

    Slow by design (one small matmul per step): it exists to be read and to check the fused kernels.
    Inter-layer dropout, bidirectional layers and the (h, c) / h state formats match PyTorch's.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 dropout: float = 0.0, bidirectional: bool = False, nonlinearity: str = "tanh") -> None:
        super().__init__()
        if mode not in GATES:
            raise ValueError(f"unknown recurrent cell {mode!r}; choose one of {', '.join(GATES)}")
        self.mode, self.hidden_size, self.num_layers = mode, hidden_size, num_layers
        self.dropout, self.bidirectional, self.nonlinearity = dropout, bidirectional, nonlinearity
        self.batch_first = True
        directions = 2 if bidirectional else 1
        gate_size = GATES[mode] * hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for suffix in ("", "_reverse")[:directions]:
                self.register_parameter(f"weight_ih_l{layer}{suffix}", nn.Parameter(torch.empty(gate_size, layer_input)))
                self.register_parameter(f"weight_hh_l{layer}{suffix}", nn.Parameter(torch.empty(gate_size, hidden_size)))
                self.register_parameter(f"bias_ih_l{layer}{suffix}", nn.Parameter(torch.empty(gate_size)))
                self.register_parameter(f"bias_hh_l{layer}{suffix}", nn.Parameter(torch.empty(gate_size)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)  # PyTorch's default for its recurrent modules
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def _weights(self, layer: int, suffix: str) -> tuple[Tensor, ...]:
        return tuple(getattr(self, f"{n}_l{layer}{suffix}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))

    def _run_direction(self, x: Tensor, h: Tensor, c: Tensor | None, weights, reverse: bool,
                       lengths: Tensor | None):
        """x: (B, T, C) -> outputs (B, T, H) and the final (h, c) of one direction of one layer.

        With `lengths`, row b has lengths[b] real steps: the state stops changing after them (so
        the final state is the state at the sequence's end, as with packed sequences), and the
        reverse direction starts at the row's last real step, not at its padding.
        """
        B, T = x.shape[:2]
        if reverse:
            x = _flip_within(x, lengths)
        outputs = []
        for t in range(T):
            if self.mode == "lstm":
                h_new, c_new = lstm_cell(x[:, t], (h, c), *weights)
            elif self.mode == "gru":
                h_new, c_new = gru_cell(x[:, t], h, *weights), None
            else:
                h_new, c_new = rnn_cell(x[:, t], h, *weights, nonlinearity=self.nonlinearity), None
            if lengths is None:
                h, c = h_new, c_new
            else:
                live = (t < lengths).unsqueeze(1)  # (B, 1): rows still inside their sequence
                h = torch.where(live, h_new, h)
                c = torch.where(live, c_new, c) if c is not None else None
            outputs.append(h_new)
        out = torch.stack(outputs, dim=1)  # (B, T, H)
        return (_flip_within(out, lengths) if reverse else out), h, c

    def forward(self, x: Tensor, state=None, lengths: Tensor | None = None):
        B = x.size(0)
        directions = 2 if self.bidirectional else 1
        if state is None:
            zeros = x.new_zeros(self.num_layers * directions, B, self.hidden_size)
            state = (zeros, zeros.clone()) if self.mode == "lstm" else zeros
        h0, c0 = state if self.mode == "lstm" else (state, None)
        final_h, final_c = [], []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0:
                x = nn.functional.dropout(x, self.dropout, self.training)  # between layers, as PyTorch
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                out, h, c = self._run_direction(x, h0[k], None if c0 is None else c0[k],
                                                self._weights(layer, suffix), reverse=d == 1, lengths=lengths)
                outs.append(out)
                final_h.append(h)
                final_c.append(c)
            x = torch.cat(outs, dim=-1)  # (B, T, H * directions)
        h_n = torch.stack(final_h)
        return x, ((h_n, torch.stack(final_c)) if self.mode == "lstm" else h_n)


def _flip_within(x: Tensor, lengths: Tensor | None) -> Tensor:
    """Reverse each row's first lengths[b] steps, leaving its padding in place (an involution)."""
    T = x.size(1)
    if lengths is None:
        return x.flip(1)
    t = torch.arange(T, device=x.device).unsqueeze(0)  # (1, T)
    idx = torch.where(t < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - t, t)  # (B, T)
    return x.gather(1, idx.unsqueeze(-1).expand_as(x))


def make_rnn(mode: str, input_size: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0,
             bidirectional: bool = False, nonlinearity: str = "tanh", impl: str = "fused") -> nn.Module:
    """The fused PyTorch module (cuDNN on GPU, oneDNN on CPU) or the reference loop, same parameters."""
    if impl == "reference":
        return ReferenceRNN(mode, input_size, hidden_size, num_layers, dropout, bidirectional, nonlinearity)
    if impl != "fused":
        raise ValueError(f"unknown recurrent implementation {impl!r}; choose 'fused' or 'reference'")
    kwargs = dict(num_layers=num_layers, dropout=dropout if num_layers > 1 else 0.0,
                  bidirectional=bidirectional, batch_first=True)
    if mode == "lstm":
        return nn.LSTM(input_size, hidden_size, **kwargs)
    if mode == "gru":
        return nn.GRU(input_size, hidden_size, **kwargs)
    if mode == "rnn":
        return nn.RNN(input_size, hidden_size, nonlinearity=nonlinearity, **kwargs)
    raise ValueError(f"unknown recurrent cell {mode!r}; choose one of {', '.join(GATES)}")
