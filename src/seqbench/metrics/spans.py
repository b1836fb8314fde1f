"""Entity spans from IOB1/IOB2/BIOES tags, scored the way CoNLL's `conlleval` script scores them.

A chunk is (type, first, last). Precision = correct / predicted chunks, recall = correct / gold
chunks, F1 their harmonic mean, where a predicted chunk is correct only when a gold chunk has the
same type, start and end. Chunk boundaries follow conlleval's `startOfChunk` / `endOfChunk` rules
exactly, so IOB1 (`I-` opens a chunk, `B-` only between two adjacent entities), IOB2 and BIOES are
all read, and an ill-formed sequence (`O I-PER`) is read the way conlleval reads it: the `I-` opens
a chunk. A sentence end closes any open chunk (conlleval treats a blank line as `O`).

Against seqeval (`tests/test_spans.py`, 2,000 random IOB2 and BIOES sentence pairs each, half of
them ill-formed): the chunks and the micro precision, recall and F1 equal seqeval's default mode
on every sentence, which ports the same conlleval rules — no difference there. seqeval's strict
mode (`mode="strict"`, scheme IOB2 or IOBES) agrees on well-formed tags and differs, by design, on
ill-formed ones: it drops a chunk not spelled the scheme's way (`O I-PER`, `B-PER I-LOC`, BIOES
`O E-ORG` or a `B-` never closed by `E-`), where conlleval and this scorer read it as a chunk. We
keep conlleval's reading because CoNLL-2003's published F1s are conlleval's, and because it scores
an argmax tagger (whose output is often ill-formed) and a CRF tagger by the same rule. Given the
tags re-spelled by `convert` (which keeps every chunk), strict mode scores exactly our numbers.

Why not seqeval at run time: it needs scikit-learn for its report helpers, and the F1 must be a
torchmetrics state that DDP can sum; the chunk rules are thirty lines.

`SpanF1` is a torchmetrics `Metric` whose states are three counts summed across DDP ranks, so the
F1 of a split is exact under any number of processes (never a mean of per-batch F1s).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchmetrics import Metric

SCHEMES = ("iob1", "iob2", "bioes")


def _split(tag: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', '')."""
    if tag == "O" or "-" not in tag:
        return "O", ""
    prefix, kind = tag.split("-", 1)
    return prefix, kind


def _ends(prev: str, prev_kind: str, tag: str, kind: str) -> bool:
    """conlleval's endOfChunk: does a chunk end between the previous token and this one?"""
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev != "O" and prev_kind != kind


def _starts(prev: str, prev_kind: str, tag: str, kind: str) -> bool:
    """conlleval's startOfChunk: does a chunk start at this token?"""
    if tag in ("B", "S"):
        return True
    if prev in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag != "O" and prev_kind != kind


def chunks(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The chunks (type, first, last) of one sentence's tags, in any of the three schemes."""
    found: set[tuple[str, int, int]] = set()
    prev, prev_kind, start = "O", "", None
    for i, tag in enumerate(list(tags) + ["O"]):  # the sentence end closes an open chunk
        cur, kind = _split(tag)
        if start is not None and _ends(prev, prev_kind, cur, kind):
            found.add((prev_kind, start, i - 1))
            start = None
        if _starts(prev, prev_kind, cur, kind):
            start = i
        prev, prev_kind = cur, kind
    return found


def convert(tags: Sequence[str], scheme: str) -> list[str]:
    """Re-tag one sentence's chunks in `scheme` (iob1, iob2 or bioes); the chunks stay the same."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    out = ["O"] * len(tags)
    spans = sorted(chunks(tags), key=lambda c: c[1])
    for n, (kind, first, last) in enumerate(spans):
        for i in range(first, last + 1):
            out[i] = f"I-{kind}"
        if scheme == "iob2":
            out[first] = f"B-{kind}"
        elif scheme == "iob1":  # B- only where the previous token ends a chunk of the same type
            if n and spans[n - 1][2] == first - 1 and spans[n - 1][0] == kind:
                out[first] = f"B-{kind}"
        else:  # bioes
            if first == last:
                out[first] = f"S-{kind}"
            else:
                out[first], out[last] = f"B-{kind}", f"E-{kind}"
    return out


def span_counts(gold: Sequence[str], pred: Sequence[str]) -> tuple[int, int, int]:
    """(correct, predicted, gold) chunk counts of one sentence."""
    g, p = chunks(gold), chunks(pred)
    return len(g & p), len(p), len(g)


def prf(correct: float, predicted: float, gold: float) -> tuple[float, float, float]:
    """Precision, recall, F1 as fractions; 0 where conlleval prints 0 (nothing predicted or gold)."""
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


class SpanF1(Metric):
    """Entity-level P/R/F1 over tag ids; positions whose target is `ignore_index` are not words."""

    full_state_update = False

    def __init__(self, tag_names: Sequence[str], ignore_index: int = -100) -> None:
        super().__init__()
        self.tag_names = list(tag_names)
        self.ignore_index = ignore_index
        for name in ("correct", "predicted", "gold"):
            self.add_state(name, default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        """preds, target (B, T) tag ids."""
        names = self.tag_names
        keep = target != self.ignore_index
        for p_row, t_row, k_row in zip(preds.tolist(), target.tolist(), keep.tolist()):
            gold = [names[t] for t, k in zip(t_row, k_row) if k]
            pred = [names[p] for p, k in zip(p_row, k_row) if k]
            c, n_pred, n_gold = span_counts(gold, pred)
            self.correct += c
            self.predicted += n_pred
            self.gold += n_gold

    def compute(self) -> dict[str, torch.Tensor]:
        p, r, f = prf(int(self.correct), int(self.predicted), int(self.gold))
        return {"precision": torch.tensor(p), "recall": torch.tensor(r), "f1": torch.tensor(f)}
