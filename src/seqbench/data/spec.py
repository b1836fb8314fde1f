"""The data -> model contract: what task a DataModule poses and the sizes a model must read from it.

A model never hard-codes a vocabulary size or a class count; it reads them from the `TaskSpec` of
the DataModule it is trained on. Families declare the tasks they support, and `seqbench.training.run` checks
the pair before any data is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TASKS = ("lm", "translation", "classification", "tagging", "image", "regression", "mlm")


@dataclass
class TaskSpec:
    task: str
    vocab_size: int | None = None  # lm, classification, tagging: input vocabulary (token ids)
    input_dim: int | None = None  # sequences of feature vectors (B, T, F) instead of token ids
    num_classes: int | None = None  # classification, tagging, image
    pad_id: int | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    src_vocab_size: int | None = None  # translation
    tgt_vocab_size: int | None = None
    max_len: int | None = None  # longest sequence the data can produce (positional tables)
    tokenizer: Any = None  # object with encode/decode, kept for generation and decoding
    extras: dict[str, Any] | None = None  # anything else a task needs (image size, channels, ...)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; tasks are {', '.join(TASKS)}")
