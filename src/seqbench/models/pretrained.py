"""Loading a pre-trained backbone: `model.pretrained=<ckpt>` for the families that pre-train.

A pre-training run stores, next to Lightning's `state_dict`, what a fine-tuning run needs to rebuild
the same backbone: `checkpoint["seqbench_pretrained"] = {"family", "config", "tokenizer"}` (the
tokenizer as its JSON string). A wrong path, a checkpoint of another family, or one whose tokenizer
is not the data's ends in one sentence before training; so does one that holds Python objects
beyond tensors and plain data (`seqbench.checkpoints`: loading it could run code).
"""

from __future__ import annotations

import os
from pathlib import Path

from seqbench.checkpoints import load_checkpoint
from seqbench.data.stored_tokenizer import KEY
from seqbench.errors import ConfigError


def load_pretrained(path: str, family: str) -> dict:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"model.pretrained={path} does not exist (looked from {os.getcwd()}); give the .ckpt of "
                          f"a pre-training run, e.g. outputs/runs/<run>/checkpoints/last.ckpt.")
    ckpt = load_checkpoint(p, f"model.pretrained={path}")
    info = ckpt.get(KEY) if isinstance(ckpt, dict) else None
    if not info or info.get("family") != family:
        found = info.get("family") if info else "no pre-trained"
        raise ConfigError(f"model.pretrained={path} holds a {found} backbone, not a {family} one; pre-train "
                          f"with model={family} first (or pick that run's checkpoint).")
    return ckpt


def sub_state(ckpt: dict, prefix: str) -> dict:
    """The entries of the checkpoint's state_dict under `prefix.`, with the prefix removed."""
    return {k[len(prefix) + 1:]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix + ".")}


def same_vocab(a, b) -> bool:
    """Two tokenizers map every piece to the same id (HF tokenizers' get_vocab)."""
    return a.get_vocab() == b.get_vocab()


def first_pieces(word_ids: list[int | None], n_words: int, offset: int = 0, missing: int = 0) -> list[int]:
    """The position of each word's first piece in a row (an HF encoding's `word_ids`, shifted by
    `offset` tokens put in front); a word cut off by truncation gets `missing`. Taggers read there."""
    first = [missing] * n_words
    seen: set[int] = set()
    for p, w in enumerate(word_ids):
        if w is not None and w not in seen:
            seen.add(w)
            first[w] = p + offset
    return first
