"""Tiny Shakespeare, character level, with the split char-rnn and nanoGPT use.

The corpus is one file; the first 90% of its characters train and the last 10% validate. There is
no third split in the published setup, so `test` is the validation split: a run's test numbers
equal its validation numbers, and the tables say so rather than invent a split nobody reports.

A comparison that chooses anything on validation (a checkpoint, a size, a learning rate) and reports
that same validation number has no held-out score. `heldout_score=true` cuts the validation tenth in
two contiguous halves: `valid` is the first half (every choice is made on it: checkpoints, sweeps,
the frontier's sizes), `test` the second (only scored, after the choices). Off by default, so the
recorded results keep the published split.
"""

from __future__ import annotations

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.lm import LanguageModelDataModule

FILE = CorpusFile(
    "input.txt",
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
)


class ShakespeareCharDataModule(LanguageModelDataModule):
    corpus = "tiny_shakespeare"

    def __init__(self, data_dir: str, train_fraction: float = 0.9, heldout_score: bool = False, **kwargs) -> None:
        kwargs.setdefault("level", "char")
        super().__init__(data_dir, **kwargs)
        self.train_fraction = train_fraction
        self.heldout_score = heldout_score

    def split_texts(self) -> dict[str, str]:
        path = ensure_files(self.folder, [FILE], "Tiny Shakespeare", hint="input.txt", download=self.download)
        return split(path["input.txt"].read_text(encoding="utf-8"), self.train_fraction, self.heldout_score)


def split(text: str, train_fraction: float = 0.9, heldout_score: bool = False) -> dict[str, str]:
    """train = the first `train_fraction` of the characters; valid = test = the rest, or with
    `heldout_score` valid = the rest's first half (selection) and test = its second half (the score)::

        |<------------------ train (90 %) ------------------>|<- valid (5 %) ->|<- test (5 %) ->|
    """
    cut = int(len(text) * train_fraction)
    if not heldout_score:
        return {"train": text[:cut], "valid": text[cut:], "test": text[cut:]}
    middle = cut + (len(text) - cut) // 2
    return {"train": text[:cut], "valid": text[cut:middle], "test": text[middle:]}
