"""Windows for attention LMs: training tiles and the sliding-window evaluation, scored by the task code."""

from __future__ import annotations

import math

import pytest
import torch

from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.windows import EvalWindows, TrainWindows, sliding_windows
from seqbench.nn.gpt import GPT, GPTConfig
from seqbench.tasks.lm import LanguageModelling, token_nll


def _scored(dataset) -> torch.Tensor:
    """Every scored target of a pass, in order (targets are stream positions here)."""
    return torch.cat([b["target"][b["target"] != IGNORE_INDEX] for b in dataset])


@pytest.mark.parametrize("n_tokens,context,stride,batch", [(26, 6, 2, 3), (1000, 64, 32, 5), (100, 10, 10, 4),
                                                           (50, 8, 1, 7), (9, 32, 16, 2)])
def test_sliding_window_scores_every_target_token_once(n_tokens, context, stride, batch):
    stream = torch.arange(n_tokens)
    scored = _scored(EvalWindows(stream, batch, context, stride))
    assert scored.numel() == n_tokens - 1  # N tokens give N-1 (input, target) pairs
    assert scored.tolist() == list(range(1, n_tokens))  # each once, in order


def test_every_scored_token_has_at_least_context_minus_stride_tokens_before_it():
    context, stride = 8, 3
    for batch in EvalWindows(torch.arange(200), 4, context, stride):
        for row_in, row_tg in zip(batch["input"], batch["target"]):
            cols = (row_tg != IGNORE_INDEX).nonzero().flatten()
            if row_in[0] == 0:  # the first window scores everything it holds
                continue
            assert cols.min() >= context - stride
            assert torch.equal(row_tg[cols], row_in[cols] + 1)  # targets are the next token


def test_sliding_windows_follow_the_docstring_picture():
    assert sliding_windows(13, 6, 2) == [(0, 6, 0), (2, 8, 6), (4, 10, 8), (6, 12, 10), (8, 13, 12)]
    with pytest.raises(ValueError, match="eval_stride"):
        sliding_windows(13, 6, 7)


def test_eval_shards_under_ddp_are_row_slices_with_equal_batch_counts():
    stream = torch.arange(301)
    whole = list(EvalWindows(stream, 4, 16, 8))
    shards = [list(EvalWindows(stream, 4, 16, 8, rank=r, world_size=2)) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == len(whole)
    for w, batch in enumerate(whole):
        torch.testing.assert_close(torch.cat([shards[0][w]["target"], shards[1][w]["target"]]), batch["target"])


class _Net:
    """Stands in for a family: `lm_logits` runs a net, as GPTModel does."""

    def __init__(self, net):
        self.net = net

    def lm_logits(self, batch, stage):
        return self.net(batch["input"])

    def log(self, *args, **kwargs):
        pass


def _task_nll(net, dataset) -> float:
    task = LanguageModelling()
    for batch in dataset:
        task.step(_Net(net), batch, "val")
    return task.nll("val").compute().item()


@torch.no_grad()
def test_window_covering_the_split_equals_full_context_evaluation():
    torch.manual_seed(0)
    stream = torch.randint(13, (40,))
    net = GPT(GPTConfig(vocab_size=13, context=64, n_layer=2, n_head=2, d_model=16)).eval()
    nll, n = token_nll(net(stream[None, :-1]), stream[None, 1:])  # one forward over the whole split
    for stride in (64, 7):  # one window either way
        assert math.isclose(_task_nll(net, EvalWindows(stream, 3, 64, stride)), (nll / n).item(), rel_tol=1e-6)


@torch.no_grad()
def test_stride_one_gives_every_token_the_full_window_of_context():
    torch.manual_seed(1)
    context, stream = 8, torch.randint(13, (30,))
    net = GPT(GPTConfig(vocab_size=13, context=context, n_layer=2, n_head=2, d_model=16)).eval()
    expected = sum(
        token_nll(net(stream[None, max(0, i - context + 1) : i + 1])[:, -1:], stream[None, i + 1 : i + 2])[0]
        for i in range(stream.numel() - 1)
    ) / (stream.numel() - 1)
    assert math.isclose(_task_nll(net, EvalWindows(stream, 4, context, 1)), expected.item(), rel_tol=1e-5)
    coarse = _task_nll(net, EvalWindows(stream, 4, context, context))
    assert not math.isclose(coarse, expected.item(), rel_tol=1e-4)  # less context: another number


def _epoch_tiles(dataset: TrainWindows) -> list[int]:
    return [row[0].item() for batch in dataset for row in batch["input"]]


def test_training_tiles_cover_the_stream_once_per_epoch_at_a_new_phase():
    stream, context = torch.arange(1001), 10
    ds = TrainWindows(stream, 4, context, seed=3)
    epochs = [list(ds) for _ in range(3)]
    assert len(ds) == len(epochs[0]) == (1000 // context - 1) // 4
    starts = [torch.cat([b["input"][:, 0] for b in batches]) for batches in epochs]
    for s, batches in zip(starts, epochs):
        assert len(set((s % context).tolist())) == 1  # one phase per epoch
        assert s.unique().numel() == s.numel()  # no tile twice
        for b in batches:
            assert torch.equal(b["target"], b["input"] + 1)  # contiguous windows, targets shifted
            assert torch.equal(b["input"][:, -1] - b["input"][:, 0], torch.full((4,), context - 1))
    assert not torch.equal(starts[0], starts[1])  # a new order every epoch ...
    assert len({ds.order(epoch)[0] for epoch in range(8)}) > 1  # ... and a new phase


def test_training_order_is_a_function_of_seed_and_epoch_and_resumes_exactly():
    stream = torch.arange(2000)
    ds = TrainWindows(stream, 6, 16, seed=7, epoch=lambda: 4)
    full = list(ds)
    again = TrainWindows(stream, 6, 16, seed=7, epoch=lambda: 4)
    again.start = 5  # a run resumed after batch 4 of epoch 4
    resumed = list(again)
    assert [b["window"] for b in resumed] == list(range(5, len(full)))
    for a, b in zip(resumed, full[5:]):
        assert torch.equal(a["input"], b["input"])
    assert len(list(again)) == len(full)  # the offset applied to one pass only
    other_seed = list(TrainWindows(stream, 6, 16, seed=8, epoch=lambda: 4))
    assert not torch.equal(other_seed[0]["input"], full[0]["input"])


def test_training_shards_under_ddp_split_each_global_batch_by_rows():
    stream = torch.arange(5000)
    whole = list(TrainWindows(stream, 8, 32, seed=1))
    shards = [list(TrainWindows(stream, 8, 32, seed=1, rank=r, world_size=2)) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == len(whole)
    for w, batch in enumerate(whole):
        assert torch.equal(torch.cat([shards[0][w]["input"], shards[1][w]["input"]]), batch["input"])
    with pytest.raises(ValueError, match="divisible"):
        TrainWindows(stream, 5, 32, rank=0, world_size=2)
