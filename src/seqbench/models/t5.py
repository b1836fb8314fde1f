"""The T5 family (Raffel et al. 2020; `seqbench.nn.t5`): a text-to-text encoder-decoder.

On `translation` every source sentence is read after a task prefix, "translate German to English: "
(the language names come from the data's direction), exactly as T5 casts every task as text to text.
The prefix is added here, inside the family, so the data pipeline and the reference side stay the
same for every family on a corpus. T5 shares one vocabulary between input and output: the presets
set `data.joint_vocab=true` (with separate vocabularies the prefix is spelt in the source
vocabulary and the one embedding table is sized for the larger of the two).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from seqbench.data.spec import TaskSpec
from seqbench.models.base import SeqModel
from seqbench.nn.kv_cache import new_cache
from seqbench.nn.t5 import T5

LANGUAGES = {"de": "German", "en": "English", "fr": "French", "cs": "Czech"}


def task_prefix(direction: str | None) -> str:
    """'de-en' -> 'translate German to English: ' (T5's wording, Raffel et al. Appendix D); no direction
    (span corruption, pre-training) -> no prefix."""
    if not direction or "-" not in direction:
        return ""
    src, tgt = direction.split("-", 1)
    return f"translate {LANGUAGES.get(src, src)} to {LANGUAGES.get(tgt, tgt)}: "


class T5Model(SeqModel):
    kv_cache = True
    def __init__(
        self,
        spec: TaskSpec,
        optimizer: Callable,
        scheduler: Callable | None = None,
        scheduler_interval: str = "step",
        scheduler_monitor: str | None = None,
        n_layer: int = 3,
        n_dec_layer: int | None = None,
        n_head: int = 4,
        d_model: int = 256,
        d_kv: int = 64,
        d_ff: int = 1024,
        dropout: float = 0.1,
        num_buckets: int = 32,
        max_distance: int = 128,
        prefix: bool = True,
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        self.label_smoothing = label_smoothing
        vocab = max(spec.src_vocab_size, spec.tgt_vocab_size)
        self.net = T5(vocab, n_layer, n_dec_layer, n_head, d_model, d_kv, d_ff, dropout, num_buckets, max_distance)
        extras = spec.extras or {}
        tok = extras.get("src_tokenizer")
        text = task_prefix(extras.get("direction")) if prefix else ""
        ids = tok.encode(text) if (text and tok is not None) else []
        self.register_buffer("prefix_ids", torch.tensor(ids, dtype=torch.long), persistent=False)

    def with_prefix(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded src (B, S) -> (B, P + S) with the task prefix in front of every row."""
        src, lengths = batch["src"], batch["src_lengths"]
        P = self.prefix_ids.numel()
        if P == 0:
            return src, lengths
        return torch.cat([self.prefix_ids.expand(src.size(0), P), src], dim=1), lengths + P

    # -- translation: teacher forcing, and the decoding interface of seqbench.nn.decoding ---------
    def translate_logits(self, batch: dict) -> torch.Tensor:
        src, lengths = self.with_prefix(batch)
        logits = self.net(src, lengths, batch["tgt_in"])  # (B, T, V)
        return logits[..., : self.spec.tgt_vocab_size]

    def encode(self, batch: dict) -> dict:
        return self.net.encode(*self.with_prefix(batch))

    def decode_step(self, memory: dict, tokens: torch.Tensor, state: list[dict] | None):
        """state None: read every token; else the key/value cache of all but the last, so read only that."""
        if state is None:
            state = new_cache(len(self.net.decoder.blocks))
        else:
            tokens = tokens[:, -1:]
        return self.net.decode(memory, tokens, state)[:, -1, : self.spec.tgt_vocab_size], state

    def alignments(self, batch: dict) -> torch.Tensor:
        """Cross-attention weights (B, layers x heads, T, P + S): the prefix's P columns come first."""
        src, lengths = self.with_prefix(batch)
        maps = self.net.cross_attention_weights(src, lengths, batch["tgt_in"])  # (B, L, nh, T, P + S)
        return maps.flatten(1, 2)
