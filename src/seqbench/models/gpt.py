"""The GPT family (decoder-only, pre-LN, learned positions, GELU, tied embeddings; `seqbench.nn.gpt`).

On `lm` it reads fixed windows of `context` tokens (`lm_batching = "windows"`): training on shuffled
tiles of the stream, evaluation by a sliding window over the whole split (`data.eval_stride`), scored
by the same perplexity code as the recurrent family. Sizes are named presets (`model=gpt_nano`, ...)
or explicit `model.n_layer/n_head/d_model`.

On a GPU, `trainer.precision=bf16-mixed` runs the matmuls and attention in bf16 under autocast (the
loss is computed in float32 by the task), and `model.compile=true` compiles the network with
`torch.compile`; both leave the CPU path as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

from seqbench.data.spec import TaskSpec
from seqbench.models.base import SeqModel
from seqbench.nn.gpt import GPT, GPTConfig
from seqbench.nn.transformer_lm import generate_windowed


class GPTModel(SeqModel):
    lm_batching = "windows"

    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "step",
        scheduler_monitor: str | None = None,
        n_layer: int = 4,
        n_head: int = 4,
        d_model: int = 128,
        context: int = 256,
        dropout: float = 0.0,
        bias: bool = True,
        attn_impl: Literal["sdpa", "reference"] = "sdpa",
        compile: bool = False,
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"])
        self.context = context  # the LM DataModule cuts windows of this length
        self.net = GPT(GPTConfig(spec.vocab_size, context, n_layer, n_head, d_model, dropout, bias, attn_impl))
        if compile:
            self.net.compile()  # in place: parameter names (and checkpoints) stay those of the eager model

    def lm_logits(self, batch: dict, stage: str) -> torch.Tensor:
        return self.net(batch["input"])  # (B, T, V)

    def generate(self, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> torch.Tensor:
        """prompt (B, T) -> (B, T + max_new_tokens), reading at most `context` tokens back."""
        self.eval()
        return generate_windowed(self.net, prompt, max_new_tokens, self.context, temperature, top_k)

    def flops_per_token(self) -> float:
        return self.net.flops_per_token(self.context)
