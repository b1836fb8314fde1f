"""Tiny Shakespeare's held-out score (`data.heldout_score=true`): the validation tenth cut in two
halves, selection on the first, the score on the second (seqbench.data.shakespeare.split)."""

from __future__ import annotations

import pytest

from conftest import DATA_DIR
from seqbench.data.shakespeare import ShakespeareCharDataModule, split

TEXT = "".join(chr(ord("a") + i % 26) for i in range(1001))  # odd length: the halves differ by one


def test_the_default_keeps_the_published_split():
    parts = split(TEXT)
    assert parts["valid"] == parts["test"] == TEXT[900:]


@pytest.mark.parametrize("length", [1000, 1001, 1117])
def test_the_halves_are_disjoint_contiguous_and_cover_the_tenth(length):
    text = TEXT * 2
    text = text[:length]
    parts = split(text, heldout_score=True)
    cut = int(length * 0.9)
    # contiguous and in order: train + valid + test is the text itself, each a slice of it
    assert parts["train"] + parts["valid"] + parts["test"] == text
    assert parts["valid"] == text[cut:cut + len(parts["valid"])]
    # two halves of the tenth (to one character), neither empty, none shared
    assert abs(len(parts["valid"]) - len(parts["test"])) <= 1 and parts["valid"] and parts["test"]
    assert len(parts["valid"]) + len(parts["test"]) == length - cut


@pytest.mark.corpus("tiny_shakespeare")
def test_selection_never_reads_the_score_half():
    """What validation (checkpoints, sweeps, the frontier's choice of size) reads is the first half
    only: the val loader's targets are the valid stream's, and that stream is the first half's text."""
    dm = ShakespeareCharDataModule(str(DATA_DIR), heldout_score=True, download=False, bptt=50, eval_batch_size=4)
    dm.setup()
    text = (DATA_DIR / "tiny_shakespeare" / "input.txt").read_text()
    cut = int(len(text) * 0.9)
    middle = cut + (len(text) - cut) // 2
    assert dm.tokenizer.decode(dm.streams["valid"].tolist()) == text[cut:middle]
    assert dm.tokenizer.decode(dm.streams["test"].tolist()) == text[middle:]
    batches = list(dm.val_dataloader())
    seen = "".join(dm.tokenizer.decode([i for i in b["target"][row].tolist() if i >= 0])  # targets (no padding)
                   for row in range(4) for b in batches)
    assert len(seen) <= middle - cut
    assert text[middle:middle + 200] not in seen and text[cut + 1:cut + 200] in seen
