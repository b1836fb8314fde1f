"""A user's own corpus: three plain-text files, word or character level.

This is how a user brings their data: `data=text data.train_file=a.txt data.valid_file=b.txt
data.test_file=c.txt [data.level=char]`. A relative path means what it means in the user's shell:
relative to the directory the command was run from (Hydra does not change it); a path found only
under `data.data_dir` is read from there, as earlier versions did. Word level
appends `<eos>` to every line and builds the vocabulary from the training file only (optionally
capped by `data.max_vocab` / `data.min_freq`); valid/test words outside it become `<unk>`.
"""

from __future__ import annotations

from pathlib import Path

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.errors import DataFormatError, DataNotFoundError
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
            path = self.locate(name, split)
            found = ensure_files(path.parent, [CorpusFile(path.name, None)], f"text corpus ({split})",
                                 hint=path.name)
            texts[split] = read_user_text(found[path.name], split)
        return texts

    def locate(self, name: str, split: str) -> Path:
        path = Path(name).expanduser()
        if path.is_absolute():
            return path
        here, there = Path.cwd() / path, self.data_dir / path
        if here.is_file() or not there.is_file():
            if not here.is_file():
                raise DataNotFoundError(f"data.{split}_file={name} was found neither in {Path.cwd()} (where the "
                                        f"command ran) nor in data.data_dir={self.data_dir}; give a path that exists.")
            return here
        return there


def read_user_text(path: Path, split: str) -> str:
    """A user's file as text. Windows (CRLF) and old Mac (CR) line ends read as newlines (Python's
    universal newlines), so they count the same lines as the file saved with LF; bytes that are not
    UTF-8 and a file without any text end in one sentence rather than a traceback or empty streams."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(
            f"data.{split}_file={path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            f"convert it first, e.g. iconv -f latin1 -t utf-8 {path.name} > {path.stem}.utf8{path.suffix}.") from None
    if not text.strip():
        raise DataFormatError(f"data.{split}_file={path} holds no text (it is empty or only blank lines).")
    return text.removeprefix("\ufeff")  # a byte-order mark is not a character of the corpus
