"""What the attention LM families share: fixed `context` windows in, logits out, windowed sampling.

A family subclasses `WindowedLM`, builds `self.net` (tokens (B, T) -> logits (B, T, V), at most
`context` positions) in `__init__` from its own typed arguments (they are the config surface that
`config_check` validates), and calls `self.attach(net, context, compile)`. The LM DataModule sees
`lm_batching = "windows"` and cuts windows of `self.context` tokens for it.
"""

from __future__ import annotations

import torch
from torch import nn

from seqbench.models.base import SeqModel
from seqbench.nn.transformer_lm import generate_windowed


class WindowedLM(SeqModel):
    lm_batching = "windows"

    def attach(self, net: nn.Module, context: int, compile: bool = False) -> None:
        self.context = context  # the LM DataModule cuts windows of this length
        self.net = net
        if compile:
            self.net.compile()  # in place: parameter names (and checkpoints) stay those of the eager model

    def lm_logits(self, batch: dict, stage: str) -> torch.Tensor:
        return self.net(batch["input"])  # (B, T, V)

    def generate(self, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> torch.Tensor:
        """prompt (B, T) -> (B, T + max_new_tokens), reading at most `context` tokens back."""
        self.eval()
        return generate_windowed(self.net, prompt, max_new_tokens, self.context, temperature, top_k)
