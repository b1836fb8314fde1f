"""Initialisation options for the recurrent layers, applied after a network is built.

Two known helpers for long gaps, both off by default (`model.forget_bias=null`,
`model.recurrent_init=default` keep PyTorch's init: every weight and bias ~ U(±1/√H)):

- **Forget-gate bias** (Gers et al. 2000; Jozefowicz et al. 2015), LSTM only. PyTorch's default
  gives the forget gate a pre-activation bias b_if + b_hf with mean 0, so a fresh cell keeps about
  σ(0) = 1/2 of its memory per step; a bias of 1 keeps σ(1) = 0.73. The fused LSTM has two bias
  vectors; the forget slice of `bias_ih` is set to the value and that of `bias_hh` to 0, so their
  sum — the only thing the cell sees — is exactly the value asked for.
- **Recurrent weights**: `orthogonal` (Saxe et al. 2014; Arjovsky et al. 2016) makes each gate's
  H x H block of `weight_hh` orthogonal, so a fresh linear recurrence neither shrinks nor grows
  the state; `identity` (Le et al. 2015, the IRNN: use it with `model.nonlinearity=relu` on the
  vanilla RNN) sets each block to the identity. Biases are left as they are.

Applied to every recurrent layer a module holds (`nn.RNN/LSTM/GRU` and `seqbench.nn.cells.
ReferenceRNN`, which share parameter names), every layer and direction; the rest of the network is
untouched. A separate pass so that any model (the encoder, the LM, seq2seq) gets the same options
from one call after its own initialisation.
"""

from __future__ import annotations

import torch
from torch import nn

from seqbench.errors import ConfigError
from seqbench.nn.cells import GATES, ReferenceRNN

RECURRENT_INITS = ("default", "orthogonal", "identity")


def _cell(module: nn.Module) -> str | None:
    """'lstm' | 'gru' | 'rnn' for a recurrent layer, None for anything else."""
    if isinstance(module, ReferenceRNN):
        return module.mode
    if isinstance(module, nn.RNNBase):
        return {"LSTM": "lstm", "GRU": "gru"}.get(module.mode, "rnn")  # RNN_TANH, RNN_RELU
    return None


def recurrent_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(cell, m) for m in model.modules() if (cell := _cell(m)) is not None]


@torch.no_grad()
def init_recurrence(model: nn.Module, forget_bias: float | None = None, recurrent_init: str = "default") -> None:
    """Set the forget-gate bias (LSTM) and/or the recurrent weights of every recurrent layer in `model`."""
    if recurrent_init not in RECURRENT_INITS:
        raise ConfigError(f"model.recurrent_init={recurrent_init!r} is not an option; choose one of "
                          f"{', '.join(RECURRENT_INITS)}.")
    layers = recurrent_layers(model)
    if forget_bias is not None and any(cell != "lstm" for cell, _ in layers):
        raise ConfigError("model.forget_bias sets the LSTM's forget gate; this network has no LSTM layer "
                          "(set model.forget_bias=null for the GRU and the vanilla RNN).")
    for cell, layer in layers:
        H = layer.hidden_size
        for name, p in layer.named_parameters():
            # weight drop (AWD-LSTM) keeps the raw matrix at parametrizations.<name>.original
            name = name.removeprefix("parametrizations.").removesuffix(".original")
            if forget_bias is not None and name.startswith("bias_"):
                # gate order i, f, g, o: the forget slice is [H, 2H)
                p[H : 2 * H] = forget_bias if name.startswith("bias_ih") else 0.0
            if recurrent_init != "default" and name.startswith("weight_hh"):
                for k in range(GATES[cell]):  # one H x H block per gate
                    block = p[k * H : (k + 1) * H]
                    if recurrent_init == "orthogonal":
                        nn.init.orthogonal_(block)
                    else:
                        block.copy_(torch.eye(H, dtype=p.dtype))
