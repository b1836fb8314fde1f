"""The GPT family (decoder-only, pre-LN, learned positions, GELU, tied embeddings; `seqbench.nn.gpt`).

On `lm` it reads fixed windows of `context` tokens (`lm_batching = "windows"`): training on shuffled
tiles of the stream, evaluation by a sliding window over the whole split (`data.eval_stride`), scored
by the same perplexity code as the recurrent family. Sizes are named presets (`model=gpt_nano`, ...)
or explicit `model.n_layer/n_head/d_model`.

On a GPU, `trainer.precision=bf16-mixed` runs the matmuls and attention in bf16 under autocast (the
loss is computed in float32 by the task), and `model.compile=true` compiles the network with
`torch.compile`; both leave the CPU path as it is.

On `classification`, `regression` and `tagging` (SST-2, the synthetic probes) it reads the whole
sequence left to right and a linear head reads the last real token's state (`model.pooling=last`,
the GPT paper's choice) or every state (tagging); `models/windowed.py` has the details.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal


from seqbench.data.spec import TaskSpec
from seqbench.models.windowed import WindowedLM
from seqbench.nn.gpt import GPT, GPTConfig


class GPTModel(WindowedLM):
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
        pooling: Literal["last", "mean", "max"] = "last",
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"])
        self.pooling = pooling
        context = self.sequence_context(context)
        net = GPT(GPTConfig(spec.vocab_size, context, n_layer, n_head, d_model, dropout, bias, attn_impl,
                            spec.input_dim))
        self.attach(net, context, compile, d_model)

    def flops_per_token(self) -> float:
        return self.net.flops_per_token(self.context)
