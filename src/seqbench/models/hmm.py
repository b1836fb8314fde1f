"""The hidden Markov model family: the statistical baseline beside the neural ones (`seqbench.nn.hmm`).

* `tagging` (CoNLL-2003 POS or NER): a supervised HMM whose states are the tags. It has no
  gradient: the Lightning loop's one training epoch *is* the counting pass — `training_step` adds
  the batch to the counts and returns None, which is Lightning's way of skipping the optimisation of
  a batch — the tables are normalised before any evaluation reads them, and training stops after
  that epoch. The tagging task scores it like every tagger: its `crf` attribute (the HMM's
  transitions, start and end) gives the loss, -log p(words, tags) per token, and the Viterbi path.
  The optimizer it returns holds no trainable tensor and is never stepped; it exists so that the
  callbacks that read learning rates work unchanged.
* `lm` (PTB, Shakespeare): an HMM with `states` hidden states trained by gradient on the marginal
  likelihood, batched as a stream like an RNN (`lm_batching = "stream"`): the filtered state
  distribution is carried (detached) across truncated-BPTT windows and reset when a stream starts,
  and perplexity comes from the same code as every LM.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.base import SeqModel
from seqbench.nn.hmm import HMMLanguageModel, HMMTagger


class HMMModel(SeqModel):
    needs_words = ("tagging",)  # the supervised tagger's emissions are over the corpus's words

    lm_batching = "stream"

    def __init__(self, spec: TaskSpec, optimizer: Callable, scheduler: Callable | None = None,
                 scheduler_interval: str = "epoch", scheduler_monitor: str | None = None,
                 states: int = 64, init_std: float = 1.0, emission_smoothing: float = 0.1,
                 transition_smoothing: float = 1.0) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        self._state: dict[str, torch.Tensor | None] = {}
        self.crf = None
        if spec.task == "lm":
            self.net = HMMLanguageModel(spec.vocab_size, states, init_std)
            return
        tokenizer = spec.tokenizer
        if spec.task == "tagging" and (tokenizer is None or not hasattr(tokenizer, "normalize")):
            raise ConfigError("model=hmm tags words: the data must serve a word vocabulary and the words "
                              "(as data=conll2003 does).")
        self.crf = HMMTagger(spec.num_classes, tokenizer.vocab.stoi, tokenizer.normalize,
                             emission_smoothing, transition_smoothing)
        self.no_step = nn.Parameter(torch.zeros(0), requires_grad=False)
        self._dirty = False

    def num_params(self, non_embedding: bool = False) -> int:
        if self.spec.task == "lm":
            return super().num_params(non_embedding)
        tables = ("log_start", "log_trans", "log_end", "log_emit", "log_new", "log_shape", "log_suffix")
        return sum(getattr(self.crf, t).numel() for t in tables)  # the estimated probabilities

    # -- tagging: fit from counts -----------------------------------------------------------------
    def tag(self, batch: dict) -> torch.Tensor:
        if self._dirty:  # counts added since the tables were last normalised
            self.crf.fit()
            self._dirty = False
        return self.crf.emissions(batch["words"], batch["tags"].size(1)).to(batch["tags"].device)

    def training_step(self, batch, batch_idx: int):
        if self.spec.task == "lm":
            return super().training_step(batch, batch_idx)
        self.crf.count(batch["words"], batch["tags"])
        self._dirty = True
        return None  # nothing to optimise: Lightning skips backward and the optimizer step

    def on_train_epoch_end(self) -> None:
        super().on_train_epoch_end()
        if self.spec.task != "lm":
            self.trainer.should_stop = True  # one counting pass is the whole fit

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.crf is not None and self._dirty:
            self.crf.fit()
            self._dirty = False
        super().on_save_checkpoint(checkpoint)

    def configure_optimizers(self):
        if self.spec.task == "lm":
            return super().configure_optimizers()
        return torch.optim.SGD([self.no_step], lr=0.0)

    # -- lm -----------------------------------------------------------------------------------------
    def lm_logits(self, batch: dict, stage: str) -> torch.Tensor:
        tokens = batch["input"]
        state = None if batch.get("window", 0) == 0 else self._state.get(stage)
        logits, state = self.net(tokens, state.to(tokens.device) if state is not None else None)
        self._state[stage] = state.detach()
        return logits
