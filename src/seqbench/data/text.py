"""A user's own corpus: three plain-text files, word or character level.

This is how a user brings their data: `data=text data.train_file=a.txt data.valid_file=b.txt
data.test_file=c.txt [data.level=char]`. Relative paths are read from `data.data_dir`. Word level
appends `<eos>` to every line and builds the vocabulary from the training file only (optionally
capped by `data.max_vocab` / `data.min_freq`); valid/test words outside it become `<unk>`.
"""

from __future__ import annotations

from pathlib import Path

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.lm import LanguageModelDataModule


class TextDataModule(LanguageModelDataModule):
    corpus = "text"

    def __init__(self, data_dir: str, train_file: str, valid_file: str, test_file: str | None = None,
                 **kwargs) -> None:
        super().__init__(data_dir, **kwargs)
        self.files = {"train": train_file, "valid": valid_file, "test": test_file or valid_file}

    def split_texts(self) -> dict[str, str]:
        texts = {}
        for split, name in self.files.items():
            path = Path(name).expanduser()
            path = path if path.is_absolute() else self.data_dir / path
            found = ensure_files(path.parent, [CorpusFile(path.name, None)], f"text corpus ({split})",
                                 hint=path.name)
            texts[split] = found[path.name].read_text(encoding="utf-8")
        return texts
