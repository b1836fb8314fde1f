"""Truncated-BPTT batching of a token stream, exact to the last token.

The stream of N+1 tokens gives N (input, target) pairs. It is cut into `batch_size` contiguous
columns whose lengths differ by at most one (so no token is dropped, unlike the classic
`batchify`), and batches are consecutive `bptt`-long windows across all columns. With the alphabet
(N = 25 pairs), batch_size 4 and bptt 3:

    column 0: a b c d e f g        window 0 = columns[:, 0:3]   (a b c / h i j / n o p / t u v)
    column 1: h i j k l m          window 1 = columns[:, 3:6]   (d e f / k l m / q r s / w x y)
    column 2: n o p q r s          window 2 = columns[:, 6:7]   (g / - / - / -)
    column 3: t u v w x y
                                   targets are the same cells shifted one token along the stream
                                   (b c d / i j k / ...), so the target of y is z.

Row i of window w+1 continues exactly where row i of window w stopped, so a recurrent model can
carry its hidden state across batches (detached). A column boundary cuts the dependency between
its two sides; that is the price of batching. Cells past a column's end ("-") hold a padding input
and the target `IGNORE_INDEX`, so every target token is scored exactly once, and the loss counts
only real tokens.

Variable-length BPTT (Merity et al. 2018, §4.1; training only, `variable=True`): instead of fixed
`bptt` windows, each window's length is drawn — bptt with probability 0.95, else bptt/2, plus
N(0, 5) noise, at least 5 — so the cut points move from epoch to epoch and every token is, over
epochs, trained with every amount of truncated context. The windows still tile the columns
end to end (each token is a target once per epoch, the state is carried exactly as above), and each
carries `lr_scale` = its drawn length / bptt for the model's optimizer step. The lengths are drawn
from a generator seeded by (seed, epoch), so a resumed run finds window w where it was.
Evaluation never varies: valid and test use the fixed windows.

Under DDP rank r takes columns [r*B/W, (r+1)*B/W): one contiguous shard of the stream. Because
columns never interact, W processes see exactly the batches one process would, split by rows.

`StreamWindows` gathers each window from the stream when it is served instead of laying the columns
out in advance (`stream_columns`, the picture above, is the reference it is tested against): the
layout costs two more copies of the stream in int64, 1.4 GB for enwik8's 90M training bytes, and its
cells are the same. A stream of a narrower dtype (bytes) is served as int64 windows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import IterableDataset

IGNORE_INDEX = -100


def stream_columns(stream: torch.Tensor, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Lay out a 1-D stream as (inputs, targets), each (batch_size, L), padded as in the picture."""
    n_pairs = stream.numel() - 1
    if n_pairs < batch_size:
        raise ValueError(f"a stream of {stream.numel()} tokens is too short for {batch_size} columns")
    base, extra = divmod(n_pairs, batch_size)
    width = base + (1 if extra else 0)
    inputs = torch.zeros(batch_size, width, dtype=torch.long)
    targets = torch.full((batch_size, width), IGNORE_INDEX, dtype=torch.long)
    start = 0
    for col in range(batch_size):
        length = base + (1 if col < extra else 0)
        inputs[col, :length] = stream[start : start + length]
        targets[col, :length] = stream[start + 1 : start + length + 1]
        start += length
    return inputs, targets


class StreamWindows(IterableDataset):
    """Consecutive (rows, bptt) windows of one rank's columns, as dicts {input, target, window}.

    `window` is the index of the window in the stream; a model resets its state when it sees 0.
    `start` lets a resumed run continue mid-epoch at the window after the last one it trained on.
    """

    def __init__(self, stream: torch.Tensor, batch_size: int, bptt: int, rank: int = 0, world_size: int = 1,
                 variable: bool = False, seed: int = 0, epoch: Callable[[], int] = lambda: 0):
        super().__init__()
        if batch_size % world_size:
            raise ValueError(f"batch_size {batch_size} is not divisible by the {world_size} DDP processes")
        n_pairs = stream.numel() - 1
        if n_pairs < batch_size:
            raise ValueError(f"a stream of {stream.numel()} tokens is too short for {batch_size} columns")
        # the layout of `stream_columns`: column c holds pairs [starts[c], starts[c] + lengths[c])
        base, extra = divmod(n_pairs, batch_size)
        lengths = base + (torch.arange(batch_size) < extra).long()  # (B,)
        starts = torch.cumsum(lengths, 0) - lengths  # (B,)
        rows = slice(rank * batch_size // world_size, (rank + 1) * batch_size // world_size)
        self.stream, self.starts, self.lengths = stream, starts[rows, None], lengths[rows, None]  # (rows, 1)
        self.bptt = bptt
        # the window count comes from the global layout so every rank yields the same number of
        # batches (DDP would hang otherwise); a rank's last window may hold only padding
        self.width = base + (1 if extra else 0)
        self.variable, self.seed, self.epoch = variable, seed, epoch
        self._bounds: tuple[int, list] | None = None  # (epoch, windows) of the last variable layout
        self.start = 0

    def cells(self, first: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets), each (rows, end - first): columns [first, end) of `stream_columns`' layout."""
        offset = torch.arange(first, end)[None, :]  # (1, T)
        real = offset < self.lengths  # (rows, T); False past a column's end
        at = (self.starts + offset).clamp_max(self.stream.numel() - 2)  # (rows, T); clamped cells are padding
        inputs = torch.where(real, self.stream[at].long(), 0)
        targets = torch.where(real, self.stream[at + 1].long(), IGNORE_INDEX)
        return inputs, targets

    def windows(self) -> list[tuple[int, int, float]]:
        """(first column, end column, lr_scale) of each window of this epoch."""
        if not self.variable:
            return [(s, min(s + self.bptt, self.width), 1.0) for s in range(0, self.width, self.bptt)]
        epoch = self.epoch()
        if self._bounds is None or self._bounds[0] != epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            bounds, s = [], 0
            while s < self.width:
                base = self.bptt if torch.rand(1, generator=g).item() < 0.95 else self.bptt / 2
                length = max(5, int(torch.empty(1).normal_(base, 5, generator=g).item()))
                bounds.append((s, min(s + length, self.width), length / self.bptt))
                s += length
            self._bounds = (epoch, bounds)
        return self._bounds[1]

    def __len__(self) -> int:
        return len(self.windows())

    def __iter__(self):
        start, self.start = self.start, 0  # a resume offset applies to one pass only
        windows = self.windows()
        for w in range(start, len(windows)):
            first, end, scale = windows[w]
            inputs, targets = self.cells(first, end)
            batch = {"input": inputs, "target": targets, "window": w}
            if self.variable:
                batch["lr_scale"] = scale
            yield batch
