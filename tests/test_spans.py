"""Entity chunks and F1 as conlleval computes them, on hand-made sentences whose conlleval output is
known (worked by conlleval's startOfChunk/endOfChunk rules, checked by hand)."""

from __future__ import annotations

import pytest
import torch

from seqbench.metrics.spans import SpanF1, chunks, convert, prf, span_counts


@pytest.mark.parametrize("tags,expected", [
    ("B-PER I-PER O B-LOC O", {("PER", 0, 1), ("LOC", 3, 3)}),
    # IOB1: I- opens a chunk, B- separates two adjacent chunks of one type
    ("I-PER I-PER B-PER O I-LOC", {("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)}),
    # ill-formed: I- after O opens a chunk; a type switch inside I- closes one and opens another
    ("O I-LOC I-LOC B-ORG I-MISC", {("LOC", 1, 2), ("ORG", 3, 3), ("MISC", 4, 4)}),
    ("B-PER I-LOC", {("PER", 0, 0), ("LOC", 1, 1)}),
    # BIOES, and an I- after E- (conlleval: starts a new chunk)
    ("S-PER B-ORG E-ORG O B-LOC I-LOC E-LOC", {("PER", 0, 0), ("ORG", 1, 2), ("LOC", 4, 6)}),
    ("E-PER I-PER", {("PER", 0, 0), ("PER", 1, 1)}),
    ("I-ORG", {("ORG", 0, 0)}),  # the sentence end closes the chunk
    ("O O", set()),
])
def test_chunks_follow_conlleval(tags, expected):
    assert chunks(tags.split()) == expected


def test_scheme_conversion_keeps_the_chunks():
    iob1 = "I-PER I-PER B-PER O I-LOC I-MISC".split()
    assert convert(iob1, "iob2") == "B-PER I-PER B-PER O B-LOC B-MISC".split()
    assert convert(iob1, "bioes") == "B-PER E-PER S-PER O S-LOC S-MISC".split()
    assert convert(convert(iob1, "bioes"), "iob1") == iob1
    with pytest.raises(ValueError, match="tag scheme"):
        convert(iob1, "bilou")


def test_precision_recall_f1_of_known_cases():
    # conlleval: "found: 2 phrases; correct: 1" over 2 gold phrases -> 50.00 / 50.00 / 50.00
    assert span_counts("B-PER I-PER O B-LOC O".split(), "B-PER I-PER O B-ORG O".split()) == (1, 2, 2)
    assert prf(1, 2, 2) == (0.5, 0.5, 0.5)
    # a chunk one token too long is wrong: 0 correct of 1 found, 2 gold
    assert span_counts("I-PER I-PER B-PER".split(), "I-PER I-PER I-PER".split()) == (0, 1, 2)
    # nothing found: conlleval prints precision 0.00, F1 0.00
    assert prf(0, 0, 3) == (0.0, 0.0, 0.0)
    # 3 correct of 4 found, 5 gold: P 75, R 60, F 66.67
    p, r, f = prf(3, 4, 5)
    assert (p, r) == (0.75, 0.6) and f == pytest.approx(2 / 3)


def test_span_f1_metric_pools_counts_over_sentences_and_skips_ignored_positions():
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    gold = torch.tensor([[1, 2, 0, 3, -100], [3, -100, 4, 0, 0]])  # row 1: a subword hole at t=1
    pred = torch.tensor([[1, 2, 0, 1, 0], [3, 0, 4, 0, 1]])
    metric = SpanF1(names)
    metric.update(pred, gold)
    # row 0: gold {PER 0-1, LOC 3}, pred {PER 0-1, PER 3}; row 1 (words 0,2,3,4): gold {LOC 0-1},
    # pred {LOC 0-1, PER 3}; correct 2, found 4, gold 3
    assert (int(metric.correct), int(metric.predicted), int(metric.gold)) == (2, 4, 3)
    out = metric.compute()
    assert out["f1"].item() == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
