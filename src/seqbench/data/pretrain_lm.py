"""A language-model corpus made of the project's English text, for pre-training a GPT.

`data=pretrain_lm` reads the sentences of one or several corpora (`data.source=ptb+conll2003+sst2+
multi30k`, see `seqbench.data.sources`) as an LM stream, one sentence per line with `<eos>` after each,
at `data.level=bpe` by default: a BPE tokenizer trained on the training split, which a GPT stores in
its checkpoints so that fine-tuning (`model=gpt data=sst2 model.pretrained=<ckpt>`) cuts the task's
words into the same pieces. The issue a word vocabulary has — PTB's 10k words miss 27.6% of SST-2's
tokens — is gone: every word becomes known pieces.
"""

from __future__ import annotations

from seqbench.data.lm import LanguageModelDataModule
from seqbench.data.sources import source_names, source_sentences


class PretrainLMDataModule(LanguageModelDataModule):
    corpus = "pretrain_lm"

    def __init__(self, data_dir: str, source: str | list[str] = "ptb+conll2003+sst2+multi30k", **kwargs) -> None:
        kwargs.setdefault("level", "bpe")
        super().__init__(data_dir, **kwargs)
        self.source = "+".join(source_names(source))  # checked now: a typo fails before any training

    def split_texts(self) -> dict[str, str]:
        return {split: "\n".join(lines) + "\n"
                for split, lines in source_sentences(self.source, self.data_dir, self.download).items()}
