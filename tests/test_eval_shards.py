"""Evaluation shards under DDP: every example counted once, every rank the same number of batches."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from seqbench.data.eval_shards import EvalShards, Marked, counted_rows, marked_collate


def test_eleven_examples_on_two_ranks_are_each_counted_once_in_equal_batches():
    examples = list(range(11))
    collate = marked_collate(lambda ex: {"input": torch.tensor(ex), "words": [str(e) for e in ex], "window": 0})
    seen, batches = [], []
    for rank in (0, 1):
        loader = DataLoader(Marked(examples), batch_size=3, sampler=EvalShards(examples, rank, 2), collate_fn=collate)
        kept = [counted_rows(b) for b in loader]
        batches.append(len(kept))
        for b in kept:
            if b is not None:
                assert b["words"] == [str(int(i)) for i in b["input"]] and b["window"] == 0
                seen += b["input"].tolist()
    assert batches == [2, 2]  # equal, so DDP's per-batch collectives pair up
    assert sorted(seen) == examples


def test_a_batch_of_filler_only_is_dropped():
    assert counted_rows({"input": torch.tensor([0]), "counted": torch.tensor([False])}) is None
