"""Helpers for the tasks' `samples` methods: what a model does on fixed validation examples.

Each task implements `samples(model, batch, n) -> (columns, rows) | None` on the first validation
batch, which is the same batch at every validation (evaluation loaders do not shuffle), and the
`ValidationSamples` callback logs the rows as a W&B table. Samples are computed in eval mode
without drawing random numbers (greedy decoding), so logging them does not change what a resumed
run replays.
"""

from __future__ import annotations

import torch


def first_rows(batch: dict, n: int) -> dict:
    """The first `n` examples of a padded batch: tensors and lists whose first dimension is the batch."""
    def rows(v) -> int | None:
        return len(v) if isinstance(v, list) or (isinstance(v, torch.Tensor) and v.dim()) else None

    size = next(r for r in map(rows, batch.values()) if r)
    return {k: v[:n] if rows(v) == size else v for k, v in batch.items()}


def text_of(batch: dict, i: int, tokenizer) -> str:
    """Example i as text: its surface words when the batch carries them, else its decoded ids."""
    if batch.get("words") is not None:
        return " ".join(batch["words"][i])
    ids = batch["input"][i]
    if ids.dim() != 1 or ids.is_floating_point():  # feature vectors, pixels: no text to show
        return f"#{i}"
    lengths = batch.get("lengths")
    ids = ids[: int(lengths[i])] if lengths is not None else ids
    return tokenizer.decode(ids.tolist()) if tokenizer is not None else " ".join(map(str, ids.tolist()))


def spans_text(chunks: set[tuple[str, int, int]], words: list[str]) -> str:
    """Entity chunks as 'PER: John Smith | LOC: Paris', in sentence order."""
    return " | ".join(f"{kind}: {' '.join(words[a:b + 1])}" for kind, a, b in sorted(chunks, key=lambda c: c[1]))


def one_line(text: str) -> str:
    """Text in a table cell: line ends shown as `\\n`, which a cell would otherwise render as blank lines."""
    return text.replace("\n", "\\n")


EMPTY = "(nothing: <eos> first)"


def until_eos(ids: list[int], tokenizer, eos_id: int | None) -> str:
    """A generated continuation up to its first `<eos>` (shown as ` <eos>` at its end), on one line. Early
    in training a language model predicts `<eos>` everywhere; cut there, the cell says so instead of
    showing thirty line ends, which look like an empty cell."""
    stopped = eos_id is not None and eos_id in ids
    text = one_line(tokenizer.decode(ids[: ids.index(eos_id)] if stopped else ids))
    if not stopped:
        return text
    return f"{text} <eos>" if text.strip() else EMPTY
