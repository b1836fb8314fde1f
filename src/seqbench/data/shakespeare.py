"""Tiny Shakespeare, character level, with the split char-rnn and nanoGPT use.

The corpus is one file; the first 90% of its characters train and the last 10% validate. There is
no third split in the published setup, so `test` is the validation split: a run's test numbers
equal its validation numbers, and the tables say so rather than invent a split nobody reports.
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

    def __init__(self, data_dir: str, train_fraction: float = 0.9, **kwargs) -> None:
        kwargs.setdefault("level", "char")
        super().__init__(data_dir, **kwargs)
        self.train_fraction = train_fraction

    def split_texts(self) -> dict[str, str]:
        path = ensure_files(self.folder, [FILE], "Tiny Shakespeare", hint="input.txt", download=self.download)
        text = path["input.txt"].read_text(encoding="utf-8")
        cut = int(len(text) * self.train_fraction)
        return {"train": text[:cut], "valid": text[cut:], "test": text[cut:]}
