"""CoNLL-2003 English (Tjong Kim Sang & De Meulder 2003): named entities or parts of speech.

The files have one token per line, `token POS chunk NER`, a blank line between sentences and
`-DOCSTART-` lines between documents (kept out of the sentences). `data.label=ner` tags entities,
converted from the files' IOB1 to `data.tag_scheme` (iob2 by default, or bioes; the chunks are the
same, see `seqbench.metrics.spans`), and scored by entity F1 as well as token accuracy;
`data.label=pos` tags the Penn Treebank part of speech and is scored by accuracy.
"""

from __future__ import annotations

from typing import Literal

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.sentences import SPLITS, SentenceDataModule
from seqbench.errors import DataFormatError
from seqbench.metrics.spans import convert

_RAW = "https://raw.githubusercontent.com/suryasumukh/conll-ner/18d3e43a09247adaa9ec088485a087d5ffa758a6/data/"
FILES = {
    "train": CorpusFile("eng.train", "eac0822f501353f265383ddf1edb0dcd42a1b6eefd3e383d7074db98c38eb41c",
                        _RAW + "eng.train"),
    "valid": CorpusFile("eng.testa", "aedc4ccbd1ae9795feaa0e86fe72d195b0258abed9d705b630d1c889276fac1e",
                        _RAW + "eng.testa"),
    "test": CorpusFile("eng.testb", "0632f32c090ef31c223135b7fee3187a7cf8e65c4015c7866bb7783428cdd9a6",
                       _RAW + "eng.testb"),
}
COLUMNS = {"pos": 1, "ner": 3}


def read_conll(path, columns: int = 4) -> list[list[list[str]]]:
    """Sentences as lists of token rows (each `columns` fields); a wrong row names its file and line."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if current:
                    sentences.append(current)
                current = []
                continue
            if len(fields) != columns:
                raise DataFormatError(f"{path}:{n}: expected {columns} columns (token POS chunk NER), found "
                                      f"{len(fields)}: {line.strip()[:60]!r}.")
            current.append(fields)
    if current:
        sentences.append(current)
    return sentences


class CoNLL2003DataModule(SentenceDataModule):
    task = "tagging"
    corpus = "conll2003"

    def __init__(self, data_dir: str, label: Literal["ner", "pos"] = "ner",
                 tag_scheme: Literal["iob2", "bioes", "iob1"] = "iob2", **kwargs) -> None:
        super().__init__(data_dir, **kwargs)
        self.label, self.tag_scheme = label, tag_scheme
        self._names: list[str] | None = None

    def locate(self) -> dict:
        return ensure_files(self.folder, list(FILES.values()), "CoNLL-2003", hint="eng.{train,testa,testb}",
                            download=self.download)

    def read_splits(self) -> dict[str, list[tuple[list[str], list[str]]]]:
        paths = self.locate()
        column = COLUMNS[self.label]
        splits = {}
        for split, f in FILES.items():
            examples = []
            for rows in read_conll(paths[f.name]):
                words, tags = [r[0] for r in rows], [r[column] for r in rows]
                examples.append((words, convert(tags, self.tag_scheme) if self.label == "ner" else tags))
            splits[split] = examples
        return splits

    def label_names(self) -> list[str]:
        if self._names is None:  # every tag of the inventory (a rare POS tag may be missing from train)
            seen = {t for split in SPLITS for _, tags in self.examples[split] for t in tags}
            self._names = sorted(seen, key=lambda t: (t != "O", t))
            self._ids = {t: i for i, t in enumerate(self._names)}
        return self._names

    def label_ids(self, tags: list[str]) -> list[int]:
        self.label_names()
        return [self._ids[t] for t in tags]

    def spec_extras(self) -> dict:
        extras = {"tag_names": self.label_names(), "label": self.label}
        if self.label == "ner":
            extras["tag_scheme"] = self.tag_scheme
        return extras
