"""The DataModule every sentence-level corpus shares (classification and tagging).

A corpus subclass says only how to read its three splits (`read_splits`: lists of `(words, label)`
for classification, `(words, tags)` for tagging). This base builds the word vocabulary and the
character vocabulary from train, and serves padded batches:

    input   (B, T)     word ids, padded with pad_id (0)
    lengths (B,)       real length of each row
    label   (B,)       classification: the class id
    tags    (B, T)     tagging: tag ids, IGNORE_INDEX on padding
    chars   (B, T, W)  character ids of every word, padded with 0 (for character-level word features)
    words   list[list[str]]  the surface words (a statistical tagger classes unknown words by them)

`unk_replace` is Lample et al. (2016)'s singleton dropout: during training a word seen once in train
is replaced by `<unk>` with this probability, so the `<unk>` embedding is trained on words like the
ones it will meet at test time.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader

from seqbench.data.eval_shards import EvalShards, Marked, marked_collate
from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.vocab import UNK, Vocab

PAD = "<pad>"
SPLITS = ("train", "valid", "test")


class WordTokenizer:
    """Words <-> ids with the training vocabulary; `normalize` is applied before every lookup."""

    def __init__(self, vocab: Vocab, lowercase: bool = False) -> None:
        self.vocab, self.lowercase = vocab, lowercase

    def normalize(self, word: str) -> str:
        return word.lower() if self.lowercase else word

    def encode(self, words: list[str] | str) -> torch.Tensor:
        words = words.split() if isinstance(words, str) else words
        return self.vocab.encode(self.normalize(w) for w in words)

    def decode(self, ids) -> str:
        return self.vocab.decode(ids)


class SentenceDataModule(L.LightningDataModule):
    task = "classification"  # or "tagging"
    serves_words = True  # batches carry the words themselves, not only their ids (BERT, the HMM tagger read them)
    corpus = "corpus"

    def __init__(self, data_dir: str, batch_size: int = 32, eval_batch_size: int = 128, download: bool = True,
                 lowercase: bool = False, min_freq: int = 1, max_vocab: int | None = None,
                 unk_replace: float = 0.0, max_word_len: int = 20, seed: int = 0) -> None:
        super().__init__()
        self.data_dir = Path(data_dir).expanduser()
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.download = download
        self.lowercase, self.min_freq, self.max_vocab = lowercase, min_freq, max_vocab
        self.unk_replace = unk_replace
        self.max_word_len = max_word_len  # longer words keep their first characters only
        self.seed = seed
        self.examples: dict[str, list] = {}
        self.vocab: Vocab | None = None

    @property
    def folder(self) -> Path:
        return self.data_dir / self.corpus

    # -- what a corpus provides: `locate()` (its files' paths, verified, downloaded if allowed),
    # `read_splits()` (train/valid/test examples, read from those files) and `label_names()` (class or
    # tag names, index = id) ------------------------------------------------------------------------
    def locate(self) -> dict:
        raise NotImplementedError

    def label_ids(self, label) -> object:
        return label

    def spec_extras(self) -> dict:
        return {}

    # -- Lightning hooks --------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Verifies (and downloads) the files; assigns no state. Lightning calls it before every `fit`
        and `test`, so it does not parse them: `setup` does, once (CoNLL-2003's three splits take
        seconds to read, and were read twice per run)."""
        self.locate()

    def setup(self, stage: str | None = None) -> None:
        if self.vocab is not None:
            return
        self.examples = self.read_splits()
        train_words = [w for words, _ in self.examples["train"] for w in words]
        self.tokenizer = WordTokenizer(Vocab([]), self.lowercase)
        normalized = [self.tokenizer.normalize(w) for w in train_words]
        self.vocab = Vocab.build(normalized, (PAD, UNK), self.max_vocab, self.min_freq)
        if self.vocab.itos[0] != PAD:
            raise ValueError(f"{PAD} must be id 0")
        self.tokenizer.vocab = self.vocab
        counts = Counter(normalized)
        self.singletons = torch.zeros(len(self.vocab), dtype=torch.bool)
        for w, c in counts.items():
            if c == 1 and w in self.vocab.stoi:
                self.singletons[self.vocab.stoi[w]] = True
        self.chars = Vocab.build((c for w in train_words for c in w), (PAD, UNK))

    @property
    def spec(self) -> TaskSpec:
        if self.vocab is None:
            raise RuntimeError("call setup() before reading the spec")
        max_len = max(len(words) for split in SPLITS for words, _ in self.examples[split])
        extras = {"char_vocab_size": len(self.chars), "label_names": self.label_names(), **self.spec_extras()}
        return TaskSpec(task=self.task, vocab_size=len(self.vocab), num_classes=len(self.label_names()),
                        pad_id=0, max_len=max_len, tokenizer=self.tokenizer, extras=extras)

    # -- batches ----------------------------------------------------------------------------------
    def collate(self, examples: list, train: bool = False) -> dict:
        B = len(examples)
        T = max(len(words) for words, _ in examples)
        W = min(self.max_word_len, max(len(w) for words, _ in examples for w in words))
        inputs = torch.zeros(B, T, dtype=torch.long)
        chars = torch.zeros(B, T, W, dtype=torch.long)
        lengths = torch.tensor([len(words) for words, _ in examples])
        unk_char = self.chars.stoi[UNK]
        for b, (words, _) in enumerate(examples):
            inputs[b, : len(words)] = self.tokenizer.encode(words)
            for t, w in enumerate(words):
                chars[b, t, : min(len(w), W)] = torch.tensor([self.chars.stoi.get(c, unk_char) for c in w[:W]])
        if train and self.unk_replace > 0:
            drop = self.singletons[inputs] & (torch.rand(B, T) < self.unk_replace)
            inputs = inputs.masked_fill(drop, self.vocab.stoi[UNK])
        batch = {"input": inputs, "lengths": lengths, "chars": chars, "words": [list(w) for w, _ in examples]}
        if self.task == "tagging":
            tags = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
            for b, (_, labels) in enumerate(examples):
                tags[b, : len(labels)] = torch.tensor(self.label_ids(labels))
            batch["tags"] = tags
        else:
            batch["label"] = torch.tensor([self.label_ids(label) for _, label in examples])
        return batch

    def _loader(self, split: str, batch_size: int, shuffle: bool) -> DataLoader:
        if not shuffle:  # evaluation: every example scored once under DDP (seqbench.data.eval_shards)
            rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
            return DataLoader(Marked(self.examples[split]), batch_size=batch_size,
                              sampler=EvalShards(self.examples[split], rank, world),
                              collate_fn=marked_collate(lambda ex: self.collate(ex, train=False)))
        return DataLoader(self.examples[split], batch_size=batch_size, shuffle=shuffle,
                          collate_fn=lambda ex: self.collate(ex, train=shuffle),
                          generator=torch.Generator().manual_seed(self.seed) if shuffle else None)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, shuffle=False)
