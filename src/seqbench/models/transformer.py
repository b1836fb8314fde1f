"""The Transformer family (Vaswani et al. 2017; `seqbench.nn.transformer_lm` and `seqbench.nn.transformer`).

On `lm` it is the paper's decoder stack without cross-attention: masked self-attention blocks,
post-LN as in the paper (`model.norm_first=true` for pre-LN), sinusoidal positions, ReLU FFN, tied
embedding and output. Like GPT it reads fixed windows of `context` tokens and is evaluated with a
sliding window over the whole split. The encoder-decoder for translation is built from the same
blocks (`TransformerStack(cross_attention=True)`).

On `classification`, `regression` and `tagging` the same stack is the paper's encoder: no causal
mask, padding keys masked, a linear head on the mean of the real positions' states
(`model.pooling=mean|max|last`) or on every state (tagging). `model.causal=true` reads left to right
instead, to compare the two masks on one task; a language model is always causal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal


from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.windowed import WindowedLM
from seqbench.nn.transformer_lm import TransformerLM


class TransformerModel(WindowedLM):
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
        d_ff: int | None = None,
        context: int = 256,
        dropout: float = 0.1,
        norm_first: bool = False,
        positions: Literal["sinusoidal", "learned"] = "sinusoidal",
        tie_weights: bool = True,
        bias: bool = True,
        attn_impl: Literal["sdpa", "reference"] = "sdpa",
        compile: bool = False,
        causal: bool | None = None,
        pooling: Literal["last", "mean", "max"] = "mean",
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"])
        if spec.task == "lm" and causal is False:
            raise ConfigError("model.causal=false cannot model language left to right: every position would "
                              "see the token it must predict; use it for classification or tagging.")
        self.causal = spec.task == "lm" if causal is None else causal
        self.pooling = pooling
        context = self.sequence_context(context)
        self.attach(TransformerLM(spec.vocab_size, context, n_layer, n_head, d_model, d_ff, dropout, norm_first,
                                  positions, tie_weights, attn_impl, bias, spec.input_dim), context, compile, d_model)
