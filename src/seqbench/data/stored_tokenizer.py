"""The tokenizer of an earlier run, so that continued pre-training reads the same pieces.

HF `tokenizers` trainers do not give the same ids twice: two processes training WordPiece or BPE on
the same text get vocabularies with different ids (seen here on a 3-sentence corpus, and on the
92k-sentence pre-training text). A checkpoint's embedding rows belong to its own ids, so a run that
continues from it (`model.pretrained=<ckpt>` on `mlm` or `lm`) must take its tokenizer rather than
train a new one: `data.tokenizer_from=<ckpt>` (or a tokenizer `.json`).
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenizers import Tokenizer

from seqbench.checkpoints import load_checkpoint
from seqbench.errors import ConfigError

KEY = "seqbench_pretrained"  # where a pre-training run stores family, config and tokenizer


def load_tokenizer(path: str) -> Tokenizer:
    """The HF tokenizer in a pre-training run's checkpoint, or in a tokenizer `.json` file."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"data.tokenizer_from={path} does not exist (looked from {os.getcwd()}); give a "
                          f"pre-training run's .ckpt or a tokenizer .json.")
    if p.suffix == ".json":
        return Tokenizer.from_file(str(p))
    ckpt = load_checkpoint(p, f"data.tokenizer_from={path}", mmap=True)  # only the JSON text is read
    info = ckpt.get(KEY) if isinstance(ckpt, dict) else None
    if not info or not info.get("tokenizer"):
        raise ConfigError(f"data.tokenizer_from={path} stores no tokenizer; only subword pre-training runs "
                          f"(model=bert, or model=gpt at data.level=bpe) save one.")
    return Tokenizer.from_str(info["tokenizer"])
