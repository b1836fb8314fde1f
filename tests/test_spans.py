"""Entity chunks and F1 as conlleval computes them: on hand-made sentences whose conlleval output is
known (worked by conlleval's startOfChunk/endOfChunk rules, checked by hand), and against seqeval
(default and strict modes) on thousands of random tag sequences, ill-formed ones included."""

from __future__ import annotations

import pytest
import torch
from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2, IOBES, Entities

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


# -- against seqeval, on random tag sequences ------------------------------------------------------
TYPES = ("PER", "LOC", "ORG")
PREFIXES = {"iob2": "OBI", "bioes": "OBIES"}


def _random_corpus(scheme: str, n: int = 2000, seed: int = 0) -> tuple[list[list[str]], list[list[str]]]:
    """(gold, predicted) tag sequences: half the gold sentences well-formed, half raw random draws
    (I- after O, E- without B-, type switches inside a chunk); each prediction is its gold sentence
    with a few tags redrawn, so many chunks are right and the errors are realistic."""
    import random

    rng = random.Random(seed)

    def draw() -> str:
        p = rng.choice(PREFIXES[scheme])
        return "O" if p == "O" else f"{p}-{rng.choice(TYPES)}"

    gold, pred = [], []
    for i in range(n):
        tags = [draw() for _ in range(rng.randint(1, 15))]
        tags = convert(tags, scheme) if i % 2 else tags
        guess = list(tags)
        for _ in range(rng.randint(0, 3)):
            guess[rng.randrange(len(guess))] = draw()
        gold.append(tags)
        pred.append(guess)
    return gold, pred


def _ours(gold, pred) -> tuple[float, float, float]:
    counts = [span_counts(g, p) for g, p in zip(gold, pred)]
    return prf(*(sum(c[i] for c in counts) for i in range(3)))


def _seqeval(gold, pred, **mode) -> tuple[float, float, float]:
    return tuple(f(gold, pred, **mode) for f in (precision_score, recall_score, f1_score))


def _strict_entities(tags, scheme: str) -> set[tuple[str, int, int]]:
    found = Entities([tags], {"iob2": IOB2, "bioes": IOBES}[scheme]).entities[0]
    return {(e.tag, e.start, e.end - 1) for e in found}


def _ill_formed(tags, scheme: str) -> bool:
    return convert(tags, scheme) != list(tags)


@pytest.mark.parametrize("scheme", ["iob2", "bioes"])
def test_span_f1_equals_seqeval_default_mode_on_random_sequences(scheme):
    """seqeval's default mode ports conlleval's chunk rules: the two agree on every sequence,
    ill-formed ones included, chunk for chunk and in micro precision, recall and F1."""
    gold, pred = _random_corpus(scheme)
    sentences = gold + pred
    assert sum(_ill_formed(t, scheme) for t in sentences) > 1000  # the malformed cases are really there
    assert any(a == "O" and b.startswith("I-") for t in sentences for a, b in zip(t, t[1:]))
    if scheme == "bioes":
        assert any(a == "O" and b.startswith("E-") for t in sentences for a, b in zip(t, t[1:]))
    for tags in sentences:
        assert chunks(tags) == set(get_entities(tags)), tags
    ours = _ours(gold, pred)
    assert 0.2 < ours[2] < 0.9  # neither trivial nor perfect
    assert ours == pytest.approx(_seqeval(gold, pred), abs=1e-12)


@pytest.mark.parametrize("scheme", ["iob2", "bioes"])
def test_span_f1_against_seqeval_strict_mode_on_random_sequences(scheme):
    """Strict mode (mode='strict', scheme IOB2 / IOBES) agrees wherever the tags are well-formed;
    on ill-formed tags it drops the chunks that are not spelled the scheme's way, where conlleval
    (and this scorer) reads them as chunks: the documented difference, checked on every sentence."""
    strict = {"mode": "strict", "scheme": {"iob2": IOB2, "bioes": IOBES}[scheme]}
    gold, pred = _random_corpus(scheme, seed=1)
    well = [i for i in range(len(gold)) if not _ill_formed(gold[i], scheme) and not _ill_formed(pred[i], scheme)]
    assert len(well) > 300
    # 1. well-formed sentences: the same numbers
    sub_gold, sub_pred = [gold[i] for i in well], [pred[i] for i in well]
    assert _ours(sub_gold, sub_pred) == pytest.approx(_seqeval(sub_gold, sub_pred, **strict), abs=1e-12)
    # 2. every sentence: strict mode keeps exactly our chunks whose tags are spelled the scheme's way
    dropped = 0
    for tags in gold + pred:
        spelled = convert(tags, scheme)
        kept = {c for c in chunks(tags) if tags[c[1]:c[2] + 1] == spelled[c[1]:c[2] + 1]}
        assert _strict_entities(tags, scheme) == kept, tags
        dropped += len(chunks(tags)) - len(kept)
    assert dropped > 500
    # 3. so strict mode scores our numbers once the tags are re-spelled (convert keeps the chunks)
    fixed_gold, fixed_pred = [convert(t, scheme) for t in gold], [convert(t, scheme) for t in pred]
    assert _ours(gold, pred) == pytest.approx(_seqeval(fixed_gold, fixed_pred, **strict), abs=1e-12)
    assert _ours(gold, pred) != pytest.approx(_seqeval(gold, pred, **strict), abs=1e-3)


@pytest.mark.parametrize("tags,scheme,ours,strict", [
    ("O I-PER I-PER", "iob2", {("PER", 1, 2)}, set()),                   # I- after O opens a chunk
    ("B-PER I-LOC O", "iob2", {("PER", 0, 0), ("LOC", 1, 1)}, {("PER", 0, 0)}),  # a type switch inside
    ("O E-ORG", "bioes", {("ORG", 1, 1)}, set()),                          # E- without B-
    ("B-ORG I-ORG O", "bioes", {("ORG", 0, 1)}, set()),                    # B- never closed by E-
    ("B-ORG E-ORG S-PER", "bioes", {("ORG", 0, 1), ("PER", 2, 2)}, {("ORG", 0, 1), ("PER", 2, 2)}),
])
def test_the_documented_difference_from_strict_mode(tags, scheme, ours, strict):
    assert chunks(tags.split()) == ours
    assert _strict_entities(tags.split(), scheme) == strict
