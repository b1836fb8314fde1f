"""The image-classification DataModule every image corpus shares: whole splits in memory, batched on the fly.

A corpus subclass says only how to read its train and test splits as uint8 tensors (`load_splits`)
and its shape and channel statistics; this base holds out the last `val_size` training images as
the validation split, serves index batches, and turns each batch into what a model reads:

    loader (CPU, uint8)        on_after_batch_transfer (on the model's device, float)
    image (B, C, H, W) uint8   -> /255 -> [random shift, flip: training only] -> normalise
    label (B,)                 -> image (B, C, H, W), label (B,)
                                  [+ input (B, T, F), lengths (B,) when as_sequence is set]

Doing the float work after the transfer keeps the loader to one tensor index per batch (no
per-image Python) and runs augmentation on the GPU when there is one. The sequence forms are
the classic ways a recurrent network reads an image (Le et al. 2015; Cooijmans et al. 2016):

    rows             T = H,     F = C * W   one image row per step (row-by-row MNIST, T = 28)
    pixels           T = H * W, F = C       one pixel per step in raster order (sMNIST, T = 784)
    permuted_pixels  T = H * W, F = C       the pixels in one fixed random order (psMNIST): the same
                                            permutation for every image, drawn from `permutation_seed`
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError

SequenceForm = Literal["rows", "pixels", "permuted_pixels"]


def pixel_permutation(num_pixels: int, seed: int) -> Tensor:
    """The fixed pixel order of permuted sequential MNIST: a function of the seed alone."""
    return torch.randperm(num_pixels, generator=torch.Generator().manual_seed(seed))


def as_sequence(images: Tensor, form: SequenceForm, permutation: Tensor | None = None) -> Tensor:
    """(B, C, H, W) -> (B, T, F) in one of the three reading orders (see the module docstring)."""
    B, C, H, W = images.shape
    if form == "rows":
        return images.permute(0, 2, 1, 3).reshape(B, H, C * W)  # (B, C, H, W) -> (B, H, C, W) -> (B, H, C*W)
    pixels = images.reshape(B, C, H * W).transpose(1, 2)  # (B, C, H*W) -> (B, H*W, C)
    if form == "pixels":
        return pixels
    if form == "permuted_pixels":
        return pixels[:, permutation.to(images.device)]  # (B, H*W, C), columns reordered
    raise ValueError(f"unknown sequence form {form!r}; choose rows, pixels or permuted_pixels")


def random_shift(images: Tensor, pad: int) -> Tensor:
    """Zero-pad by `pad` and crop back at a random offset per image: shifts of up to ±pad pixels.

    Vectorised with one gather: row offset dy and column offset dx are drawn per image, and image b
    reads padded[b, :, dy_b : dy_b + H, dx_b : dx_b + W].
    """
    if pad <= 0:
        return images
    B, C, H, W = images.shape
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))  # (B, C, H + 2p, W + 2p)
    dy = torch.randint(0, 2 * pad + 1, (B,), device=images.device)
    dx = torch.randint(0, 2 * pad + 1, (B,), device=images.device)
    rows = (dy[:, None] + torch.arange(H, device=images.device))[:, None, :, None]  # (B, 1, H, 1)
    cols = (dx[:, None] + torch.arange(W, device=images.device))[:, None, None, :]  # (B, 1, 1, W)
    b = torch.arange(B, device=images.device)[:, None, None, None]
    c = torch.arange(C, device=images.device)[None, :, None, None]
    return padded[b, c, rows, cols]  # (B, C, H, W)


def random_flip(images: Tensor) -> Tensor:
    """Mirror each image left-right with probability 1/2 (CIFAR; never MNIST, where it changes digits)."""
    flip = torch.rand(images.size(0), device=images.device) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


class TensorImages(Dataset):
    """A split held as two tensors; `__getitems__` lets the DataLoader fetch a whole batch by one index."""

    def __init__(self, images: Tensor, labels: Tensor) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return self.labels.numel()

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {"image": self.images[i], "label": self.labels[i]}

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        idx = torch.as_tensor(indices)
        return {"image": self.images[idx], "label": self.labels[idx]}  # (B, C, H, W), (B,)


def _batch_as_is(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    return batch  # module-level (not a lambda) so loader workers can pickle it


class ImageDataModule(L.LightningDataModule):
    """Image corpus in memory; subclasses set the shape, statistics and implement `load_splits`."""

    task = "image"
    corpus = "images"  # folder under data_dir and the name users see in messages
    shape: tuple[int, int, int] = (1, 28, 28)  # (C, H, W)
    num_classes = 10
    mean: tuple[float, ...] = (0.5,)  # per channel, of the training images scaled to [0, 1]
    std: tuple[float, ...] = (0.5,)
    flips = False  # whether left-right mirroring preserves the class

    def __init__(
        self,
        data_dir: str,
        batch_size: int = 128,
        eval_batch_size: int = 1000,
        val_size: int = 5000,
        train_size: int | None = None,
        normalize: bool = True,
        augment: bool = False,
        shift: int = 2,
        as_sequence: SequenceForm | None = "rows",
        permutation_seed: int = 0,
        download: bool = True,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        self.data_dir = Path(data_dir).expanduser()
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.val_size = val_size  # the last val_size training images; the official test set stays untouched
        self.train_size = train_size  # use only the first train_size of the rest (small studies, tests)
        self.normalize, self.augment, self.shift = normalize, augment, shift
        self.sequence_form = as_sequence
        self.permutation = pixel_permutation(self.shape[1] * self.shape[2], permutation_seed)
        self.download = download
        self.num_workers = num_workers
        self.splits: dict[str, TensorImages] = {}

    # -- what a corpus provides: `locate()` finds (or downloads) its files and fails with one
    # sentence when they are not there; `load_splits()` returns {"train": (images (N, C, H, W) uint8,
    # labels (N,) int64), "test": (...)}, verified.
    @property
    def folder(self) -> Path:
        return self.data_dir / self.corpus

    # -- Lightning hooks ----------------------------------------------------------------------
    def prepare_data(self) -> None:
        self.locate()  # downloads only; assigns no state (Lightning calls it on rank 0 only)

    def setup(self, stage: str | None = None) -> None:
        if self.splits:  # run.py sets up before building the model; Lightning calls again
            return
        data = self.load_splits()
        images, labels = data["train"]
        if not 0 < self.val_size < labels.numel():
            raise ConfigError(f"data.val_size={self.val_size} must be between 1 and {labels.numel() - 1} "
                              f"(the {self.corpus} training set has {labels.numel()} images).")
        cut = labels.numel() - self.val_size
        end = cut if self.train_size is None else min(cut, self.train_size)
        self.splits = {"train": TensorImages(images[:end], labels[:end]),
                       "val": TensorImages(images[cut:], labels[cut:]),
                       "test": TensorImages(*data["test"])}

    @property
    def spec(self) -> TaskSpec:
        """Sizes come from the corpus's declared shape, so a model can be built before any data is read."""
        C, H, W = self.shape
        T, F = {"rows": (H, C * W), "pixels": (H * W, C), "permuted_pixels": (H * W, C)}.get(
            self.sequence_form, (None, None))
        return TaskSpec(task="image", num_classes=self.num_classes, input_dim=F, max_len=T,
                        extras={"channels": C, "height": H, "width": W})

    # -- batches: uint8 on the loader, float work after the transfer to the model's device ------
    def transform(self, batch: dict[str, Tensor], train: bool = False) -> dict[str, Tensor]:
        x = batch["image"].float().div_(255)  # (B, C, H, W) in [0, 1]
        if train and self.augment:
            x = random_shift(x, self.shift)
            if self.flips:
                x = random_flip(x)
        if self.normalize:
            mean = torch.tensor(self.mean, device=x.device)[None, :, None, None]
            std = torch.tensor(self.std, device=x.device)[None, :, None, None]
            x = (x - mean) / std
        out = {"image": x, "label": batch["label"]}
        if self.sequence_form is not None:
            out["input"] = as_sequence(x, self.sequence_form, self.permutation)  # (B, T, F)
            out["lengths"] = torch.full((x.size(0),), out["input"].size(1), dtype=torch.long, device=x.device)
        return out

    def on_after_batch_transfer(self, batch: dict[str, Tensor], dataloader_idx: int) -> dict[str, Tensor]:
        training = self.trainer is not None and self.trainer.training
        return self.transform(batch, train=training)

    def _loader(self, split: str, batch_size: int, shuffle: bool) -> DataLoader:
        world = self.trainer.world_size if self.trainer is not None else 1
        if batch_size % world:
            raise ConfigError(f"data.batch_size={batch_size} must be divisible by the {world} processes.")
        return DataLoader(self.splits[split], batch_size=batch_size // world, shuffle=shuffle,
                          collate_fn=_batch_as_is, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, shuffle=False)
