"""The output layer at the positions a task scores, not at every position (MQAR, issue 67).

A language model's head is a d x V matmul at every position. Where the data scores a few positions of each
row (MQAR scores the values at its queries: 4 to 64 of 64 to 512 positions, with V = 8,192), the head at the
other positions computes logits whose loss is ignored: most of a small model's step. Selecting the scored
states first gives the same loss and the same gradients (the ignored positions contribute nothing to
either), at a fraction of the cost; tests/test_mqar.py checks both against the full head, family by family.
"""

from __future__ import annotations

from torch import Tensor


def at_positions(states: Tensor, positions: Tensor | None) -> Tensor:
    """states (B, T, d) -> the same, or (N, d) at the N True entries of `positions` (B, T), row-major."""
    return states if positions is None else states[positions]
