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

On `translation` it is the paper's encoder-decoder (`seqbench.nn.transformer_seq2seq`): `n_layer`
encoder and `n_dec_layer` (default `n_layer`) decoder blocks, the decoder with cross-attention,
`share_embeddings` (one table for both languages, needs a joint vocabulary) or `tie_weights`
(target embedding = output projection), and `label_smoothing` in the training loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.windowed import WindowedLM
from seqbench.nn.kv_cache import new_cache
from seqbench.nn.transformer_lm import TransformerLM
from seqbench.nn.transformer_seq2seq import TransformerSeq2Seq


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
        n_dec_layer: int | None = None,
        share_embeddings: bool = False,
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        if spec.task == "lm" and causal is False:
            raise ConfigError("model.causal=false cannot model language left to right: every position would "
                              "see the token it must predict; use it for classification or tagging.")
        self.causal = spec.task == "lm" if causal is None else causal
        self.pooling = pooling
        self.label_smoothing = label_smoothing  # read by the translation task's training loss
        if spec.task == "translation":
            if share_embeddings and not (spec.extras or {}).get("joint_vocab"):
                raise ConfigError("model.share_embeddings=true needs one vocabulary for both languages: "
                                  "set data.joint_vocab=true (or model.share_embeddings=false).")
            net = TransformerSeq2Seq(spec.src_vocab_size, spec.tgt_vocab_size, max(context, spec.max_len or 0),
                                     n_layer, n_dec_layer, n_head, d_model, d_ff, dropout, norm_first, positions,
                                     share_embeddings, tie_weights, attn_impl, bias)
            self.attach(net, context, compile, d_model)
            return
        context = self.sequence_context(context)
        self.attach(TransformerLM(spec.vocab_size, context, n_layer, n_head, d_model, d_ff, dropout, norm_first,
                                  positions, tie_weights, attn_impl, bias, spec.input_dim), context, compile, d_model)

    # -- translation: teacher forcing, and the decoding interface of seqbench.nn.decoding ---------
    def translate_logits(self, batch: dict) -> torch.Tensor:
        return self.net(batch["src"], batch["src_lengths"], batch["tgt_in"])  # (B, T, V)

    def encode(self, batch: dict) -> dict:
        return self.net.encode(batch["src"], batch["src_lengths"])

    def decode_step(self, memory: dict, tokens: torch.Tensor, state: list[dict] | None):
        """state None: read every token; else the key/value cache of all but the last, so read only that."""
        if state is None:
            state = new_cache(len(self.net.decoder.blocks))
        else:
            tokens = tokens[:, -1:]
        return self.net.decode(memory, tokens, state)[:, -1], state  # (B, V), the cache

    def alignments(self, batch: dict) -> torch.Tensor:
        """Cross-attention weights (B, layers x heads, T, S) of the decoder reading `batch["tgt_in"]`."""
        maps = self.net.cross_attention_weights(batch["src"], batch["src_lengths"], batch["tgt_in"])
        return maps.flatten(1, 2)  # (B, L, nh, T, S) -> (B, L * nh, T, S)
