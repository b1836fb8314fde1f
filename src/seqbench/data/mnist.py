"""MNIST (LeCun et al. 1998): 60,000 training and 10,000 test digits, 28 x 28 grey levels, 10 classes.

Read from `<data_dir>/mnist/` as the four original IDX files, plain or gzipped (see
`seqbench/data/idx.py`); the sha256 checked is that of the decompressed bytes, which is what the
published checksums are of. Missing files are downloaded (gzipped) from a public mirror of the
original site. Validation is the last 5,000 training images; test is the official 10,000.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.idx import IDXError, read_idx
from seqbench.data.images import ImageDataModule

MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist"  # the original files, as torchvision fetches them
# sha256 of the decompressed IDX files (../shared/data/mnist/SOURCE.md)
SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
SPLIT_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def read_split(images_path, labels_path, shape: tuple[int, int] = (28, 28), num_classes: int = 10,
               sha256: dict[str, str | None] | None = None) -> tuple[Tensor, Tensor]:
    """One split's IDX pair -> images (N, 1, H, W) uint8 and labels (N,) int64, every property checked."""
    sha256 = sha256 or {}
    images = read_idx(images_path, sha256.get(_stem(images_path)), ndim=3)
    labels = read_idx(labels_path, sha256.get(_stem(labels_path)), ndim=1)
    if images.shape[1:] != shape:
        raise IDXError(f"{images_path} holds images of {images.shape[1]}x{images.shape[2]} pixels, not "
                       f"{shape[0]}x{shape[1]}.")
    if images.shape[0] != labels.shape[0]:
        raise IDXError(f"{images_path} has {images.shape[0]} images but {labels_path} has {labels.shape[0]} "
                       f"labels; the two files are not a pair.")
    if labels.size and labels.max() >= num_classes:
        raise IDXError(f"{labels_path} holds label {int(labels.max())}, outside 0..{num_classes - 1}.")
    images = torch.from_numpy(np.array(images))[:, None]  # a writable copy, (N, H, W) -> (N, 1, H, W)
    return images, torch.from_numpy(labels.astype(np.int64))


def _stem(path) -> str:
    name = str(path).rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".gz") else name


class MNISTDataModule(ImageDataModule):
    corpus = "mnist"
    shape = (1, 28, 28)
    num_classes = 10
    mean, std = (0.1307,), (0.3081,)  # of the 60,000 training images, as the PyTorch MNIST example uses

    def _paths(self) -> dict[str, object]:
        """Each file as plain IDX if present, else as `.gz` (downloaded when missing)."""
        plain = {name: self.folder / name for name in SHA256 if (self.folder / name).is_file()}
        wanted = [CorpusFile(f"{name}.gz", None, f"{MIRROR}/{name}.gz") for name in SHA256 if name not in plain]
        hint = "train-images-idx3-ubyte.gz and the three other IDX files (gzipped or not)"
        found = ensure_files(self.folder, wanted, "mnist", hint, self.download) if wanted else {}
        return {name: plain.get(name) or found[f"{name}.gz"] for name in SHA256}

    def locate(self) -> None:
        self._paths()

    def load_splits(self) -> dict[str, tuple[Tensor, Tensor]]:
        paths = self._paths()
        return {split: read_split(paths[img], paths[lab], self.shape[1:], self.num_classes, SHA256)
                for split, (img, lab) in SPLIT_FILES.items()}
