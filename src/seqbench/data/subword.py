"""Subword tokenizers for translation, trained on the training split with HF `tokenizers`.

BPE (Sennrich et al. 2016) or unigram (Kudo 2018) over a Metaspace pre-tokenizer: spaces become the
visible marker `▁` at the start of a word, so decoding the pieces gives back the original text
(detokenised, as sacreBLEU wants it) without any language-specific rules. The text is NFKC-normalised
first, the only change a round trip makes.

Training takes seconds, but every run and every DDP rank would repeat it, so a trained tokenizer is
saved as JSON under a cache folder, keyed by everything it depends on: the options and the sha256 of
the training files. A changed option or corpus gets a new file; nothing is ever stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from filelock import FileLock
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)  # ids 0..3, the same in every vocabulary


class SubwordTokenizer:
    """Text <-> subword ids; ids 0-3 are <pad>, <unk>, <bos>, <eos>. Encoding adds no specials."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = (tokenizer.token_to_id(s) for s in SPECIALS)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.encode(text).tokens

    def id_to_token(self, i: int) -> str:
        return self.tokenizer.id_to_token(int(i))

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, stopping at the first <eos> and dropping the other specials."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i > self.eos_id:
                out.append(i)
        return self.tokenizer.decode(out)


def sentinel(i: int) -> str:
    """T5's span-corruption sentinels <extra_id_0>, <extra_id_1>, ... (ids 4, 5, ... when present)."""
    return f"<extra_id_{i}>"


def train_tokenizer(lines: Iterable[str], vocab_size: int, kind: str = "bpe", sentinels: int = 0,
                    lowercase: bool = False) -> SubwordTokenizer:
    specials = list(SPECIALS) + [sentinel(i) for i in range(sentinels)]
    if kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=UNK))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, min_frequency=2,
                                      show_progress=False)
    elif kind == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token=UNK,
                                          show_progress=False)
    else:
        raise ValueError(f"unknown subword model {kind!r}; choose 'bpe' or 'unigram'")
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]) if lowercase else normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(lines, trainer)
    return SubwordTokenizer(tok)


def _lock(path: Path) -> FileLock:
    """The lock beside a cached tokenizer: one process trains it while the others wait, then load."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path.with_suffix(".lock"))


def cached_tokenizer(cache_dir: Path, key: dict, lines: Callable[[], Iterable[str]]) -> SubwordTokenizer:
    """Load the tokenizer trained for `key` (options + file checksums), training and saving it once."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{key.get('name', 'tokenizer')}-{digest}.json"
    with _lock(path):  # DDP ranks: one trains, the others wait and load
        if not path.is_file():
            tok = train_tokenizer(lines(), key["vocab_size"], key["kind"], key.get("sentinels", 0))
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tok.tokenizer.save(str(tmp))
            tmp.replace(path)
    return SubwordTokenizer(Tokenizer.from_file(str(path)))
