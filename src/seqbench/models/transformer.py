"""The Transformer family (Vaswani et al. 2017; `seqbench.nn.transformer_lm` and `seqbench.nn.transformer`).

On `lm` it is the paper's decoder stack without cross-attention: masked self-attention blocks,
post-LN as in the paper (`model.norm_first=true` for pre-LN), sinusoidal positions, ReLU FFN, tied
embedding and output. Like GPT it reads fixed windows of `context` tokens and is evaluated with a
sliding window over the whole split. The encoder-decoder for translation is built from the same
blocks (`TransformerStack(cross_attention=True)`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal


from seqbench.data.spec import TaskSpec
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
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"])
        self.attach(TransformerLM(spec.vocab_size, context, n_layer, n_head, d_model, d_ff, dropout, norm_first,
                                  positions, tie_weights, attn_impl, bias), context, compile)
