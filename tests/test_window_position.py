"""Loss by position inside a window (seqbench.analysis.window_position): the numbers, the windows, the state.

Tiny untrained models on a small character corpus (test_context_usage's): the properties hold for any
weights.
"""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from conftest import TINY
from seqbench.analysis import context_usage as cu
from seqbench.analysis import window_position as wp
from seqbench.families import FAMILIES
from seqbench.reports.ledger import RECORD
from seqbench.training.run import build
from test_context_usage import TINY_GPT, _save_run, corpus  # noqa: F401  (corpus: a fixture)

LM_FAMILIES = [name for name, family in FAMILIES.items() if family.compared]
STATEFUL = [name for name in LM_FAMILIES if FAMILIES[name].cls.lm_batching == "stream"]
CONTEXT = 8


def tiny(family: str, corpus: list[str], cfg_factory):
    """The family at its registry's tiny size, an attention model with an 8-token window."""
    torch.manual_seed(0)
    window = ["model.context=8"] if FAMILIES[family].cls.lm_batching == "windows" else []
    cfg = cfg_factory([*TINY, f"model={family}", *FAMILIES[family].tiny, *window, *corpus], tiny=False)
    dm, model = build(cfg)
    return dm, model.eval(), cfg


@pytest.mark.parametrize("family", LM_FAMILIES)
def test_the_loss_at_each_position_is_the_loss_of_reading_that_prefix_alone(family, corpus, cfg_factory):
    """Against a plain loop: position i of window n is the target stream[start + i + 1] predicted by
    `next_token_logits` (the model's own one-target read, from a zero state) from the i + 1 tokens
    stream[start : start + i + 1]."""
    dm, model, _ = tiny(family, corpus, cfg_factory)
    stream = dm.streams["test"]
    ends = cu.sample_targets(stream.numel(), 6, need=CONTEXT, seed=0)
    inputs, targets = wp.window_rows(stream, ends, CONTEXT)
    measured = wp.position_losses(model, inputs, targets, batch_tokens=2 * CONTEXT)  # three batches
    by_hand = torch.zeros(len(ends), CONTEXT)
    for n, end in enumerate(ends.tolist()):
        start = end - CONTEXT
        for i in range(CONTEXT):
            logits = model.next_token_logits(stream[None, start : start + i + 1])
            by_hand[n, i] = F.cross_entropy(logits, stream[start + i + 1 : start + i + 2])
    assert torch.allclose(measured, by_hand, atol=1e-5), (measured - by_hand).abs().max()


class Recorder(torch.nn.Module):
    """A stand-in LM that records every window it reads and predicts uniformly."""

    def __init__(self, vocab: int, context: int | None) -> None:
        super().__init__()
        self.lm_batching = "stream" if context is None else "windows"
        self.context, self.vocab, self.device, self.reads = context, vocab, torch.device("cpu"), []

    def window_logits(self, x: torch.Tensor) -> torch.Tensor:
        self.reads.append(x.clone())
        return torch.zeros(*x.shape, self.vocab)


def test_every_model_of_a_corpus_reads_the_same_seeded_windows():
    """Two attention models of different contexts and a recurrent one: each reads the first
    `context` (the recurrent model: all) tokens of the same windows, ending at the seeded targets of
    context_usage's sampler for the longest context."""
    stream = torch.randint(0, 9, (400,), generator=torch.Generator().manual_seed(0))
    data = SimpleNamespace(streams={"test": stream}, eval_stride=None)
    models = {"short": Recorder(9, 4), "long": Recorder(9, 12), "recurrent": Recorder(9, None)}
    group = [cu.LM(name, name, "toy", model, data) for name, model in models.items()]
    curves = wp.measure_corpus(group, "test", 30, seed=5, length=None, batch_tokens=48)
    reads = {name: torch.cat(model.reads) for name, model in models.items()}
    expected = cu.windows(stream, cu.sample_targets(400, 30, need=12, seed=5), 12)
    assert torch.equal(reads["long"], expected) and torch.equal(reads["recurrent"], expected)
    assert torch.equal(reads["short"], expected[:, :4])
    assert [c.length for c in curves] == [4, 12, 12]
    again = Recorder(9, 4)
    wp.measure_corpus([cu.LM("a", "a", "toy", again, data)], "test", 30, seed=6, length=12)
    assert not torch.equal(torch.cat(again.reads), expected[:, :4])  # the seed chooses the windows


@pytest.mark.parametrize("family", STATEFUL)
def test_a_recurrent_model_reads_every_window_from_a_zero_state(family, corpus, cfg_factory):
    """A state left on the module by training, and the windows read before in the same pass, change
    nothing: each window's losses are those of the window read alone from zeros."""
    dm, model, _ = tiny(family, corpus, cfg_factory)
    stream = dm.streams["test"]
    for window in (0, 1):  # a training state on the module, as a run leaves it
        model.lm_logits({"input": dm.streams["train"][None, 100 * window : 100 * window + 50], "window": window},
                        "train")
    ends = cu.sample_targets(stream.numel(), 5, need=CONTEXT, seed=1)
    inputs, targets = wp.window_rows(stream, ends, CONTEXT)
    together = wp.position_losses(model, inputs, targets, batch_tokens=CONTEXT)  # one window per forward pass
    for n in range(len(ends)):
        logits, _ = model.net(inputs[n : n + 1], None)  # zeros, passed explicitly
        alone = F.cross_entropy(logits[0], targets[n], reduction="none")
        assert torch.allclose(together[n], alone, atol=1e-5), n


def test_the_scored_positions_are_compared_with_a_best_position_chosen_on_other_windows():
    # a curve falling to position 5 then rising: the last positions are the worst
    curve = torch.tensor([3.0, 2.0, 1.6, 1.5, 1.45, 1.40, 1.42, 1.50, 1.60, 1.70])
    noise = torch.randn(400, 10, generator=torch.Generator().manual_seed(0)) * 0.01
    losses = curve + noise
    result = wp.eval_against_best(losses, wp.scored_positions(context=10, stride=4))
    assert list(wp.scored_positions(10, 4)) == [6, 7, 8, 9]
    assert result["best_position"] == 5
    held = losses[1::2]
    assert result["scored_loss"] == pytest.approx(held[:, 6:].mean().item())
    assert result["gap"] == pytest.approx(curve[6:].mean().item() - 1.40, abs=0.005)
    assert 0 < result["gap_se"] < 0.002
    banded = wp.eval_against_best(losses, wp.scored_positions(10, 4), band=3)  # means of 3: lowest from 4 (1.423)
    assert (banded["best_position"], banded["band"]) == (4, 3)
    assert banded["best_loss"] == pytest.approx(held[:, 4:7].mean().item())
    assert banded["gap"] == pytest.approx(curve[6:].mean().item() - curve[4:7].mean().item(), abs=0.005)
    assert wp.settles_at(curve) == 2  # the last quarter (1.6, 1.7) averages 1.65: 1.6 is the first below 1.01 x that
    assert wp.settles_at(torch.tensor([5.0, 4.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0])) == 3


def test_the_command_writes_every_position_of_every_family_on_the_attention_window(corpus, cfg_factory, tmp_path):
    runs = []
    for family in (next(n for n in LM_FAMILIES if n in STATEFUL), next(n for n in LM_FAMILIES if n not in STATEFUL)):
        _, model, cfg = tiny(family, corpus, cfg_factory)
        _save_run(cfg, model, tmp_path / family)
        runs.append((family, tmp_path / family))
    out = tmp_path / "out"
    curves = wp.main([str(runs[0][1]), str(runs[1][1] / "checkpoints" / "last.ckpt"), "--out", str(out),
                      "--windows", "10"])
    rows = list(csv.DictReader(open(out / "window_position.csv")))
    for family, _ in runs:
        mine = [r for r in rows if r["family"] == family]
        assert [int(r["position"]) for r in mine] == list(range(CONTEXT))  # the recurrent one: the attention window
        assert {r["windows"] for r in mine} == {"10"}
    attention = runs[1][0]
    scored = [int(r["position"]) for r in rows if r["family"] == attention and r["scored"] == "1"]
    assert scored == [4, 5, 6, 7]  # the default stride, half the context
    assert [r["scored"] for r in rows if r["family"] == runs[0][0]] == ["0"] * CONTEXT
    assert curves[attention].summary["stride"] == 4
    table = (out / "window_position.md").read_text()
    assert f"| {attention} |" in table and "4–7" in table
    assert (out / "window_text.png").is_file()
    record = json.loads((out / RECORD).read_text())
    assert [r["files"] for r in record["records"]] == [["window_position.csv", "window_position.md"]]
