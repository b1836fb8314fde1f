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

On `lm`, `model.pretrained=<ckpt> data.tokenizer_from=<ckpt>` continues pre-training from the LM's
weights with a new optimizer and learning-rate schedule (`ckpt_path=<ckpt>` resumes the old run instead).

Fine-tuning a pre-trained LM (Radford et al. 2018, §3.2-3.3), `model.pretrained=<ckpt of an lm run>`:
the network and its word vocabulary come from the checkpoint (the sizes in this config are ignored),
the embedding table grows by three learned tokens, and the model maps the data's words onto the LM's
vocabulary itself (the paper's input transformation; unknown words become `<unk>`):

    classification   <start> w1 w2 ... wn <extract>   -> linear head on the <extract> state
    tagging          <start> w1 w2 ... wn              -> linear head on each word's state

(`<delim>` separates the two texts of a pair task; SST-2 and CoNLL have one text.) With
`model.aux_lm_weight=λ > 0` the task adds λ·L1, the LM loss on the fine-tuning text, to its own loss
L2 (L3 = L2 + λ·L1, §3.2); both terms are logged (`train/task_loss`, `train/aux_lm_loss`).
`model.reinit=true` builds the same network with the same tokenizer and input transformation but
leaves its weights random: the from-scratch control that differs from the fine-tuned model in the
pre-trained weights alone (the plain from-scratch preset also differs in vocabulary and size).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.errors import ConfigError
from seqbench.models.pretrained import KEY, first_pieces, load_pretrained, sub_state
from seqbench.models.windowed import WindowedLM
from seqbench.nn.gpt import GPT, GPTConfig

ADDED = ("<start>", "<delim>", "<extract>")


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
        pretrained: str | None = None,
        aux_lm_weight: float = 0.0,
        reinit: bool = False,
    ) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        self.pooling = pooling
        self.aux_lm_weight = aux_lm_weight
        self._aux: torch.Tensor | None = None
        self.itos: list[str] | None = None  # the pre-trained LM's words, when fine-tuning one
        if pretrained is None:
            context = self.sequence_context(context)
            net = GPT(GPTConfig(spec.vocab_size, context, n_layer, n_head, d_model, dropout, bias, attn_impl,
                                spec.input_dim))
            self.attach(net, context, compile, d_model)
            return
        ckpt = load_pretrained(pretrained, "gpt")
        info = ckpt[KEY]
        cfg = GPTConfig(**{**info["config"], "dropout": dropout})
        if spec.task == "lm":  # continued pre-training, at any level the data shares with the checkpoint
            self.continue_lm(ckpt, cfg, pretrained, compile, reinit)
            return
        if info["level"] not in ("word", "bpe"):
            raise ConfigError(f"model.pretrained={pretrained} was pre-trained on characters; fine-tuning reads "
                              f"words: pre-train on words or BPE pieces (data=pretrain_lm, ptb or wikitext2).")
        self.pieces = None  # level=bpe: the LM's BPE tokenizer cuts the task's words into its pieces
        if info["level"] == "bpe":
            from tokenizers import Tokenizer
            self.pieces = Tokenizer.from_str(info["tokenizer"])
        elif spec.max_len and spec.max_len + 2 > cfg.context:
            raise ConfigError(f"the data's longest sequence ({spec.max_len} words + 2 added tokens) is longer than "
                              f"the pre-trained context ({cfg.context}); pre-train with a longer model.context.")
        self.itos = list(info["itos"]) + list(ADDED)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        old = sub_state(ckpt, "net")
        net = GPT(GPTConfig(**{**asdict(cfg), "vocab_size": len(self.itos)}))
        emb = net.tok_emb.weight.detach().clone()
        emb[: old["tok_emb.weight"].size(0)] = old["tok_emb.weight"]  # new rows keep their N(0, 0.02) init
        old["tok_emb.weight"] = old["lm_head.weight"] = emb
        if not reinit:  # reinit: the same network and tokenizer from random weights (the control)
            net.load_state_dict(old)
        self.attach(net, cfg.context, compile, cfg.d_model)

    def continue_lm(self, ckpt: dict, cfg: GPTConfig, path: str, compile: bool, reinit: bool) -> None:
        """Continued pre-training: the LM's weights with a new optimizer and schedule (`ckpt_path=`
        resumes instead, with the old run's schedule). The data must cut text into the same ids."""
        itos = list(getattr(self.spec.tokenizer.vocab, "itos", []))
        if itos != list(ckpt[KEY]["itos"]):
            raise ConfigError(f"model.pretrained={path} was pre-trained with another vocabulary than this data's; "
                              f"to continue pre-training add data.tokenizer_from={path} (and the same data.level).")
        net = GPT(cfg)
        if not reinit:
            net.load_state_dict(sub_state(ckpt, "net"))
        self.attach(net, cfg.context, compile, cfg.d_model)

    # -- fine-tuning a pre-trained LM ---------------------------------------------------------------
    def transform(self, words: list[list[str]], extract: bool, device
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Words -> <start> ids [<extract>] (B, P) padded with zeros, lengths (B,), and the position of
        each word's first token in its row (B, T). Word level: one id per word, unknown words <unk>.
        BPE level: each word's pieces (the LM's tokenizer), cut to fit the context; a word cut off
        points at the last text position (its tag is read there)."""
        start, end = [self.stoi["<start>"]], [self.stoi["<extract>"]] if extract else []
        T = max(len(w) for w in words)
        first = torch.zeros(len(words), T, dtype=torch.long)
        if self.pieces is None:
            unk = self.stoi.get("<unk>", 0)
            rows = [start + [self.stoi.get(w, self.stoi.get(w.lower(), unk)) for w in sentence] + end
                    for sentence in words]
            first[:] = torch.arange(1, T + 1)
        else:
            room = self.context - 1 - len(end)
            rows = []
            for b, e in enumerate(self.pieces.encode_batch(words, is_pretokenized=True, add_special_tokens=False)):
                text = e.ids[:room]
                rows.append(start + text + end)
                n = len(words[b])  # words cut off read the last text position
                first[b, :n] = torch.tensor(first_pieces(e.word_ids[:room], n, offset=1, missing=len(text)))
        ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = torch.tensor(row)
        return ids.to(device), torch.tensor([len(r) for r in rows], device=device), first.to(device)

    def aux_lm(self, states: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor, text_end: int) -> None:
        """L1 on the fine-tuning text: predict w_{t+1} from the state at t, over the words only."""
        if self.aux_lm_weight <= 0 or not self.training:
            return
        targets = ids[:, 1:].clone()  # (B, P-1): position t predicts token t+1 (<start> predicts w1)
        n_words = (lengths - 1 - text_end)[:, None]  # (B, 1)
        targets[torch.arange(targets.size(1), device=ids.device)[None, :] >= n_words] = IGNORE_INDEX  # not text
        logits = self.net.lm_head(states[:, :-1])  # (B, P-1, V)
        self._aux = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)

    def auxiliary_loss(self) -> tuple[torch.Tensor, float] | None:
        """(L1, λ) of the last step, taken once by the task; None when there is no auxiliary loss."""
        aux, self._aux = self._aux, None
        return None if aux is None else (aux, self.aux_lm_weight)

    def classify(self, batch: dict) -> torch.Tensor:
        if self.itos is None:
            return super().classify(batch)
        ids, lengths, _ = self.transform(batch["words"], True, batch["label"].device)
        states = self.net.features(ids)  # (B, P, C)
        self.aux_lm(states, ids, lengths, text_end=1)
        return self.head(states[torch.arange(ids.size(0), device=ids.device), lengths - 1])  # <extract>: (B, K)

    def tag(self, batch: dict) -> torch.Tensor:
        if self.itos is None:
            return super().tag(batch)
        ids, lengths, first = self.transform(batch["words"], False, batch["tags"].device)
        states = self.net.features(ids)  # (B, P, C)
        self.aux_lm(states, ids, lengths, text_end=0)
        T = batch["tags"].size(1)
        index = first[:, :T].unsqueeze(-1).expand(-1, -1, states.size(-1))
        return self.head(states.gather(1, index))  # each word's (first piece's) state: (B, T, K)

    # -- checkpoints carry what a fine-tuning run needs -------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        tokenizer = self.spec.tokenizer
        if self.spec.task == "lm" and getattr(tokenizer, "vocab", None) is not None:  # an LM: a backbone to reuse
            level = getattr(tokenizer, "level", "word")
            checkpoint[KEY] = {"family": "gpt", "config": asdict(self.net.cfg), "itos": list(tokenizer.vocab.itos),
                               "level": level}
            if level == "bpe":  # fine-tuning cuts the task's words with the same tokenizer
                checkpoint[KEY]["tokenizer"] = tokenizer.subword.tokenizer.to_str()
