"""enwik8 (Mahoney 2006; the Hutter Prize file), byte level, in the standard split of every paper since
Chung et al. (2015): the first 90,000,000 bytes train, the next 5,000,000 validate, the last 5,000,000 test;
results in bits per byte on test.

    |<------------------------- train 90,000,000 ------------------------->|<- valid 5M ->|<- test 5M ->|
    0                                                               90,000,000     95,000,000   100,000,000

**Vocabulary: the 256 byte values, id = the byte.** Fixed, not built from train as the other corpora's are:
no vocabulary file, the same ids on every machine, and every byte of valid and test is encodable (205 of
the 256 occur in the file; a multi-byte UTF-8 character is several tokens, as in every published number).

**Files:** `<data_dir>/enwik8/enwik8` (the 100 MB file) or `enwik8.gz` (the copy ../shared/data holds),
checked against the sha256 in its SOURCE.md (the split's own sha256 are checked by a test: hashing them on
every run would add nothing the whole file's sha256 does not already guarantee). Without either, and with
internet, the Hutter Prize archive `enwik8.zip` is downloaded and unzipped with the standard library
(`files.ensure_files`); with neither file nor network, one sentence says where to put it.

**In memory:** the file's bytes as one numpy array, split by slicing (no Python loop over the 100M bytes).
The training split stays bytes (a uint8 tensor of 90 MB): widened to int64 it would take 720 MB and 2-4 s
of page faults per run on the 2-core VM, and the loaders widen each batch they serve (`streams.py`,
`windows.py`). Valid and test are int64 as every corpus' streams are (80 MB): the instruments in
`seqbench.analysis` index them straight into a model. Served by the LM base as every LM corpus is:
contiguous truncated-BPTT streams with the state carried for recurrent families, shuffled windows and a
sliding evaluation for attention ones (`seqbench.data.lm`).

**Evaluation bytes:** scoring the whole 5M-byte split costs a 1M-parameter model about 1e13 FLOPs (2 N per
byte; attention's sliding window twice that at the default stride), a large share of a small budget's run.
`eval_bytes_valid` / `eval_bytes_test` = N evaluate the first N bytes of the split (N - 1 targets: a
split's first byte is context only, as for every split); null evaluates the whole split. The bytes read
are recorded in every run's record (`eval/valid_bytes`, `eval/test_bytes`), so a page can tell a slice's
score from the published protocol's.

The task logs bits per byte (`val/bpc`, `test/bpc`: the loss in nats / ln 2) besides the loss and
perplexity, because this module says its tokens are bytes (`spec.extras["token_unit"]`).
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import torch

from seqbench.data.files import CorpusFile, check_digest, ensure_files
from seqbench.data.lm import LanguageModelDataModule
from seqbench.data.spec import TaskSpec
from seqbench.data.vocab import Vocab
from seqbench.errors import ConfigError

URL = "http://mattmahoney.net/dc/enwik8.zip"  # the Hutter Prize archive (SOURCE.md)
RAW = CorpusFile("enwik8", "2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8", URL, member="enwik8")
GZ = CorpusFile("enwik8.gz", "d52ea2118b505f79007e084b2f49acef9fd0e45fb481f84b2cab0a7191a7ef60")
FILE_BYTES = 100_000_000
BOUNDS = {"train": (0, 90_000_000), "valid": (90_000_000, 95_000_000), "test": (95_000_000, 100_000_000)}
EVAL_SPLITS = ("valid", "test")
VOCAB = 256


def locate(folder: Path, download: bool = True) -> Path:
    """The file to read: `enwik8` where it is, else `enwik8.gz`, else `enwik8` downloaded from the archive
    (verified on arrival). A file found is verified when it is read (`read_bytes`), once per run."""
    for found in (folder / RAW.name, folder / GZ.name):
        if found.is_file():
            return found
    return ensure_files(folder, [RAW], "enwik8", hint="enwik8 (or enwik8.gz)", download=download)[RAW.name]


def read_bytes(path: Path) -> np.ndarray:
    """The 100M bytes of enwik8 from `enwik8` or `enwik8.gz`, checksum-verified, as a read-only uint8 array."""
    blob = path.read_bytes()
    expected = GZ.sha256 if path.name == GZ.name else RAW.sha256
    check_digest(path, hashlib.sha256(blob).hexdigest(), expected)
    if path.name == GZ.name:
        blob = gzip.decompress(blob)  # 2 s on the 2-core VM: the one cost of reading the compressed copy
    return np.frombuffer(blob, dtype=np.uint8)


def split(data: np.ndarray) -> dict[str, np.ndarray]:
    """The standard split as views of `data` (no copy), as drawn in the module docstring."""
    if data.size != FILE_BYTES:
        raise ValueError(f"enwik8 has {FILE_BYTES:,} bytes, this array {data.size:,}")
    return {name: data[lo:hi] for name, (lo, hi) in BOUNDS.items()}


def byte_vocab() -> Vocab:
    """Id i is byte i; its symbol is the byte read as Latin-1, a one-to-one map of bytes to characters."""
    return Vocab([bytes([i]).decode("latin-1") for i in range(VOCAB)])


class ByteTokenizer:
    """Text <-> byte ids: UTF-8 encoded, decoded with replacement characters where a sample cuts a
    multi-byte character (a generated continuation may end half-way through one)."""

    level = "byte"

    def __init__(self) -> None:
        self.vocab = byte_vocab()  # what a GPT checkpoint records of its data's ids (models/gpt.py)

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


class Enwik8DataModule(LanguageModelDataModule):
    """enwik8 as byte streams: the LM base's batching, a fixed 256-byte vocabulary, bits per byte."""

    corpus = "enwik8"

    def __init__(self, data_dir: str, eval_bytes_valid: int | None = None, eval_bytes_test: int | None = None,
                 **kwargs) -> None:
        super().__init__(data_dir, **kwargs)
        self.level = "byte"
        split_bytes = BOUNDS["valid"][1] - BOUNDS["valid"][0]
        self.eval_bytes = {"valid": eval_bytes_valid, "test": eval_bytes_test}
        for name, n in self.eval_bytes.items():
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= split_bytes):
                raise ConfigError(f"data.eval_bytes_{name} must be null (the whole split) or a number of bytes from 2 "
                                  f"to {split_bytes:,} (the split's size), got {n!r}.")

    def prepare_data(self) -> None:
        locate(self.folder, self.download)  # downloads where it must; assigns no state

    def setup(self, stage: str | None = None) -> None:
        if self.vocab is not None:  # run.py sets up before building the model; Lightning calls again
            return
        parts = split(read_bytes(locate(self.folder, self.download)))
        for name in EVAL_SPLITS:
            if self.eval_bytes[name] is not None:
                parts[name] = parts[name][: self.eval_bytes[name]]  # the first N bytes: the same slice for every run
        self.vocab = byte_vocab()
        self.streams = {name: torch.from_numpy(part.copy() if name == "train" else part.astype(np.int64))
                        for name, part in parts.items()}  # train: its own 90 MB of bytes (the file's buffer goes)

    def split_stream(self, name: str) -> torch.Tensor:
        """The whole split as int64, whatever slice this module evaluates (`seqbench.analysis.eval_slices`
        scores its disjoint slices); read from the file again, so the slice a run holds stays as it is."""
        return torch.from_numpy(split(read_bytes(locate(self.folder, self.download)))[name].astype(np.int64))

    @property
    def spec(self) -> TaskSpec:
        if self.vocab is None:
            raise RuntimeError("call setup() before reading the spec")
        return TaskSpec(task="lm", vocab_size=VOCAB, tokenizer=self.tokenizer, extras={"token_unit": "byte"})

    @property
    def tokenizer(self) -> ByteTokenizer:
        return ByteTokenizer()

    def eval_context(self, model) -> dict[str, int]:
        """The LM base's record of a scored byte's context, and the bytes of valid and test evaluated."""
        return {**super().eval_context(model), **{f"eval/{name}_bytes": self.num_tokens(name) for name in EVAL_SPLITS}}
