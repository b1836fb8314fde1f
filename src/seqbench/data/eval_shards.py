"""Evaluation under DDP that scores every example exactly once.

Lightning gives map-style loaders a `DistributedSampler`, which evens out the ranks by repeating
examples: with 11 validation sentences on 2 processes one of them is scored twice, and accuracy and
F1 are then off. Dropping the repeats instead (Lightning's `UnrepeatedDistributedSampler`) leaves the
ranks with different numbers of batches, and DDP's forward broadcasts module buffers on every batch,
so a rank with one batch more would wait for the others forever. So ranks keep equal numbers of
batches and the filler is marked:

    11 examples, 2 ranks    rank 0: 0 2 4 6 8 10        (6, all counted)
                            rank 1: 1 3 5 7 9 [0]       (the 6th is a copy of example 0, not counted)

Each batch carries `counted` (B,) and `SeqModel` drops the uncounted rows before the task sees the
batch (`counted_rows`), so losses, accuracy and F1 — torchmetrics states summed over ranks — count
each example once. With one process nothing is added.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.utils.data import Dataset, DistributedSampler


class EvalShards(DistributedSampler):
    """Rank r takes examples r, r + W, ...; a rank short of ceil(N / W) adds a marked copy of example 0.
    A `DistributedSampler`, so Lightning keeps it instead of injecting its own."""

    def __init__(self, dataset: Sequence, rank: int = 0, world: int = 1) -> None:
        super().__init__(dataset, num_replicas=world, rank=rank, shuffle=False, drop_last=False)

    def __iter__(self):
        own = [(i, True) for i in range(self.rank, len(self.dataset), self.num_replicas)]
        return iter(own + [(0, False)] * (self.num_samples - len(own)))


class Marked(Dataset):
    """A list of examples indexed by `(index, counted)`, as `EvalShards` yields them."""

    def __init__(self, examples: Sequence) -> None:
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, key: tuple[int, bool]):
        index, counted = key
        return self.examples[index], counted


def marked_collate(collate: Callable[[list], dict]) -> Callable[[list], dict]:
    """`collate` over the examples, plus `counted` (B,) bool."""

    def fn(items: list) -> dict:
        batch = collate([example for example, _ in items])
        batch["counted"] = torch.tensor([counted for _, counted in items], dtype=torch.bool)
        return batch

    return fn


def counted_rows(batch):
    """The batch without the rows `EvalShards` added as filler; None when nothing is left. Tensors and
    lists with one entry per row are filtered; anything else (a window number) is kept."""
    if not isinstance(batch, dict) or "counted" not in batch:
        return batch
    keep = batch["counted"]
    if bool(keep.all()):
        return {k: v for k, v in batch.items() if k != "counted"}
    if not bool(keep.any()):
        return None
    rows, index = keep.numel(), keep.nonzero().flatten().tolist()
    out = {}
    for key, value in batch.items():
        if key == "counted":
            continue
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.size(0) == rows:
            value = value[keep]
        elif isinstance(value, list) and len(value) == rows:
            value = [value[i] for i in index]
        out[key] = value
    return out
