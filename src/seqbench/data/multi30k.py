"""Multi30k task 1 (Elliott et al. 2016): 29k/1,014/1,000 German-English image captions.

The test split is `test_2016_flickr` ("test2016"), the one most published Multi30k numbers use
(bentrevett/pytorch-seq2seq among them). Files are the untokenised originals, one caption a line.
"""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request
from pathlib import Path

from seqbench.data.files import DOWNLOAD_TIMEOUT_S, CorpusFile, ensure_files
from seqbench.data.translation import TranslationDataModule

_RAW = "https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/"
SHA256 = {
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
}
STEMS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}


def _file(name: str) -> CorpusFile:
    return CorpusFile(name, SHA256[name], None)  # fetched by `_fetch_gz`: the source ships .gz files


def _fetch_gz(folder: Path, names: list[str]) -> None:
    """Download the missing `<name>.gz` files of the public repository and decompress them in place.

    Failures are left to `ensure_files`, which names the folder and what to do in one sentence.
    """
    for name in names:
        dest = folder / name
        if dest.is_file():
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(_RAW + name + ".gz", timeout=DOWNLOAD_TIMEOUT_S) as resp:
                data = gzip.decompress(resp.read())
        except (OSError, urllib.error.URLError):
            return
        tmp = dest.with_suffix(dest.suffix + ".part")
        tmp.write_bytes(data)
        tmp.replace(dest)  # ensure_files verifies the checksum next


class Multi30kDataModule(TranslationDataModule):
    corpus = "multi30k"
    languages = ("de", "en")

    def checksums(self) -> dict[str, str]:
        return SHA256

    def split_pairs(self) -> dict[str, tuple[list[str], list[str]]]:
        files = [_file(f"{STEMS[s]}.{lang}") for s in STEMS for lang in (self.source, self.target)]
        if self.download:
            _fetch_gz(self.folder, [f.name for f in files])
        paths = ensure_files(self.folder, files, "Multi30k", download=self.download,
                             hint=f"{{train,val,test_2016_flickr}}.{{de,en}} (decompressed from {_RAW})")
        read = lambda name: paths[name].read_text(encoding="utf-8").rstrip("\n").split("\n")  # noqa: E731
        return {split: (read(f"{stem}.{self.source}"), read(f"{stem}.{self.target}")) for split, stem in STEMS.items()}
