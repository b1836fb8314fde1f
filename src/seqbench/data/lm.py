"""The language-modelling DataModule every LM corpus shares.

A corpus subclass says only where its three splits come from (`split_texts`) and at which level it
is tokenised; this base builds the vocabulary from train, encodes the splits into 1-D token
streams, and serves them to models in the form the model family asks for:

* `stream` (recurrent LMs): truncated-BPTT windows over contiguous columns, hidden state carried
  (see `streams.py`). The position in the stream is saved with checkpoints, so a resumed run
  continues at the next window with the same state.
* `windows` (attention LMs): windows of the model's `context` tokens, shuffled tiles of the stream
  for training and a sliding window with stride `eval_stride` over the whole split for evaluation
  (see `windows.py`). The window length is the model's (`model.context`, the size of its position
  table and of its attention), read from the model like `lm_batching`; the stride is a data option
  because it is part of the evaluation protocol, the same for every attention model on a corpus.

Perplexity is computed by the model from summed NLL over every target token of the split, so the
numbers of all families on one corpus are comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import lightning as L
import torch
from torch.utils.data import DataLoader

from seqbench.data.epoch_place import EpochPlace
from seqbench.data.spec import TaskSpec
from seqbench.data.streams import StreamWindows
from seqbench.data.vocab import EOS, UNK, Vocab, char_tokens, word_tokens
from seqbench.data.windows import EvalWindows, TrainWindows
from seqbench.errors import ConfigError

SPLITS = ("train", "valid", "test")


class LanguageModelDataModule(EpochPlace, L.LightningDataModule):
    """Word- or character-level LM corpus as token streams; subclasses implement `split_texts`."""

    task = "lm"
    corpus = "corpus"  # folder name under data_dir, and the name users see in messages
    model_reads_window = True  # EpochPlace keeps the batch's window: a stream's state resets at window 0

    def __init__(
        self,
        data_dir: str,
        batch_size: int = 20,
        eval_batch_size: int = 10,
        bptt: int = 35,
        level: Literal["word", "char", "bpe"] = "word",
        bpe_vocab: int = 8000,
        lowercase: bool = False,
        max_vocab: int | None = None,
        min_freq: int = 1,
        download: bool = True,
        eval_stride: int | None = None,
        seed: int = 0,
        tokenizer_from: str | None = None,
        variable_bptt: bool = False,
    ) -> None:
        super().__init__()
        self.data_dir = Path(data_dir).expanduser()
        self.download = download  # fetch missing files from the public source (checksum-verified)
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.bptt = bptt
        self.variable_bptt = variable_bptt  # stream: training windows of random length (AWD-LSTM), see streams.py
        self.level = level
        self.bpe_vocab, self.lowercase = bpe_vocab, lowercase  # level=bpe: its tokenizer's size and case
        self.subword = None  # level=bpe: the SubwordTokenizer trained on train
        self.tokenizer_from = tokenizer_from  # level=bpe: a checkpoint whose tokenizer to reuse instead
        if tokenizer_from and level != "bpe":
            raise ConfigError(f"data.tokenizer_from reuses a stored subword tokenizer; it needs data.level=bpe, "
                              f"not {level}.")
        self.max_vocab = max_vocab
        self.min_freq = min_freq
        self.eval_stride = eval_stride  # windows: null = half the model's context
        self.seed = seed  # windows: the order of training tiles is a function of (seed, epoch)
        self.vocab: Vocab | None = None
        self.streams: dict[str, torch.Tensor] = {}

    # -- what a corpus provides -------------------------------------------------------------
    @property
    def folder(self) -> Path:
        return self.data_dir / self.corpus

    def split_texts(self) -> dict[str, str]:
        """Raw text of train/valid/test; subclasses locate, download and verify their files."""
        raise NotImplementedError  # abstract: every corpus module implements it

    # -- Lightning hooks ----------------------------------------------------------------------
    def prepare_data(self) -> None:
        self.split_texts()  # downloads and verifies; assigns no state (Lightning calls it on rank 0 only)

    def setup(self, stage: str | None = None) -> None:
        if self.vocab is not None:  # run.py sets up before building the model; Lightning calls again
            return
        texts = self.split_texts()
        if self.level == "bpe":
            self._setup_bpe(texts)
            return
        tokenize = word_tokens if self.level == "word" else char_tokens
        tokens = {split: tokenize(texts[split]) for split in SPLITS}
        if self.level == "word":
            specials = (EOS, UNK)
        else:  # characters get <unk> only when valid/test hold a symbol train lacks (Shakespeare: none)
            seen = set(tokens["train"])
            specials = (UNK,) if any(c not in seen for s in ("valid", "test") for c in set(tokens[s])) else ()
        self.vocab = Vocab.build(tokens["train"], specials, self.max_vocab, self.min_freq)
        self.streams = {split: self.vocab.encode(tokens[split]) for split in SPLITS}

    def _setup_bpe(self, texts: dict[str, str]) -> None:
        """Subword level (a GPT's BPE, Radford et al. 2018 §4.1): BPE trained on the training lines with
        HF `tokenizers`, `<eos>` after every line as at word level. Ids are the tokenizer's, so a
        checkpoint that stores the tokenizer can encode any later text the same way."""
        from seqbench.data.stored_tokenizer import load_tokenizer
        from seqbench.data.subword import SubwordTokenizer, train_tokenizer

        lines = {split: [line for line in texts[split].splitlines() if line.strip()] for split in SPLITS}
        self.subword = (SubwordTokenizer(load_tokenizer(self.tokenizer_from)) if self.tokenizer_from else
                        train_tokenizer(lines["train"], self.bpe_vocab, "bpe", lowercase=self.lowercase))
        self.vocab = Vocab([self.subword.id_to_token(i) for i in range(self.subword.vocab_size)])
        eos = self.subword.eos_id
        self.streams = {split: torch.tensor([i for ids in self.subword.encode_batch(lines[split]) for i in ids + [eos]],
                                            dtype=torch.long) for split in SPLITS}

    @property
    def spec(self) -> TaskSpec:
        if self.vocab is None:
            raise RuntimeError("call setup() before reading the spec")
        eos = self.vocab.stoi.get(EOS)
        return TaskSpec(task="lm", vocab_size=len(self.vocab), eos_id=eos, tokenizer=self.tokenizer)

    @property
    def tokenizer(self) -> "LMTokenizer":
        return LMTokenizer(self.vocab, self.level, self.subword)

    def num_tokens(self, split: str) -> int:
        return self.streams[split].numel()

    # -- loaders ------------------------------------------------------------------------------
    def _rank(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _stream_loader(self, split: str, batch_size: int, start: int = 0) -> DataLoader:
        rank, world = self._rank()
        variable = self.variable_bptt and split == "train"
        if variable and self.trainer is not None and self.trainer.reload_dataloaders_every_n_epochs != 1:
            # Lightning counts an epoch's batches when it builds the loader; new lengths mean a new count
            raise ConfigError("data.variable_bptt=true draws new window lengths every epoch, so the training "
                              "loader must be rebuilt each epoch: set trainer.reload_dataloaders_every_n_epochs=1.")
        dataset = StreamWindows(self.streams[split], batch_size, self.bptt, rank, world, variable=variable,
                                seed=self.seed, epoch=lambda: self.trainer.current_epoch if self.trainer else 0)
        dataset.start = start
        # batch_size=None: the dataset yields whole batches; an IterableDataset keeps Lightning
        # from injecting a DistributedSampler that would shuffle the windows out of order. A private
        # generator: creating an iterator draws a seed, which must not shift the global RNG (dropout
        # masks) when a resumed run creates its iterator at another moment than the original did.
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def _batching(self) -> str:
        model = self.trainer.lightning_module if self.trainer is not None else None
        return getattr(model, "lm_batching", "stream")

    def _window_loader(self, split: str, batch_size: int, start: int = 0) -> DataLoader:
        rank, world = self._rank()
        model = self.trainer.lightning_module
        context = getattr(model, "context", None)
        if not isinstance(context, int) or context < 1:
            raise ValueError(f"{type(model).__name__} asks for LM windows but has no `context` length")
        if split == "train":
            dataset = TrainWindows(self.streams[split], batch_size, context, self.seed, rank, world,
                                   epoch=lambda: self.trainer.current_epoch)
            dataset.start = start if start < len(dataset) else 0  # 0: the checkpoint ended an epoch
        else:
            stride = self.eval_stride or max(1, context // 2)
            dataset = EvalWindows(self.streams[split], batch_size, context, stride, rank, world)
        # batch_size=None: the dataset yields whole batches; an IterableDataset keeps Lightning from
        # injecting a DistributedSampler, which would repeat windows to even out the ranks. A private
        # generator: creating an iterator draws a seed, which must not shift the global RNG (dropout)
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def train_dataloader(self) -> DataLoader:
        # Only a checkpoint's offset moves the start, and only in the epoch it was saved in: an ordinary
        # reload (variable BPTT rebuilds the loader every epoch) starts at window 0. Carrying the last
        # epoch's count over instead made variable-BPTT epochs that came out longer than the one
        # before train only their last few windows (found in experiment=ptb_awd_cpu, 2026-11-25).
        return self._loader("train", self.batch_size, self.resume_start())

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", self.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size)

    def _loader(self, split: str, batch_size: int, start: int = 0) -> DataLoader:
        batching = self._batching()
        if batching == "stream":
            loader = self._stream_loader(split, batch_size, start)
            if start >= len(loader):  # checkpoint taken at the very end of an epoch
                loader.dataset.start = 0
            return loader
        if batching == "windows":
            return self._window_loader(split, batch_size, start)
        raise ValueError(f"{type(self).__name__} cannot serve LM batches of kind {batching!r}")

    def train_batch_shape(self, model) -> tuple[int, int]:
        """(rows, length) of a full training batch, all processes together: what one step costs
        (seqbench.training.budget). Recurrent families read `bptt`-token windows, attention ones their context."""
        length = model.context if getattr(model, "lm_batching", "stream") == "windows" else self.bptt
        return self.batch_size, length

    def data_record(self) -> dict[str, int]:
        """The training split's size in tokens, for the run's record: a run's passes over its text are its
        tokens trained over this (`seqbench.protocol.profiles`: beyond about 4 a run measures repetition)."""
        return {"data/train_tokens": self.num_tokens("train")}

    def eval_context(self, model) -> dict[str, int]:
        """How much context a scored valid/test token is predicted from, for the run's record and the report.

        Windows: every token after the split's first window is scored with at least `context - stride`
        tokens before it (`eval/min_context`; the default stride, half the context, gives half). A
        recurrent stream: the state carries everything since the start of the token's column; the split
        is cut into `eval_batch_size` columns (`eval/column_tokens` each).
        """
        if getattr(model, "lm_batching", "stream") == "windows":
            context = model.context
            return {"eval/min_context": context - (self.eval_stride or max(1, context // 2))}
        return {"eval/column_tokens": self.num_tokens("test") // self.eval_batch_size}


class LMTokenizer:
    """Text <-> ids for prompts and samples, at the corpus' level (words, characters or BPE pieces)."""

    def __init__(self, vocab: Vocab, level: str, subword=None) -> None:
        self.vocab, self.level, self.subword = vocab, level, subword

    def encode(self, text: str) -> torch.Tensor:
        if self.level == "bpe":
            return torch.tensor(self.subword.encode(text), dtype=torch.long)
        tokens = text.split() if self.level == "word" else list(text)
        return self.vocab.encode(tokens)

    def decode(self, ids) -> str:
        if self.level == "char":
            return self.vocab.decode(ids, sep="")
        if self.level == "bpe":  # one line per <eos>; the Metaspace decoder restores the spaces
            lines, line = [], []
            for i in map(int, ids):
                if i == self.subword.eos_id:
                    lines.append(self.subword.tokenizer.decode(line))
                    line = []
                else:
                    line.append(i)
            return "\n".join(lines + [self.subword.tokenizer.decode(line)])
        return self.vocab.decode(ids).replace(f" {EOS} ", "\n").replace(EOS, "\n")
