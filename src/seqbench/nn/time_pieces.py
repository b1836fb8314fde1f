"""A recurrent layer's forward over a long CPU sequence, run in pieces of time (minGRU, minLSTM, Mamba-1, SSD).

Each piece starts from the state the one before ended in, so the outputs and the final state are those of
the whole sequence (the recurrence is sequential anyway). Why pieces on a CPU: glibc serves a buffer over
32 MiB by mmap and page-faults it afresh on every allocation; at B 16 and width 256 a whole T = 2,048 is
over that and a piece of 512 is under, and one layer's forward and backward ran 1.2-1.25x faster that way
(minGRU and minLSTM, one thread; pieces of 256 and 128 were slower). On a GPU the whole sequence goes at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import Tensor

State = TypeVar("State")


def in_time_pieces(forward: Callable[[Tensor, State], tuple[Tensor, State]], x: Tensor, state: State,
                   piece: int | None) -> tuple[Tensor, State]:
    """`forward(x, state) -> (y, state)` over x (B, T, ...) in pieces of `piece` steps on a CPU; at once
    where `piece` is None, the sequence is no longer than a piece, or x is on another device."""
    if piece is None or x.device.type != "cpu" or x.shape[1] <= piece:
        return forward(x, state)
    outs = []
    for start in range(0, x.shape[1], piece):
        out, state = forward(x[:, start:start + piece], state)
        outs.append(out)
    return torch.cat(outs, dim=1), state
