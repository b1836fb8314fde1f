"""The parallel-recurrence families: minGRU, minLSTM (Feng et al. 2024), a selective SSM (Mamba-1
style, Gu & Dao 2023; issue 35) and Mamba-2's SSD (Dao & Gu 2024; issue 69), one LightningModule for the
four, chosen by `layer`.

The network is `seqbench.nn.parallel_stack`: embedding -> N pre-norm residual blocks of the layer ->
LayerNorm -> head. The layers' state is linear in itself, so training reads a whole window as one
scan, and generation steps one token at a time from a fixed-size state.

On `lm` it is a stateful language model exactly as the recurrent family is (`RecurrentModel`):
contiguous streams in truncated-BPTT windows, the state carried from window to window, the training
state saved in checkpoints (`seqbench.models.stream_lm.StreamLM`, shared with the recurrent family);
evaluation therefore scores every token once with everything before it. `generate` reads the prompt
with the parallel form and then runs the step form, O(1) per token.

On `classification`, `regression`, `tagging` and `image` (an image read as a sequence of rows or
pixels, `data.as_sequence`) a `ParallelEncoder` reads the sequence, optionally in both directions,
and a linear head reads its summary or every position. Translation, the CRF and character features
stay with the recurrent family (its encoder-decoder and tagger options), not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.sequence_heads import SequenceHeads, require_sequence_images
from seqbench.models.stream_lm import StreamLM
from seqbench.nn.flops import parallel_recurrent_train_flops
from seqbench.nn.parallel_stack import Layer, ParallelEncoder, ParallelLM
from seqbench.nn.sampling import sample_next


class ParallelRecurrentModel(StreamLM, SequenceHeads):
    state_batch_dim = 0  # the parallel stack's states are batch first

    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "epoch",
        scheduler_monitor: str | None = None,
        layer: Layer = "mingru",
        d_model: int = 128,
        num_layers: int = 2,
        dropout: float = 0.0,
        tie_weights: bool = True,
        d_state: int = 16,
        expand: int = 2,
        d_conv: int = 4,
        selective: bool = True,
        scan: Literal["loop", "doubling", "log"] | None = None,
        headdim: int = 64,
        bidirectional: bool = False,
        pooling: Literal["last", "mean", "max"] = "last",
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        # run.py logs the config once
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)
        self.pooling = pooling
        options = {"d_state": d_state, "expand": expand, "d_conv": d_conv, "selective": selective,
                   "scan": scan, "headdim": headdim}
        if layer != "ssm" and not selective:  # SSD's decay reads the input too; it has no control of its own
            raise ConfigError("model.selective=false builds the time-invariant SSM control; it means "
                              f"nothing for model.layer={layer}: set model=ssm.")
        self.build_network(layer, d_model, num_layers, dropout, tie_weights, bidirectional, options)

    def build_network(self, layer: str, d_model: int, num_layers: int, dropout: float, tie_weights: bool,
                      bidirectional: bool, options: dict) -> None:
        """The task's network around `num_layers` blocks of `layer`: the LM (`self.net`), or the encoder and
        its head (shared with `seqbench.models.mixer`, whose layer comes from an import path)."""
        spec = self.spec
        if spec.task == "lm":
            if bidirectional:
                raise ConfigError("model.bidirectional=true cannot model language left to right: the "
                                  "right-to-left stack sees the token it must predict; use it for "
                                  "classification or tagging.")
            self.net = ParallelLM(spec.vocab_size, layer, d_model, num_layers, dropout, tie_weights,
                                  **options)
            return
        require_sequence_images(spec)
        self.encoder = ParallelEncoder(layer, d_model, num_layers, dropout, bidirectional, spec.vocab_size,
                                       spec.input_dim, spec.pad_id, **options)
        self.head = nn.Linear(self.encoder.output_size, 1 if spec.task == "regression" else spec.num_classes)

    # -- lm ---------------------------------------------------------------------------------------
    def flops_per_token(self, length: int | None = None) -> float | None:
        """Training FLOPs per token (`seqbench.nn.flops`); a step's cost does not depend on T, except
        SSD's, whose chunks are min(chunk, T) steps long."""
        if self.spec.task != "lm":
            return None
        h = self.hparams
        ssd = {"headdim": h.headdim, "length": length} if h.layer == "ssd" else {}
        return parallel_recurrent_train_flops(h.layer, h.d_model, h.num_layers, self.spec.vocab_size,
                                              h.d_state, h.expand, h.d_conv, **ssd)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> torch.Tensor:
        """prompt (B, T) -> (B, T + max_new_tokens): the prompt in one parallel read, then the step form."""
        self.eval()
        logits, state = self.net.last_logits(prompt)
        out = [prompt]
        for _ in range(max_new_tokens):
            token = sample_next(logits, temperature, top_k)  # (B, 1)
            out.append(token)
            logits, state = self.net.step(token[:, 0], state)
        return torch.cat(out, dim=1)
