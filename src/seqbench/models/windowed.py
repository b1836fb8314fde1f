"""What the attention families share: windows on `lm`, one linear head on the sequence tasks.

A family subclasses `WindowedLM`, builds `self.net` in `__init__` from its own typed arguments (they
are the config surface that `config_check` validates) and calls `self.attach(net, context, compile)`.
The net maps tokens (B, T) to logits (B, T, V) for language modelling, and exposes
`features(x, causal, key_padding_mask) -> (B, T, C)` for everything else.

- `lm`: the LM DataModule sees `lm_batching = "windows"` and cuts windows of `self.context` tokens.
- `classification`, `regression`: one linear layer on a pooled summary of the states. `last` is the
  state of each row's last real token — GPT's choice (Radford et al. 2018, §3.2: the final token's
  activation feeds the task's linear layer), the only one that has read the whole input under a
  causal mask; `mean` / `max` pool the real positions, the usual choice for a bidirectional encoder.
- `tagging`: the same layer at every position.

Whether a family reads with a causal mask on these tasks is its own decision (`self.causal`): GPT
always does (decoder-only), the Transformer family by default does not (it is then the paper's
encoder, self-attention over the whole input with padding keys masked out).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from seqbench.models.base import SeqModel
from seqbench.nn.recurrent_encoder import masked_pool
from seqbench.nn.transformer_lm import generate_windowed

Pooling = Literal["last", "mean", "max"]


class WindowedLM(SeqModel):
    lm_batching = "windows"
    kv_cache = True  # generate() (and a Transformer's translation decoder) read a key/value cache
    causal = True  # how `features` reads on the sequence tasks (a family may set it per instance)
    pooling: Pooling = "last"

    def attach(self, net: nn.Module, context: int, compile: bool = False, d_model: int | None = None) -> None:
        """Keep `net`, and on a sequence task add the linear head on its `d_model`-wide states."""
        self.context = context  # the LM DataModule cuts windows of this length
        self.net = net
        if self.spec.task in ("classification", "regression", "tagging"):
            outputs = 1 if self.spec.task == "regression" else self.spec.num_classes
            self.head = nn.Linear(d_model, outputs)
        if compile:
            self.net.compile()  # in place: parameter names (and checkpoints) stay those of the eager model

    def sequence_context(self, context: int) -> int:
        """Positions a sequence task needs: the configured context, or the data's longest sequence."""
        if self.spec.task != "lm" and self.spec.max_len:
            return max(context, self.spec.max_len)
        return context

    # -- lm ---------------------------------------------------------------------------------------
    #: `lm_logits` takes `positions`: the output layer at the scored positions alone (`seqbench.nn.positions_scored`)
    head_at_positions = True

    def lm_logits(self, batch: dict, stage: str, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the window, or (N, V) at the N True `positions` (B, T)."""
        return self.net(batch["input"], positions=positions)

    def next_token_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, V) of the next token, read as trained: the last `context` tokens
        (`seqbench.analysis.context_usage` measures how much of them the model uses)."""
        return self.net.last_logits(tokens[:, -self.context:])

    def window_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T <= context) -> logits (B, T, V) at every position of one window, read as in
        training (`seqbench.analysis.window_position` measures the loss by position)."""
        if tokens.size(1) > self.context:
            raise ValueError(f"a window of {tokens.size(1)} tokens is longer than the trained context {self.context}")
        return self.net(tokens)

    def flops_per_token(self, length: int | None = None) -> float | None:
        """On `lm`: at the window length trained on (the attention term grows with it)."""
        return self.net.flops_per_token(length or self.context) if self.spec.task == "lm" else None

    def generate(self, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, use_cache: bool = True) -> torch.Tensor:
        """prompt (B, T) -> (B, T + max_new_tokens), reading at most `context` tokens back; `use_cache`
        keeps keys and values between steps until the window slides (`generate_windowed`)."""
        self.eval()
        return generate_windowed(self.net, prompt, max_new_tokens, self.context, temperature, top_k, use_cache)

    # -- classification, regression, tagging -----------------------------------------------------
    def states(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """The net's states (B, T, C) for a padded batch, and each row's length (B,)."""
        x = batch["input"]
        B, T = x.shape[:2]
        lengths = batch.get("lengths")
        if lengths is None:
            lengths = torch.full((B,), T, dtype=torch.long, device=x.device)
        padding = None
        if not self.causal and bool((lengths < T).any()):
            # a causal row never reads the padding to its right; a bidirectional one must be told
            padding = torch.arange(T, device=x.device)[None, :] >= lengths[:, None]  # (B, T) True = pad
        return self.net.features(x, causal=self.causal, key_padding_mask=padding), lengths

    def classify(self, batch: dict) -> torch.Tensor:
        states, lengths = self.states(batch)  # (B, T, C), (B,)
        if self.pooling == "last":
            summary = states[torch.arange(states.size(0), device=states.device), lengths - 1]  # (B, C)
        else:
            summary = masked_pool(states, lengths, self.pooling)  # (B, C)
        return self.head(summary)  # (B, K)

    def regress(self, batch: dict) -> torch.Tensor:
        return self.classify(batch).squeeze(-1)  # (B,)

    def tag(self, batch: dict) -> torch.Tensor:
        states, _ = self.states(batch)
        return self.head(states)  # (B, T, K)
