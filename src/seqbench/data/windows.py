"""Fixed-context windows of a token stream for attention language models.

Training: an epoch is every `context`-long tile of the stream, starting at a random phase, in a
random order. With context 4, phase 2 and the alphabet:

    stream   a b | c d e f | g h i j | k l m n | o p q r | ...      tiles start at 2, 6, 10, 14, ...
    tile 0 = c d e f -> targets d e f g;  tile 1 = g h i j -> h i j k;  ...  served in a shuffled order

Each epoch draws a new phase and order from (seed, epoch), so a token sits at a different position
of its window in every epoch (what nanoGPT's random offsets give), yet every token is trained on
at most once per epoch, as for the recurrent models (the phase's prefix, the tail and the last
partial batch are left out: 0.2 % of PTB); "epochs" and "tokens seen" then mean the same for all
families. The order is a pure function of (seed, epoch), so a resumed run continues mid-epoch with
exactly the batches it would have seen, and no sampler is needed under DDP: rank r takes rows
[r*B/W, (r+1)*B/W) of every global batch, the layout `streams.py` uses.

Evaluation: a sliding window of `context` tokens moved by `stride` (Dai et al. 2019; the Hugging
Face perplexity guide). The first window scores all its targets; each later one scores only the
targets no earlier window scored, so every target token of the split is scored exactly once, with
at least `context - stride` tokens of left context (the first window excepted). Context 6, stride 2:

    pair      0  1  2  3  4  5  6  7  8  9 10 11 12
    window 0  s  s  s  s  s  s                           scores 0-5
    window 1        .  .  .  .  s  s                     scores 6-7, each with 4+ tokens before it
    window 2              .  .  .  .  s  s               scores 8-9
    window 3                    .  .  .  .  s  s         scores 10-11
    window 4                          .  .  .  .  s  -   scores 12; "-" is right padding

    (s: scored target, .: context only, its target = IGNORE_INDEX)

Right padding is harmless for causal models: no position attends to anything after it. With
stride = context the windows tile the split (each token gets 0 .. context-1 tokens of context, the
"average over positions" nanoGPT's val loss reports); smaller strides give every token more context
at the price of context/stride forward passes per token. A window that covers the whole split
(context >= tokens) is one forward pass, exactly the full-context evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch.utils.data import IterableDataset

from seqbench.data.streams import IGNORE_INDEX


def _check_shards(batch_size: int, world_size: int) -> None:
    if batch_size % world_size:
        raise ValueError(f"batch_size {batch_size} is not divisible by the {world_size} DDP processes")


class TrainWindows(IterableDataset):
    """Shuffled tiles of one rank's rows, as batches {input, target, window}; `window` = batch index.

    `epoch` is a callable (the trainer's current epoch) or None to count passes; `start` resumes an
    epoch at a given batch, for one pass.
    """

    def __init__(self, stream: torch.Tensor, batch_size: int, context: int, seed: int = 0, rank: int = 0,
                 world_size: int = 1, epoch: Callable[[], int] | None = None) -> None:
        super().__init__()
        _check_shards(batch_size, world_size)
        n_pairs = stream.numel() - 1
        # tiles that fit whatever the phase (0 .. context-1), so every epoch has the same length
        self.num_tiles = n_pairs // context - 1
        if self.num_tiles < batch_size:
            raise ValueError(f"a stream of {stream.numel()} tokens holds {max(self.num_tiles, 0)} windows of "
                             f"{context} tokens, fewer than batch_size={batch_size}")
        self.stream, self.batch_size, self.context, self.seed = stream, batch_size, context, seed
        self.rows = slice(rank * batch_size // world_size, (rank + 1) * batch_size // world_size)
        self.num_batches = self.num_tiles // batch_size  # the last partial batch is dropped
        self.epoch_fn, self._passes = epoch, 0
        self.start = 0

    def __len__(self) -> int:
        return self.num_batches

    def order(self, epoch: int) -> tuple[int, torch.Tensor]:
        """(phase, tile order) of an epoch: the same on every rank and on every resume."""
        rng = np.random.default_rng([self.seed, epoch])
        return int(rng.integers(self.context)), torch.from_numpy(rng.permutation(self.num_tiles))

    def __iter__(self):
        epoch = self.epoch_fn() if self.epoch_fn is not None else self._passes
        self._passes += 1
        start, self.start = self.start, 0  # a resume offset applies to one pass only
        phase, perm = self.order(epoch)
        span = torch.arange(self.context + 1)  # a window's inputs and, shifted by one, its targets
        for b in range(start, self.num_batches):
            tiles = perm[b * self.batch_size : (b + 1) * self.batch_size][self.rows]  # (rows,)
            chunk = self.stream[(phase + tiles * self.context)[:, None] + span].long()  # (rows, context + 1); bytes widened
            yield {"input": chunk[:, :-1], "target": chunk[:, 1:], "window": b}


def sliding_windows(n_pairs: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first scored) of each window over `n_pairs` (input, target) pairs, as drawn above."""
    if not 1 <= stride <= context:
        raise ValueError(f"eval_stride must be between 1 and the context ({context}), got {stride}")
    windows, scored_to, begin = [], 0, 0
    while scored_to < n_pairs:
        end = min(begin + context, n_pairs)
        windows.append((begin, end, scored_to))
        scored_to, begin = end, begin + stride
    return windows


class EvalWindows(IterableDataset):
    """Sliding windows over a whole split, `batch_size` windows per global batch, right-padded.

    Every rank yields the same number of batches (DDP would hang otherwise); rows past the last
    window hold only ignored targets, so the token-weighted perplexity is exact for any world size.
    """

    def __init__(self, stream: torch.Tensor, batch_size: int, context: int, stride: int, rank: int = 0,
                 world_size: int = 1) -> None:
        super().__init__()
        _check_shards(batch_size, world_size)
        self.stream, self.batch_size, self.context = stream, batch_size, context
        self.windows = sliding_windows(stream.numel() - 1, context, stride)
        self.rows = range(rank * batch_size // world_size, (rank + 1) * batch_size // world_size)

    def __len__(self) -> int:
        return math.ceil(len(self.windows) / self.batch_size)

    def __iter__(self):
        for b in range(len(self)):
            inputs = torch.zeros(len(self.rows), self.context, dtype=torch.long)
            targets = torch.full((len(self.rows), self.context), IGNORE_INDEX, dtype=torch.long)
            for row, w in enumerate(self.rows):
                if b * self.batch_size + w >= len(self.windows):
                    break  # padding rows: nothing to score
                begin, end, first = self.windows[b * self.batch_size + w]
                inputs[row, : end - begin] = self.stream[begin:end]
                targets[row, first - begin : end - begin] = self.stream[first + 1 : end + 1]
            yield {"input": inputs, "target": targets}
