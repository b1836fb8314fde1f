"""A word or character vocabulary built from the training split only.

Ids are ordered by training frequency (ties broken alphabetically), so the same corpus always gives
the same ids on every machine and for every model family — the precondition for comparing
perplexities. Out-of-vocabulary tokens in valid/test map to `<unk>`; PTB and WikiText-2 already
replaced rare words with `<unk>` in the files, so for them no mapping ever happens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

UNK = "<unk>"
EOS = "<eos>"


@dataclass
class Vocab:
    itos: list[str]
    stoi: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    @classmethod
    def build(cls, tokens: Iterable[str], specials: Iterable[str] = (), max_size: int | None = None,
              min_freq: int = 1) -> Vocab:
        """Specials come first only if absent from the data; frequent tokens get small ids."""
        counts = Counter(tokens)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        extra = [s for s in specials if s not in counts]
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(extra))]
        return cls(extra + ranked)

    def encode(self, tokens: Iterable[str]) -> torch.Tensor:
        unk = self.stoi.get(UNK)
        if unk is None:  # character vocabularies have no <unk>: every symbol must be known
            try:
                ids = [self.stoi[t] for t in tokens]
            except KeyError as exc:
                raise ValueError(f"symbol {exc.args[0]!r} is not in the training vocabulary") from None
        else:
            get = self.stoi.get
            ids = [get(t, unk) for t in tokens]
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids: Iterable[int], sep: str = " ") -> str:
        return sep.join(self.itos[int(i)] for i in ids)


def word_tokens(text: str) -> list[str]:
    """Whitespace tokens with `<eos>` after every line: the convention of Mikolov's PTB numbers."""
    tokens: list[str] = []
    for line in text.splitlines():
        tokens.extend(line.split())
        tokens.append(EOS)
    return tokens


def char_tokens(text: str) -> list[str]:
    """Every character is a token, newlines included (char-rnn, nanoGPT)."""
    return list(text)
