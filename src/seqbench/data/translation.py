"""The translation DataModule every parallel corpus shares: subword ids, length buckets, padding masks.

A corpus subclass says only where its sentence pairs come from (`split_pairs`, raw text, one
sentence per line); this base trains the subword tokenizer(s) on train (cached, see `subword.py`),
encodes every split, and serves padded batches:

    src          (B, S)  source ids + <eos>, right-padded with <pad>
    src_lengths  (B,)    real source lengths (the padding mask is `arange(S) >= src_lengths`)
    tgt_in       (B, T)  <bos> + target ids        (the decoder's input under teacher forcing)
    target       (B, T)  target ids + <eos>        (what it must predict; padding = IGNORE_INDEX)
    index        (B,)    sentence number in the split (references and alignment pictures use it)

Batches are length-bucketed (Sutskever et al. 2014 sort by length; fairseq and torchtext's
BucketIterator do the same): training draws a pool of `bucket_pool` batches' worth of shuffled
pairs, sorts the pool by source length and cuts it into batches, then shuffles the batches — little
padding, still random. Evaluation sorts the whole split. The loaders are `IterableDataset`s yielding
whole batches, sharded by rank (`batches[rank::world]`), so Lightning injects no DistributedSampler
and every rank sees a disjoint part of each epoch.

A run resumed mid-epoch continues at the batch after the last one it trained on: the training order is a
function of (seed, epoch), and the data module saves its place in it with the checkpoint. Lightning alone
would restart the epoch's iterator and train its first batches a second time, in place of its last ones
(a sweep stopped at a session's end and resumed in the next did exactly that before this).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from seqbench.data.epoch_place import EpochPlace
from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.subword import SubwordTokenizer, cached_tokenizer
from seqbench.errors import ConfigError

SPLITS = ("train", "valid", "test")


def collate(pairs: list[tuple[int, list[int], list[int]]], pad: int, bos: int, eos: int) -> dict:
    """[(index, src ids, tgt ids)] -> the padded batch described in the module docstring."""
    B = len(pairs)
    S = max(len(s) for _, s, _ in pairs) + 1
    T = max(len(t) for _, _, t in pairs) + 1
    src = torch.full((B, S), pad, dtype=torch.long)
    tgt_in = torch.full((B, T), pad, dtype=torch.long)
    target = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
    for b, (_, s, t) in enumerate(pairs):
        src[b, : len(s) + 1] = torch.tensor(s + [eos])
        tgt_in[b, : len(t) + 1] = torch.tensor([bos] + t)
        target[b, : len(t) + 1] = torch.tensor(t + [eos])
    return {"src": src, "src_lengths": torch.tensor([len(s) + 1 for _, s, _ in pairs]),
            "tgt_in": tgt_in, "target": target, "tgt_lengths": torch.tensor([len(t) + 1 for _, _, t in pairs]),
            "index": torch.tensor([i for i, _, _ in pairs])}


class BucketBatches(IterableDataset):
    """Length-bucketed batches of one split, for one rank; training order is a function of (seed, epoch)."""

    def __init__(self, pairs: list[tuple[int, list[int], list[int]]], batch_size: int, specials: tuple[int, int, int],
                 train: bool, seed: int = 0, rank: int = 0, world: int = 1, bucket_pool: int = 50,
                 epoch=lambda: 0, transform=None) -> None:
        self.pairs, self.batch_size, self.specials = pairs, batch_size, specials
        self.train, self.seed, self.rank, self.world, self.pool = train, seed, rank, world, bucket_pool
        self.epoch = epoch
        self.transform = transform  # (pair, epoch) -> pair, e.g. fresh span corruption every epoch
        self.start = 0  # resume: this rank's first batch of the next pass (training only)

    def batches(self) -> list[list[int]]:
        order = list(range(len(self.pairs)))
        length = lambda i: (len(self.pairs[i][1]), len(self.pairs[i][2]))  # noqa: E731
        if not self.train:
            order.sort(key=length)
            return [order[i: i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        rng = random.Random(self.seed * 100_003 + self.epoch())
        rng.shuffle(order)
        pool = self.pool * self.batch_size
        batches = []
        for start in range(0, len(order), pool):
            chunk = sorted(order[start: start + pool], key=length)
            batches += [chunk[i: i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        rng.shuffle(batches)
        return batches[: len(batches) - len(batches) % self.world] if self.world > 1 else batches

    def __len__(self) -> int:
        return len(self.batches()[self.rank:: self.world])

    def __iter__(self):
        """Training batches carry `window`, their number in this rank's epoch, for the data module to save
        its place (it removes the key before the model sees the batch)."""
        epoch = self.epoch() if self.train else 0
        start, self.start = self.start, 0  # a resume offset applies to one pass only
        batches = self.batches()[self.rank:: self.world]
        for b in range(start, len(batches)):
            pairs = [self.pairs[i] for i in batches[b]]
            if self.transform is not None:
                pairs = [self.transform(p, epoch) for p in pairs]
            yield {**collate(pairs, *self.specials), "window": b} if self.train else collate(pairs, *self.specials)


class TranslationDataModule(EpochPlace, L.LightningDataModule):
    """Parallel corpus as subword-id pairs; subclasses implement `split_pairs` and `checksums`."""

    task = "translation"
    corpus = "corpus"
    languages: tuple[str, ...] = ()
    sentinels = 0  # T5 sentinel tokens in the vocabulary (span corruption)
    transform = None  # (pair, epoch) -> pair applied to every batch (span corruption)

    def __init__(self, data_dir: str, cache_dir: str, source: str, target: str, batch_size: int = 128,
                 eval_batch_size: int = 128, joint_vocab: bool = False, vocab_size: int = 8000,
                 tgt_vocab_size: int | None = None, subword: Literal["bpe", "unigram"] = "bpe",
                 max_train_len: int = 100, bucket_pool: int = 50, download: bool = True, seed: int = 0,
                 val_bleu_every_n_epochs: int = 1, beam_size: int = 5, length_penalty: float = 1.0,
                 max_len_a: float = 1.5, max_len_b: int = 10, val_beam_size: int = 1) -> None:
        super().__init__()
        if self.languages and {source, target} - set(self.languages) or source == target:
            raise ConfigError(f"data.source={source} and data.target={target}: {self.corpus} translates between "
                              f"two different languages of {', '.join(self.languages)}.")
        self.data_dir, self.cache_dir = Path(data_dir).expanduser(), Path(cache_dir).expanduser()
        self.source, self.target = source, target
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.joint_vocab, self.vocab_size = joint_vocab, vocab_size
        self.tgt_vocab_size = tgt_vocab_size or vocab_size
        self.subword, self.max_train_len, self.bucket_pool = subword, max_train_len, bucket_pool
        self.download, self.seed = download, seed
        # the evaluation protocol, the same for every family on a corpus (read by the task via the spec)
        self.decoding = {"val_bleu_every_n_epochs": val_bleu_every_n_epochs, "beam_size": beam_size,
                         "val_beam_size": val_beam_size, "length_penalty": length_penalty,
                         "max_len_a": max_len_a, "max_len_b": max_len_b}
        self.src_tok: SubwordTokenizer | None = None
        self.tgt_tok: SubwordTokenizer | None = None
        self.pairs: dict[str, list] = {}
        self.texts: dict[str, tuple[list[str], list[str]]] = {}

    @property
    def folder(self) -> Path:
        return self.data_dir / self.corpus

    # a corpus defines split_pairs() -> {"train"|"valid"|"test": (source lines, target lines)}, verified
    def checksums(self) -> dict[str, str]:
        return {}

    # -- Lightning hooks ----------------------------------------------------------------------
    def prepare_data(self) -> None:
        self.split_pairs()  # downloads and verifies; assigns no state

    def setup(self, stage: str | None = None) -> None:
        if self.pairs:
            return
        self.texts = self.split_pairs()
        src_train, tgt_train = self.texts["train"]
        base = {"corpus": self.corpus, "kind": self.subword, "files": self.checksums()}
        if self.sentinels:
            base["sentinels"] = self.sentinels
        if self.joint_vocab:
            key = {**base, "name": f"{self.corpus}-joint", "langs": sorted([self.source, self.target]),
                   "vocab_size": self.vocab_size}
            self.src_tok = self.tgt_tok = cached_tokenizer(self.cache_dir, key, lambda: src_train + tgt_train)
        else:
            self.src_tok = cached_tokenizer(self.cache_dir, {**base, "name": f"{self.corpus}-{self.source}",
                                                             "vocab_size": self.vocab_size}, lambda: src_train)
            self.tgt_tok = cached_tokenizer(self.cache_dir, {**base, "name": f"{self.corpus}-{self.target}",
                                                             "vocab_size": self.tgt_vocab_size}, lambda: tgt_train)
        for split, (src, tgt) in self.texts.items():
            pairs = list(zip(range(len(src)), self.src_tok.encode_batch(src), self.tgt_tok.encode_batch(tgt)))
            if split == "train":
                pairs = [p for p in pairs if len(p[1]) <= self.max_train_len and len(p[2]) <= self.max_train_len]
            self.pairs[split] = pairs

    @property
    def spec(self) -> TaskSpec:
        if not self.pairs:
            raise RuntimeError("call setup() before reading the spec")
        longest = max(max(len(s), len(t)) for pairs in self.pairs.values() for _, s, t in pairs) + 2
        tok = self.tgt_tok
        return TaskSpec(task="translation", src_vocab_size=self.src_tok.vocab_size,
                        tgt_vocab_size=tok.vocab_size, pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id,
                        max_len=longest, tokenizer=tok,
                        extras={"src_tokenizer": self.src_tok, "joint_vocab": self.joint_vocab,
                                "references": {"val": self.texts["valid"][1], "test": self.texts["test"][1]},
                                "sources": {"val": self.texts["valid"][0], "test": self.texts["test"][0]},
                                "direction": f"{self.source}-{self.target}", **self.decoding})

    # -- loaders ------------------------------------------------------------------------------
    def _loader(self, split: str, batch_size: int, train: bool, start: int = 0) -> DataLoader:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if train and batch_size % world:
            raise ConfigError(f"data.batch_size={batch_size} must be divisible by the {world} processes.")
        dataset = BucketBatches(self.pairs[split], batch_size // world if train else batch_size,
                                (self.tgt_tok.pad_id, self.tgt_tok.bos_id, self.tgt_tok.eos_id), train, self.seed,
                                rank, world, self.bucket_pool,
                                epoch=(lambda: trainer.current_epoch) if trainer is not None else (lambda: 0),
                                transform=self.transform)
        dataset.start = start if start < len(dataset) else 0  # saved at the very end of an epoch: from 0
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.batch_size, train=True, start=self.resume_start())

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", self.eval_batch_size, train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, train=False)
