"""CIFAR-10 (Krizhevsky 2009): 50,000 training and 10,000 test colour images, 32 x 32, 10 classes.

Read from `<data_dir>/cifar10/` as the python version of the dataset: either the archive
`cifar-10-python.tar.gz` as published (read in place, never extracted) or its extracted folder
`cifar-10-batches-py/`. The archive is checked against its published md5 and sha256, the extracted
batches against their published md5s (the ones torchvision checks). A missing archive is downloaded
from the dataset's home page when the machine has internet.

Each batch file is a pickled dict: b"data" a (10000, 3072) uint8 array, each row one image as three
1024-byte planes (red, green, blue) of 32 rows; b"labels" a list of 10,000 ints in 0..9. The pickles
are read with an unpickler that only builds dicts, lists, strings and numpy arrays, so a tampered
file cannot run code.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from seqbench.data.files import ChecksumError, CorpusFile, ensure_files
from seqbench.data.images import ImageDataModule
from seqbench.errors import DataNotFoundError

ARCHIVE = CorpusFile("cifar-10-python.tar.gz",
                     "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                     "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz")
ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"  # what the home page publishes; the sha256 above is checked
FOLDER = "cifar-10-batches-py"
BATCH_MD5 = {  # as published with the dataset's loaders (torchvision.datasets.CIFAR10)
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}
SPLITS = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def parse_batch(raw: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> images (N, 3, 32, 32) uint8 and labels (N,) int64, its shape checked."""
    try:
        batch = _ArraysOnly(io.BytesIO(raw), encoding="bytes").load()
        data, labels = np.asarray(batch[b"data"], dtype=np.uint8), np.asarray(batch[b"labels"], dtype=np.int64)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as exc:
        raise ChecksumError(f"{name} is not a CIFAR-10 python batch ({type(exc).__name__}: {exc}); replace it "
                            f"with the original.") from None
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.shape[0] != labels.shape[0]:
        raise ChecksumError(f"{name} holds data of shape {data.shape} with {labels.shape[0]} labels, not "
                            f"(N, 3072) with N labels.")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ChecksumError(f"{name} holds labels outside 0..9.")
    return data.reshape(-1, 3, 32, 32), labels  # (N, 3072) -> (N, C, H, W): planes of rows


def _check_md5(raw: bytes, expected: str | None, name: str) -> None:
    if expected is not None and hashlib.md5(raw).hexdigest() != expected:
        raise ChecksumError(f"{name} has md5 {hashlib.md5(raw).hexdigest()[:12]}… but the published batch has "
                            f"{expected[:12]}…: the file is corrupt or a different version; replace it with the original.")


def read_cifar10(source: Path, md5: dict[str, str | None] | None = None) -> dict[str, tuple[Tensor, Tensor]]:
    """The train and test splits from an extracted folder or the (already verified) archive."""
    md5 = BATCH_MD5 if md5 is None else md5
    source = Path(source)
    raws: dict[str, bytes] = {}
    if source.is_dir():
        for name in BATCH_MD5:
            path = source / name
            if not path.is_file():
                raise DataNotFoundError(f"cifar10: {path} is missing; put the six batch files of "
                                        f"{FOLDER}/ there, or the archive {ARCHIVE.name} beside it.")
            raws[name] = path.read_bytes()
    else:
        with tarfile.open(source, "r:gz") as tar:
            for name in BATCH_MD5:
                member = tar.extractfile(f"{FOLDER}/{name}")
                if member is None:
                    raise ChecksumError(f"{source} has no {FOLDER}/{name}; it is not the CIFAR-10 python archive.")
                raws[name] = member.read()
    out = {}
    for split, names in SPLITS.items():
        parts = []
        for name in names:
            where = f"{source}/{name}" if source.is_dir() else f"{source}:{FOLDER}/{name}"
            _check_md5(raws[name], md5.get(name), where)
            parts.append(parse_batch(raws[name], where))
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        out[split] = (torch.from_numpy(images), torch.from_numpy(labels))
    return out


class CIFAR10DataModule(ImageDataModule):
    corpus = "cifar10"
    shape = (3, 32, 32)
    num_classes = 10
    mean = (0.4914, 0.4822, 0.4465)  # of the 50,000 training images
    std = (0.2470, 0.2435, 0.2616)
    flips = True  # a mirrored airplane is still an airplane

    def _source(self) -> Path:
        extracted = self.folder / FOLDER
        if extracted.is_dir():
            return extracted
        hint = f"{ARCHIVE.name} (or its extracted {FOLDER}/ folder) from https://www.cs.toronto.edu/~kriz/cifar.html"
        return ensure_files(self.folder, [ARCHIVE], "cifar10", hint, self.download)[ARCHIVE.name]  # sha256-verified

    def locate(self) -> None:
        self._source()

    def load_splits(self) -> dict[str, tuple[Tensor, Tensor]]:
        return read_cifar10(self._source())
