"""Truncated-BPTT batching: contiguous across batches, shifted targets, every token once, DDP shards."""

from __future__ import annotations

import pytest
import torch

from seqbench.data.streams import IGNORE_INDEX, StreamWindows, stream_columns


def _rows_over_time(dataset):
    """Concatenate each row's inputs/targets over all windows, dropping padding."""
    batches = list(dataset)
    inputs = torch.cat([b["input"] for b in batches], dim=1)
    targets = torch.cat([b["target"] for b in batches], dim=1)
    return inputs, targets, batches


@pytest.mark.parametrize("n_tokens,batch,bptt", [(26, 4, 3), (1000, 7, 35), (100, 10, 10), (37, 1, 5)])
def test_every_target_token_is_scored_exactly_once(n_tokens, batch, bptt):
    stream = torch.arange(n_tokens)
    inputs, targets, _ = _rows_over_time(StreamWindows(stream, batch, bptt))
    scored = targets[targets != IGNORE_INDEX]
    assert scored.numel() == n_tokens - 1  # N+1 tokens give N (input, target) pairs
    assert sorted(scored.tolist()) == list(range(1, n_tokens))  # each target once, none dropped


def test_rows_are_contiguous_across_windows_and_targets_shift_by_one():
    stream = torch.arange(1000) * 3  # distinct values, so positions can be read back
    inputs, targets, batches = _rows_over_time(StreamWindows(stream, 7, 35))
    for row_in, row_tg in zip(inputs, targets):
        valid = row_tg != IGNORE_INDEX
        pos = row_in[valid] // 3
        assert torch.equal(pos, torch.arange(pos[0], pos[0] + pos.numel()))  # one contiguous piece
        assert torch.equal(row_tg[valid], row_in[valid] + 3)  # the next token of the stream
    assert [b["window"] for b in batches] == list(range(len(batches)))


def test_column_lengths_differ_by_at_most_one_and_cover_the_stream_in_order():
    inputs, targets = stream_columns(torch.arange(26), 4)  # the alphabet of the module docstring
    lengths = (targets != IGNORE_INDEX).sum(1).tolist()
    assert lengths == [7, 6, 6, 6]
    assert inputs[1, 0] == 7 and inputs[3, 5] == 24 and targets[3, 5] == 25


def test_ddp_shards_are_contiguous_row_slices_of_the_single_process_layout():
    stream = torch.arange(999)
    whole = list(StreamWindows(stream, 8, 10))
    shards = [list(StreamWindows(stream, 8, 10, rank=r, world_size=2)) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == len(whole)  # same number of batches on every rank
    for w, batch in enumerate(whole):
        merged = torch.cat([shards[0][w]["target"], shards[1][w]["target"]])
        assert torch.equal(merged, batch["target"])
    rank0_tokens = torch.cat([b["input"] for b in shards[0]], 1)
    rank0_tokens = rank0_tokens[torch.cat([b["target"] for b in shards[0]], 1) != IGNORE_INDEX]
    assert torch.equal(rank0_tokens.sort().values, torch.arange(rank0_tokens.numel()))  # a contiguous shard


def test_batch_size_must_divide_across_processes():
    with pytest.raises(ValueError, match="divisible"):
        StreamWindows(torch.arange(100), 5, 4, rank=0, world_size=2)


def test_resume_offset_applies_to_one_pass():
    ds = StreamWindows(torch.arange(200), 4, 5)
    ds.start = 3
    assert [b["window"] for b in ds][:2] == [3, 4]
    assert [b["window"] for b in ds][:2] == [0, 1]  # the next epoch starts at the beginning


@pytest.mark.parametrize("n_tokens,batch,bptt,world", [(26, 4, 3, 1), (1000, 7, 35, 1), (999, 8, 10, 2), (37, 1, 5, 1),
                                                      (130, 6, 7, 3)])
@pytest.mark.parametrize("dtype", [torch.long, torch.uint8])
def test_windows_gathered_from_the_stream_are_the_columns_of_the_layout(n_tokens, batch, bptt, world, dtype):
    # StreamWindows reads each window from the stream (no laid-out copy: 1.4 GB for enwik8) and must serve
    # exactly `stream_columns`' cells, padding included, for every rank and for byte streams too.
    # Bugs caught: a column's last real cell read as padding or a padding cell as real, targets not shifted
    stream = (torch.arange(n_tokens) * 7 % 251).to(dtype)
    inputs, targets = stream_columns(stream.long(), batch)
    for rank in range(world):
        rows = slice(rank * batch // world, (rank + 1) * batch // world)
        for w, got in enumerate(StreamWindows(stream, batch, bptt, rank, world)):
            cols = slice(w * bptt, (w + 1) * bptt)
            assert got["input"].dtype == got["target"].dtype == torch.long
            assert torch.equal(got["input"], inputs[rows, cols]) and torch.equal(got["target"], targets[rows, cols])
