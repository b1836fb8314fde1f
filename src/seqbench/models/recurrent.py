"""The recurrent family: vanilla RNN (tanh/relu), LSTM and GRU, one LightningModule for all three.

The task decides the network: on `lm` a `RecurrentLM`; on `classification`, `tagging` and
`regression` a `RecurrentEncoder` (optionally bidirectional) with a linear head on its pooled
summary (classification, regression) or on every position (tagging). On tagging, `crf=true` puts a
linear-chain CRF (`seqbench.nn.crf`) on the per-token scores: trained by its sentence likelihood,
decoded by Viterbi. `char_features=N` adds N character-CNN features to every word's embedding
(`seqbench.nn.char_features`; the data must serve `chars`, as the sentence corpora do).

On `lm` it is a stateful language model trained with truncated BPTT (Lightning's LSTM demo, the
word_language_model example): the hidden state lives on the module, is detached after every window
and reset when a stream starts again (window 0). Training, validation and test each keep their own
state, so a validation pass in the middle of an epoch does not disturb the training stream, and the
training state is saved in checkpoints so a resumed run continues the stream exactly
(`seqbench.models.stream_lm.StreamLM`, shared with the parallel recurrences).

On `translation` it is an encoder-decoder (`seqbench.nn.seq2seq`): Sutskever et al.'s form with
`model.attention=none` (the final encoder state is the only context; `model.reverse_source=true`
reverses the source), or Bahdanau / Luong attention (`bahdanau|luong_dot|luong_general|scaled_dot`),
with `model.bidirectional`, `model.input_feeding`, `model.teacher_forcing` (the ratio) and
`model.label_smoothing` (the training loss's, as the Transformer's: one rule for every family).

On every task, `model.forget_bias` (LSTM) and `model.recurrent_init=orthogonal|identity` re-set the
recurrent layers after the rest of the initialisation (`seqbench.nn.recurrent_init`); unset, the
LSTM keeps PyTorch's init, whose forget-gate bias has mean 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import torch

from torch import nn

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.sequence_heads import SequenceHeads, require_sequence_images
from seqbench.models.stream_lm import StreamLM
from seqbench.nn.cells import GATES
from seqbench.nn.char_features import CharCNN
from seqbench.nn.crf import CRF
from seqbench.nn.recurrent_encoder import RecurrentEncoder
from seqbench.nn.recurrent_init import init_recurrence
from seqbench.nn.recurrent_lm import RecurrentLM
from seqbench.nn.seq2seq import RecurrentSeq2Seq
from seqbench.nn.sampling import sample_next

CELLS = tuple(GATES)  # the cells seqbench.nn.cells implements; config_check reads the Literal

log = logging.getLogger(__name__)


class RecurrentModel(StreamLM, SequenceHeads):
    state_batch_dim = 1  # nn.LSTM's states are (L, B, H)

    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "epoch",
        scheduler_monitor: str | None = None,
        cell: Literal[CELLS] = "lstm",
        nonlinearity: Literal["tanh", "relu"] = "tanh",
        embedding_size: int | None = None,
        hidden_size: int = 200,
        num_layers: int = 2,
        dropout: float = 0.0,
        embedding_dropout: float | None = None,
        output_dropout: float | None = None,
        tie_weights: bool = False,
        init_range: float | None = 0.1,
        impl: Literal["fused", "reference"] = "fused",
        bidirectional: bool = False,
        pooling: Literal["last", "mean", "max"] = "last",
        attention: Literal["none", "bahdanau", "luong_dot", "luong_general", "scaled_dot"] = "none",
        attention_size: int | None = None,
        input_feeding: bool = False,
        reverse_source: bool = False,
        teacher_forcing: float = 1.0,
        crf: bool = False,
        char_features: int = 0,
        char_embedding_size: int = 25,
        hidden_dropout: float | None = None,
        lock_dropout: bool = False,
        word_dropout: float = 0.0,
        weight_drop: float = 0.0,
        ar: float = 0.0,
        tar: float = 0.0,
        forget_bias: float | None = None,
        recurrent_init: Literal["default", "orthogonal", "identity"] = "default",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        self.pooling = pooling
        self._lr_scale = 1.0  # variable-length BPTT: this window's length / data.bptt
        self.label_smoothing = label_smoothing  # translation: read by the task's training loss, as the Transformer's
        # Unset, the embedding is as wide as the hidden state, so `model.hidden_size=400` alone keeps
        # weight tying (which needs the two equal) working instead of failing on a size mismatch.
        embedding_size = embedding_size or hidden_size
        if spec.task != "lm":
            warn_if_lm_recipe(optimizer, spec.task)
        if spec.task == "lm":
            if bidirectional:
                raise ConfigError("model.bidirectional=true cannot model language left to right: a "
                                  "bidirectional RNN sees the token it must predict; use it for classification or tagging.")
            self.net = RecurrentLM(spec.vocab_size, cell, embedding_size, hidden_size, num_layers, dropout,
                                   embedding_dropout, output_dropout, tie_weights, init_range, nonlinearity, impl,
                                   hidden_dropout, lock_dropout, word_dropout, weight_drop, ar, tar)
            init_recurrence(self, forget_bias, recurrent_init)
            return
        if lock_dropout or word_dropout or weight_drop or ar or tar or hidden_dropout is not None:
            raise ConfigError("model.lock_dropout, hidden_dropout, word_dropout, weight_drop, ar and tar are AWD-LSTM's "
                              f"language-model regularisers; the data poses {spec.task!r}, not lm: leave them unset.")
        require_sequence_images(spec)
        if spec.task == "translation":
            self.seq2seq = RecurrentSeq2Seq(spec.src_vocab_size, spec.tgt_vocab_size, cell, embedding_size, hidden_size,
                                            num_layers, dropout, bidirectional, attention, input_feeding,
                                            reverse_source, teacher_forcing, spec.pad_id, nonlinearity, attention_size,
                                            tie_weights)
            if init_range:
                for p in self.parameters():
                    nn.init.uniform_(p, -init_range, init_range)
            init_recurrence(self, forget_bias, recurrent_init)
            return
        if crf and spec.task != "tagging":
            raise ConfigError(f"model.crf=true scores tag sequences; the data poses {spec.task!r}, not tagging.")
        vocab_size, input_dim = spec.vocab_size, spec.input_dim
        self.word_embed = self.char_cnn = None
        if char_features:
            char_vocab = (spec.extras or {}).get("char_vocab_size")
            if spec.vocab_size is None or not char_vocab:
                raise ConfigError("model.char_features needs words with their characters; this data serves "
                                  "none (use a sentence corpus such as data=conll2003 or data=sst2).")
            self.word_embed = nn.Embedding(spec.vocab_size, embedding_size, padding_idx=spec.pad_id)
            self.char_cnn = CharCNN(char_vocab, char_embedding_size, char_features)
            vocab_size, input_dim = None, embedding_size + char_features  # the encoder reads the features
        self.encoder = RecurrentEncoder(cell, hidden_size, num_layers, dropout, bidirectional, vocab_size,
                                        input_dim, embedding_size, spec.pad_id, nonlinearity, impl, embedding_dropout)
        self.output_dropout = nn.Dropout(dropout if output_dropout is None else output_dropout)
        outputs = 1 if spec.task == "regression" else spec.num_classes
        self.head = nn.Linear(self.encoder.output_size, outputs)
        self.crf = CRF(spec.num_classes) if crf else None
        if init_range:
            for p in self.parameters():
                nn.init.uniform_(p, -init_range, init_range)
        init_recurrence(self, forget_bias, recurrent_init)

    # -- classification, regression, tagging -----------------------------------------------------
    def encoder_input(self, batch: dict) -> torch.Tensor:
        """Token ids (B, T), or with character features the word vectors (B, T, E + C)."""
        if self.char_cnn is None:
            return batch["input"]
        return torch.cat([self.word_embed(batch["input"]), self.char_cnn(batch["chars"])], dim=-1)

    def head_dropout(self, states: torch.Tensor) -> torch.Tensor:
        return self.output_dropout(states)

    # -- translation: teacher forcing, and the decoding interface of seqbench.nn.decoding ---------
    def translate_logits(self, batch: dict) -> torch.Tensor:
        return self.seq2seq(batch["src"], batch["src_lengths"], batch["tgt_in"])  # (B, T, V)

    def encode(self, batch: dict) -> dict:
        return self.seq2seq.encode(batch["src"], batch["src_lengths"])

    def decode_step(self, memory: dict, tokens: torch.Tensor, state: dict | None):
        """state None: nothing read yet, so run over every token; else only the last (state carries the rest)."""
        if state is None:
            state = self.seq2seq.initial_state(memory)
            for t in range(tokens.size(1) - 1):
                _, state, _ = self.seq2seq.step(tokens[:, t], state, memory)
        o, state, _ = self.seq2seq.step(tokens[:, -1], state, memory)
        return self.seq2seq.logits(o), state

    def alignments(self, batch: dict) -> torch.Tensor:
        """Attention weights (B, 1, T, S) of the decoder reading `batch["tgt_in"]` (one 'head')."""
        _, att = self.seq2seq(batch["src"], batch["src_lengths"], batch["tgt_in"], return_attention=True)
        return att[:, None]

    # -- lm ---------------------------------------------------------------------------------------
    def lm_penalty(self) -> torch.Tensor | None:
        """AR + TAR of this training step (added to the loss by the LM task), or None when both are off.
        Taken once: the module keeps no reference to the step's graph (AveragedModel deep-copies it)."""
        penalty, self.net.penalty = self.net.penalty, None
        return penalty

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        self._lr_scale = float(batch.get("lr_scale", 1.0)) if isinstance(batch, dict) else 1.0

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None) -> None:
        """Variable-length BPTT (Merity et al. 2018, §4.1): the LR is scaled by the window's length over
        data.bptt for this step only, so short windows do not weigh as much as long ones. Scaling the
        LR, not the loss, keeps the clipping norm meaning the same for every window (as in AWD-LSTM)."""
        if self._lr_scale == 1.0:
            optimizer.step(closure=optimizer_closure)
            return
        lrs = [g["lr"] for g in optimizer.param_groups]
        for g in optimizer.param_groups:
            g["lr"] *= self._lr_scale
        try:
            optimizer.step(closure=optimizer_closure)
        finally:
            for g, lr in zip(optimizer.param_groups, lrs):
                g["lr"] = lr

    def flops_per_token(self, length: int | None = None) -> float | None:
        return self.net.flops_per_token() if self.spec.task == "lm" else None

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> torch.Tensor:
        """prompt (B, T) -> (B, T + max_new_tokens); the state makes each new token O(1)."""
        self.eval()
        logits, state = self.net(prompt)
        out = [prompt]
        for _ in range(max_new_tokens):
            token = sample_next(logits[:, -1], temperature, top_k)  # (B, 1)
            out.append(token)
            logits, state = self.net(token, state)
        return torch.cat(out, dim=1)


def warn_if_lm_recipe(optimizer: Callable, task: str) -> None:
    """Say so when a non-LM task trains with the family's defaults, the PTB recipe (SGD at lr 20).

    Every task has its recipe (conf/recipe/<task>/<cell>.yaml, chosen by seqbench.compose), so this
    happens only with `recipe=none` or a hand-made optimizer: the line keeps such a run from quietly
    training a classifier at a language model's learning rate.
    """
    lr = getattr(optimizer, "keywords", {}).get("lr")
    if getattr(optimizer, "func", None) is torch.optim.SGD and lr is not None and lr >= 1:
        log.warning(f"model/optimizer=sgd with lr={lr} is the recurrent family's language-model recipe, not one "
                    f"for {task}: drop recipe=none (conf/recipe/ holds a recipe per task and family), or choose "
                    "model/optimizer=adam.")
