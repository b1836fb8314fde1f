"""`model=mixer`: the backbone of the parallel recurrences around a layer named by its import path (issue 65).

    python src/train.py model=mixer model.mixer=mypkg.layers:MyMixer data=ptb
    python src/train.py model=mixer model.mixer=examples.lru:LRU preset=ptb/mixer      # sized as the PTB families

The layer (`seqbench.nn.mixer`: the interface) is stacked exactly as minGRU, minLSTM and the SSM are
(`seqbench.models.parallel_recurrent`): embedding -> `num_layers` pre-norm residual blocks -> LayerNorm ->
the task's head, on every task they train on. On `lm` it is a stateful truncated-BPTT language model, the
layer's state carried from window to window; a layer that says it is stateless reads each window alone, and
one that takes no state without saying so is refused there (`check_options`, before any data is read).

Its presets (`preset=ptb/mixer`, `preset=frontier/ptb/mixer size=s`, ...) train it as each comparison trains
the parallel recurrences, and its width is solved when the run starts (`sizing:`, `seqbench.presets.sizing`), since
the layer is known only then. Its training FLOPs per token are the layer's formula where it gives one, else
measured on one training step (`seqbench.nn.flop_count`), and the run's record says which (`flops_source`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F

from seqbench.data.spec import TaskSpec
from seqbench.models.parallel_recurrent import ParallelRecurrentModel
from seqbench.nn.flop_count import counted_flops
from seqbench.nn.flops import TRAIN_MULTIPLIER
from seqbench.nn.mixer import MixerLayer, check_streams, resolve, tokens_for
from seqbench.nn.sampling import sample_next

MEASURE_ROWS = 2  # rows of the one step FlopCounterMode measures (a per-token count does not depend on them)


class MixerModel(ParallelRecurrentModel):
    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "epoch",
        scheduler_monitor: str | None = None,
        mixer: str = "",
        mixer_options: dict | None = None,
        d_model: int = 128,
        num_layers: int = 2,
        dropout: float = 0.0,
        tie_weights: bool = True,
        bidirectional: bool = False,
        pooling: Literal["last", "mean", "max"] = "last",
    ) -> None:
        # the base of the parallel recurrences, not its __init__: that one builds a layer from its name table
        super(ParallelRecurrentModel, self).__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)
        self.check_options({"mixer": mixer}, spec.task)
        self.pooling = pooling
        self._flops: dict[int, float] = {}
        self.build_network(mixer, d_model, num_layers, dropout, tie_weights, bidirectional,
                           {"mixer_options": dict(mixer_options or {})})

    @classmethod
    def check_options(cls, model, task: str) -> None:
        """Before any data is read (seqbench.training.config_check): the import path resolves, and on a language model's
        stream the layer carries a state or says it needs none."""
        path = model.get("mixer")
        layer = resolve(path)
        if task == "lm":
            check_streams(layer, path)

    def layers(self) -> list[MixerLayer]:
        stacks = [self.net.stack] if self.spec.task == "lm" else [
            s for s in (self.encoder.forward_stack, self.encoder.backward_stack) if s is not None]
        return [block.mixer for stack in stacks for block in stack.blocks]

    # -- FLOPs: the layer's formula, else measured -------------------------------------------------
    @property
    def flops_source(self) -> str:
        """"formula" when every layer gives its own, else "measured" (FlopCounterMode on one training step)."""
        return "formula" if all(hasattr(m.inner, "train_flops_per_token") for m in self.layers()) else "measured"

    def flops_per_token(self, length: int | None = None) -> float | None:
        """Training FLOPs per token on windows of `length` (the last length asked for, or 64, when None)."""
        if self.spec.task != "lm":
            return None
        length = int(length or next(reversed(self._flops), 64))
        if length not in self._flops:
            self._flops[length] = self._formula(length) if self.flops_source == "formula" else self._measure(length)
        return self._flops[length]

    def _formula(self, length: int) -> float:
        d, vocab = self.hparams.d_model, self.spec.vocab_size
        # the output projection (tied or not) is a d x V matmul, 3x for training, as every family counts it
        return sum(m.train_flops_per_token(length) for m in self.layers()) + TRAIN_MULTIPLIER * 2 * d * vocab

    def _measure(self, length: int) -> float:
        """One training step of a copy of the network on the CPU, counted: the model and the RNG streams a run
        is seeded with are left as they were."""
        net = copy.deepcopy(self.net).to("cpu", torch.float32).train()
        tokens = tokens_for(self.spec.vocab_size, MEASURE_ROWS, length + 1, torch.device("cpu"))

        def step() -> torch.Tensor:
            logits, _ = net(tokens[:, :-1])  # (B, T, V)
            return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())

        with torch.random.fork_rng(devices=[]):  # dropout in the copy draws from a forked stream
            return counted_flops(step) / (MEASURE_ROWS * length)

    # -- generation: a stateless layer has no step; it re-reads the prefix ------------------------
    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> torch.Tensor:
        if all(m.stateful or hasattr(m.inner, "step") for m in self.layers()):
            return super().generate(prompt, max_new_tokens, temperature, top_k)
        self.eval()
        out = prompt
        for _ in range(max_new_tokens):  # O(T) a token: the whole prefix through the stack again
            logits, _ = self.net.last_logits(out)
            out = torch.cat([out, sample_next(logits, temperature, top_k)], dim=1)
        return out

