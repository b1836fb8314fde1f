"""Plain English sentences from the project's corpora, one corpus or several: what pre-training reads.

Pre-training (BERT's sentence pairs, a GPT language model) needs running text and nothing else. Every
corpus of the project has some: the LM corpora (ptb, shakespeare, wikitext2) line by line, the labelled
ones (sst2, conll2003) their sentences without the labels, and Multi30k its English side. A source is
one name or several joined by `+` (or a list): `ptb+conll2003+sst2+multi30k` is the ~1.6M-word English
corpus the pretraining experiment uses. Splits stay splits — train from every corpus's train, and so
on — so nothing a fine-tuning run is tested on is ever trained on (the tokenizer is trained on train).
"""

from __future__ import annotations

from pathlib import Path

from seqbench.errors import ConfigError

SOURCES = ("ptb", "shakespeare", "wikitext2", "sst2", "conll2003", "multi30k")
SPLITS = ("train", "valid", "test")


def source_names(source: str | list[str] | tuple[str, ...]) -> list[str]:
    """`a+b` or [a, b] -> [a, b], each checked against SOURCES."""
    names = [s.strip() for s in (source.split("+") if isinstance(source, str) else list(source)) if s.strip()]
    unknown = [s for s in names if s not in SOURCES]
    if not names or unknown:
        raise ConfigError(f"data.source={source}: unknown corpus {unknown or source}; choose from "
                          f"{', '.join(SOURCES)}, or several joined by '+'.")
    return names


def _one(name: str, data_dir: Path, download: bool) -> dict[str, list[str]]:
    from seqbench.data.conll2003 import CoNLL2003DataModule
    from seqbench.data.multi30k import Multi30kDataModule
    from seqbench.data.ptb import PTBDataModule
    from seqbench.data.shakespeare import ShakespeareCharDataModule
    from seqbench.data.sst2 import SST2DataModule
    from seqbench.data.wikitext2 import WikiText2DataModule

    lm = {"ptb": PTBDataModule, "shakespeare": ShakespeareCharDataModule, "wikitext2": WikiText2DataModule}
    if name in lm:
        texts = lm[name](str(data_dir), download=download).split_texts()
        return {s: [line.strip() for line in texts[s].splitlines() if line.strip()] for s in SPLITS}
    if name == "multi30k":
        pairs = Multi30kDataModule(str(data_dir), cache_dir=str(data_dir), source="de", target="en",
                                   download=download).split_pairs()
        return {s: [line.strip() for line in pairs[s][1] if line.strip()] for s in SPLITS}
    module = {"sst2": SST2DataModule, "conll2003": CoNLL2003DataModule}[name](str(data_dir), download=download)
    return {s: [" ".join(words) for words, _ in ex] for s, ex in module.read_splits().items()}


def source_sentences(source: str | list[str], data_dir: Path, download: bool = True) -> dict[str, list[str]]:
    """train/valid/test sentences of one corpus or several (concatenated per split, in the order named),
    each corpus in document order."""
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    for name in source_names(source):
        for split, lines in _one(name, Path(data_dir), download).items():
            out[split].extend(lines)
    return out
