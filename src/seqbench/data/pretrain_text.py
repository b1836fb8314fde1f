"""Sentence pairs for BERT pre-training (Devlin et al. 2019) from any of the project's corpora.

`data.source` names the corpus, or several joined by `+` (`seqbench.data.sources`: ptb, shakespeare,
wikitext2 one sentence per line in document order; sst2, conll2003 their sentences; multi30k its
English side). A WordPiece tokenizer (HF `tokenizers`) is trained on the
source's training split; the model saves it in its checkpoints and fine-tuning reuses it.

Pairs (next-sentence prediction, §3.1 task #2): for sentence i, half of the time B is sentence i+1
(label 1, IsNext), otherwise a random sentence (label 0, NotNext), built once per split with a
seeded RNG:

    [CLS] a1 a2 ... [SEP] b1 b2 ... [SEP]      segments 0 0 ... 0 1 1 ... 1

The longer side is cut until the pair fits `max_len`. Masking (task #1, `mask_tokens`) picks 15% of
the non-special tokens; of those 80% become [MASK], 10% a random token, 10% stay, and only the
picked positions are scored. Training batches are masked afresh each time (dynamic masking, as in
RoBERTa); validation and test use the same masks every epoch.
"""

from __future__ import annotations

import random
from pathlib import Path

import lightning as L
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from torch.utils.data import DataLoader

from seqbench.data.sources import source_names, source_sentences
from seqbench.data.spec import TaskSpec
from seqbench.data.stored_tokenizer import load_tokenizer
from seqbench.data.streams import IGNORE_INDEX

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0..4, in this order
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)


def train_wordpiece(texts, vocab_size: int = 8000, lowercase: bool = False) -> Tokenizer:
    """A BERT-style WordPiece tokenizer trained on an iterator of sentences; [CLS]/[SEP] templates.

    Not reproducible across processes: the trainer breaks ties between equally frequent merges by ids
    assigned in hash-map order (huggingface/tokenizers#1794; fix proposed in PR #2066), so two runs
    with one seed can get different vocabularies (seen here: 640 of 8,000 SST-2 pieces differ). Every
    checkpoint stores its tokenizer, and `data.tokenizer_from=<ckpt>` reuses it exactly.
    """
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS_ID), ("[SEP]", SEP_ID)])
    return tok


def make_pairs(sentences: list[list[int]], max_len: int, rng: random.Random) -> list[tuple[list[int], list[int], int]]:
    """(ids, segments, is_next) for each sentence that has a successor; see the module docstring."""
    pairs = []
    n = len(sentences)
    for i in range(n - 1):
        a = list(sentences[i])
        if rng.random() < 0.5:
            b, label = list(sentences[i + 1]), 1
        else:
            j = rng.randrange(n - 1)
            j = j if j < i + 1 else j + 1  # any sentence but the true next one
            b, label = list(sentences[j]), 0
        while len(a) + len(b) > max_len - 3:  # cut the longer side (BERT's truncate_seq_pair)
            (a if len(a) >= len(b) else b).pop()
        ids = [CLS_ID] + a + [SEP_ID] + b + [SEP_ID]
        segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        pairs.append((ids, segments, label))
    return pairs


def mask_tokens(ids: torch.Tensor, vocab_size: int, generator: torch.Generator | None = None,
                prob: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B, T) -> (inputs, labels): labels hold the original id at the picked positions, IGNORE_INDEX
    elsewhere; specials ([PAD] [UNK] [CLS] [SEP] [MASK], ids < 5) are never picked."""
    special = ids < len(SPECIALS)
    picked = (torch.rand(ids.shape, generator=generator) < prob) & ~special
    labels = ids.masked_fill(~picked, IGNORE_INDEX)
    r = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=generator)
    inputs = torch.where(picked & (r < 0.8), torch.full_like(ids, MASK_ID), ids)
    inputs = torch.where(picked & (r >= 0.8) & (r < 0.9), random_ids, inputs)
    return inputs, labels


class PretrainTextDataModule(L.LightningDataModule):
    task = "mlm"

    def __init__(self, data_dir: str, source: str | list[str] = "ptb",
                 vocab_size: int = 8000, lowercase: bool = False, max_len: int = 128, mask_prob: float = 0.15,
                 batch_size: int = 32, eval_batch_size: int = 64, max_pairs: int | None = None,
                 download: bool = True, seed: int = 0, tokenizer_from: str | None = None) -> None:
        super().__init__()
        self.tokenizer_from = tokenizer_from  # a checkpoint whose WordPiece to reuse (stored_tokenizer.py)
        self.data_dir, self.download = Path(data_dir).expanduser(), download
        self.source = "+".join(source_names(source))  # checked now: a typo fails before any training
        self.vocab_size, self.lowercase, self.max_len, self.mask_prob = vocab_size, lowercase, max_len, mask_prob
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.max_pairs = max_pairs  # cap per split (a short CPU run); null = every sentence
        self.seed = seed
        self.tokenizer: Tokenizer | None = None

    def prepare_data(self) -> None:
        source_sentences(self.source, self.data_dir, self.download)

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is not None:
            return
        sentences = source_sentences(self.source, self.data_dir, self.download)
        self.tokenizer = (load_tokenizer(self.tokenizer_from) if self.tokenizer_from else
                          train_wordpiece(sentences["train"], self.vocab_size, self.lowercase))
        rng = random.Random(self.seed)
        self.pairs = {}
        for split, lines in sentences.items():
            ids = [e.ids for e in self.tokenizer.encode_batch(lines, add_special_tokens=False)]
            pairs = make_pairs([s for s in ids if s], self.max_len, rng)
            self.pairs[split] = pairs[: self.max_pairs] if self.max_pairs else pairs

    @property
    def spec(self) -> TaskSpec:
        if self.tokenizer is None:
            raise RuntimeError("call setup() before reading the spec")
        return TaskSpec(task="mlm", vocab_size=self.tokenizer.get_vocab_size(), num_classes=2, pad_id=PAD_ID,
                        max_len=self.max_len, tokenizer=self.tokenizer,
                        extras={"source": self.source, "cls_id": CLS_ID, "sep_id": SEP_ID, "mask_id": MASK_ID})

    def collate(self, pairs: list, generator: torch.Generator | None) -> dict:
        B, T = len(pairs), max(len(ids) for ids, _, _ in pairs)
        ids = torch.full((B, T), PAD_ID, dtype=torch.long)
        segments = torch.zeros(B, T, dtype=torch.long)
        for b, (i, s, _) in enumerate(pairs):
            ids[b, : len(i)], segments[b, : len(s)] = torch.tensor(i), torch.tensor(s)
        inputs, labels = mask_tokens(ids, self.tokenizer.get_vocab_size(), generator, self.mask_prob)
        return {"input": inputs, "segments": segments, "lengths": torch.tensor([len(i) for i, _, _ in pairs]),
                "mlm_labels": labels, "nsp_label": torch.tensor([label for _, _, label in pairs])}

    def _loader(self, split: str, batch_size: int, train: bool) -> DataLoader:
        generator = None if train else torch.Generator().manual_seed(self.seed + 1)  # same masks each epoch
        return DataLoader(self.pairs[split], batch_size=batch_size, shuffle=train,
                          collate_fn=lambda p: self.collate(p, generator),
                          generator=torch.Generator().manual_seed(self.seed) if train else None)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.batch_size, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", self.eval_batch_size, False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, False)
