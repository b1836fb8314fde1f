"""The BERT family (`seqbench.nn.bert`): pre-trained by MLM + NSP on `mlm`, fine-tuned on
`classification` ([CLS] -> pooler -> linear) and `tagging` (a linear layer on each word's first piece).

On `mlm` (`data=pretrain_text`) the tokenizer is the data's WordPiece, and the checkpoint stores it
with the backbone's config. On the sentence tasks (SST-2, CoNLL-2003) the data serves words; this
family turns them into pieces itself (its input transformation):

    words  EU  rejects German call   ->  [CLS] EU re ##ject ##s German call [SEP]
    tags   ORG O       MISC   O           tagged at the first piece of each word, scored per word

With `model.pretrained=<ckpt>` the backbone (embeddings, encoder, pooler) and the tokenizer come
from a pre-training run and the sizes in this config are ignored; without it a WordPiece tokenizer
of `tokenizer_vocab` pieces is trained on the task's training vocabulary and the backbone starts
from random weights — the from-scratch row of the comparison. `model.reinit=true` with
`model.pretrained` keeps the checkpoint's sizes and WordPiece but not its weights: the control that
differs from the fine-tuned model in the pre-trained weights alone. Inputs longer than `context` pieces
are cut; words cut off are tagged from the [CLS] state.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tokenizers import Tokenizer
from torch import nn

from seqbench.data.pretrain_text import PAD_ID, train_wordpiece
from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.errors import ConfigError
from seqbench.models.base import SeqModel
from seqbench.models.pretrained import KEY, first_pieces, load_pretrained, same_vocab, sub_state
from seqbench.nn.bert import BertBackbone, BertConfig, PretrainingHeads


class BertModel(SeqModel):
    #: tasks on which the family reads the words (to cut them into its WordPiece pieces): a corpus of
    #: bare token ids (the synthetic probes) cannot pose them to it (seqbench.training.config_check)
    needs_words = ("classification", "tagging")

    def __init__(self, spec: TaskSpec, optimizer: Callable, scheduler: Callable | None = None,
                 scheduler_interval: str = "step", scheduler_monitor: str | None = None,
                 n_layer: int = 2, n_head: int = 4, d_model: int = 128, context: int = 128, dropout: float = 0.1,
                 tokenizer_vocab: int = 8000, pretrained: str | None = None, reinit: bool = False) -> None:
        super().__init__(spec, optimizer, scheduler, scheduler_interval, scheduler_monitor)
        self.save_hyperparameters(ignore=["spec", "optimizer", "scheduler"], logger=False)  # run.py logs the config once
        ckpt = load_pretrained(pretrained, "bert") if pretrained else None
        if spec.task == "mlm":
            self.tokenizer = spec.tokenizer
            if ckpt is not None and not same_vocab(Tokenizer.from_str(ckpt[KEY]["tokenizer"]), self.tokenizer):
                raise ConfigError(f"model.pretrained={pretrained} was pre-trained with another tokenizer than this "
                                  f"data's; to continue pre-training add data.tokenizer_from={pretrained}.")
        elif ckpt is not None:
            self.tokenizer = Tokenizer.from_str(ckpt[KEY]["tokenizer"])
        else:
            vocab = getattr(spec.tokenizer, "vocab", None)
            if vocab is None:
                raise ConfigError("model=bert reads words on this task; the data serves no word vocabulary "
                                  "(use data=sst2 or data=conll2003).")
            self.tokenizer = train_wordpiece([w for w in vocab.itos if not w.startswith("<")], tokenizer_vocab)
        cfg = (BertConfig(**ckpt[KEY]["config"]) if ckpt is not None else
               BertConfig(self.tokenizer.get_vocab_size(), max(context, spec.max_len or 0) if spec.task == "mlm"
                          else context, n_layer, n_head, d_model, dropout))
        self.context = cfg.context
        self.backbone = BertBackbone(cfg)
        if ckpt is not None and not reinit:  # reinit: the checkpoint's network and tokenizer, random weights
            self.backbone.load_state_dict(sub_state(ckpt, "backbone"))  # strict: every backbone weight
        if spec.task == "mlm":
            self.heads = PretrainingHeads(self.backbone)
            if ckpt is not None and not reinit:
                self.heads.load_state_dict(sub_state(ckpt, "heads"))
        else:
            self.tokenizer.enable_truncation(max_length=cfg.context)
            self.drop = nn.Dropout(cfg.dropout)
            self.head = nn.Linear(cfg.d_model, spec.num_classes)
            nn.init.normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)

    # -- mlm ------------------------------------------------------------------------------------------
    def pretrain_logits(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """MLM logits at the masked positions only (N, V), row-major, and NSP logits (B, 2): the
        decoder over the vocabulary is the costliest layer, and 85% of its outputs would be unscored."""
        states = self.backbone(batch["input"], batch["segments"], batch["lengths"])  # (B, T, C)
        masked = states[batch["mlm_labels"] != IGNORE_INDEX]  # (N, C)
        return self.heads(masked, self.backbone.pool(states))  # (N, V), (B, 2)

    # -- fine-tuning ------------------------------------------------------------------------------
    def pieces(self, words: list[list[str]], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Words -> piece ids (B, P), lengths (B,), and each word's first piece (B, T_words; 0 if cut)."""
        encodings = self.tokenizer.encode_batch(words, is_pretokenized=True)
        B, P, T = len(words), max(len(e.ids) for e in encodings), max(len(w) for w in words)
        ids = torch.full((B, P), PAD_ID, dtype=torch.long)
        first = torch.zeros(B, T, dtype=torch.long)
        for b, e in enumerate(encodings):
            ids[b, : len(e.ids)] = torch.tensor(e.ids)
            first[b, : len(words[b])] = torch.tensor(first_pieces(e.word_ids, len(words[b])))  # cut off: [CLS]
        lengths = torch.tensor([len(e.ids) for e in encodings])
        return ids.to(device), lengths.to(device), first.to(device)

    def classify(self, batch: dict) -> torch.Tensor:
        ids, lengths, _ = self.pieces(batch["words"], batch["label"].device)
        states = self.backbone(ids, lengths=lengths)
        return self.head(self.drop(self.backbone.pool(states)))  # (B, K)

    def tag(self, batch: dict) -> torch.Tensor:
        ids, lengths, first = self.pieces(batch["words"], batch["tags"].device)
        states = self.backbone(ids, lengths=lengths)  # (B, P, C)
        logits = self.head(self.drop(states))  # (B, P, K)
        T = batch["tags"].size(1)
        index = first[:, :T].unsqueeze(-1).expand(-1, -1, logits.size(-1))  # (B, T, K)
        return logits.gather(1, index)  # (B, T, K): each word's first piece

    # -- checkpoints carry what a fine-tuning run needs --------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[KEY] = {"family": "bert", "config": self.backbone.cfg.to_dict(), "tokenizer": self.tokenizer.to_str()}
