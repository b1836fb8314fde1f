"""The parallel-recurrence families: minGRU, minLSTM (Feng et al. 2024) and a selective SSM (Mamba-1
style, Gu & Dao 2023), one LightningModule for the three, chosen by `layer` (issue 35).

The network is `seqbench.nn.parallel_stack`: embedding -> N pre-norm residual blocks of the layer ->
LayerNorm -> head. The layers' state is linear in itself, so training reads a whole window as one
scan, and generation steps one token at a time from a fixed-size state.

On `lm` it is a stateful language model exactly as the recurrent family is (`RecurrentModel`):
contiguous streams in truncated-BPTT windows (`lm_batching = "stream"`), the state carried from window
to window detached and reset when a stream starts again (window 0), one state per stage, the training
state saved in checkpoints so a resumed run continues the stream bit for bit; evaluation therefore
scores every token once with everything before it. `generate` reads the prompt with the parallel form
and then runs the step form, O(1) per token.

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
from seqbench.models.base import SeqModel
from seqbench.nn.flops import parallel_recurrent_train_flops
from seqbench.nn.parallel_stack import Layer, ParallelEncoder, ParallelLM
from seqbench.nn.recurrent_lm import detach_state, map_state
from seqbench.nn.sampling import sample_next


class ParallelRecurrentModel(SeqModel):
    lm_batching = "stream"

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
        bidirectional: bool = False,
        pooling: Literal["last", "mean", "max"] = "last",
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        # run.py logs the config once
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)
        self.pooling = pooling
        self._state: dict[str, object] = {}
        options = {"d_state": d_state, "expand": expand, "d_conv": d_conv, "selective": selective,
                   "scan": scan}
        if layer != "ssm" and not selective:
            raise ConfigError("model.selective=false builds the time-invariant SSM control; it means "
                              f"nothing for model.layer={layer}: set model=ssm.")
        if spec.task == "lm":
            if bidirectional:
                raise ConfigError("model.bidirectional=true cannot model language left to right: the "
                                  "right-to-left stack sees the token it must predict; use it for "
                                  "classification or tagging.")
            self.net = ParallelLM(spec.vocab_size, layer, d_model, num_layers, dropout, tie_weights,
                                  **options)
            return
        if spec.task == "image" and spec.input_dim is None:
            raise ConfigError("a parallel recurrent model reads images as sequences: set "
                              "data.as_sequence=rows, pixels or permuted_pixels.")
        self.encoder = ParallelEncoder(layer, d_model, num_layers, dropout, bidirectional, spec.vocab_size,
                                       spec.input_dim, spec.pad_id, **options)
        self.head = nn.Linear(self.encoder.output_size, 1 if spec.task == "regression" else spec.num_classes)

    # -- classification, regression, tagging, images ---------------------------------------------
    def classify(self, batch: dict) -> torch.Tensor:
        return self.head(self.encoder.summary(batch["input"], batch.get("lengths"), self.pooling))  # (B, C)

    def classify_image(self, batch: dict) -> torch.Tensor:
        if "input" not in batch:
            raise ConfigError("a parallel recurrent model reads images as sequences: set "
                              "data.as_sequence=rows, pixels or permuted_pixels.")
        return self.classify(batch)

    def regress(self, batch: dict) -> torch.Tensor:
        return self.classify(batch).squeeze(-1)  # (B,)

    def tag(self, batch: dict) -> torch.Tensor:
        states, _ = self.encoder(batch["input"], batch.get("lengths"))  # (B, T, D)
        return self.head(states)  # (B, T, K)

    # -- lm ---------------------------------------------------------------------------------------
    def lm_logits(self, batch: dict, stage: str) -> torch.Tensor:
        tokens = batch["input"]
        state = None if batch.get("window", 0) == 0 else self._state.get(stage)
        state = map_state(lambda s: s.to(tokens.device), state)  # a resumed state arrives on the CPU
        logits, state = self.net(tokens, state)
        self._state[stage] = detach_state(state)
        return logits

    def next_token_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, V) of the next token from a zero state (`analysis.context_usage`)."""
        return self.net.last_logits(tokens)[0]

    def read_on(self, tokens: torch.Tensor, state=None) -> tuple[torch.Tensor, object]:
        """Continue reading a stream from `state`: tokens (B, T) -> next-token logits (B, V), new state."""
        return self.net.last_logits(tokens, state)

    def flops_per_token(self, length: int | None = None) -> float | None:
        """Training FLOPs per token (`seqbench.nn.flops`); a step's cost does not depend on T."""
        if self.spec.task != "lm":
            return None
        h = self.hparams
        return parallel_recurrent_train_flops(h.layer, h.d_model, h.num_layers, self.spec.vocab_size,
                                              h.d_state, h.expand, h.d_conv)

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

    # -- checkpoints carry the training stream's state (batch first: dim 0 holds the rows) -------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        state = self._state.get("train")
        if state is not None and self.trainer is not None and self.trainer.world_size > 1:
            state = map_state(lambda s: torch.cat(list(self.all_gather(s)), dim=0), state)
        checkpoint["train_state"] = map_state(lambda s: s.cpu(), state)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        state = checkpoint.get("train_state")
        if state is not None and self._trainer is not None and self.trainer.world_size > 1:
            rank, world = self.trainer.global_rank, self.trainer.world_size
            state = map_state(lambda s: s.chunk(world, dim=0)[rank].clone(), state)
        self._state["train"] = state
