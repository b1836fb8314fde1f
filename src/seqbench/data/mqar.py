"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology", §3 and Figure 2), `data=mqar`.

The generator follows Zoology's `zoology/data/multiquery_ar.py` (HazyResearch/zoology) with
`random_non_queries=False` and one pass over the pairs, as its Figure-2 configs set them. With
vocabulary V, P pairs and length T (Zoology's docstring example: V 12, P 2, T 16):

    input   k1 v1 k2 v2 | 0  0  k2 0  0  0  0  0  k1 0  0  0      keys 1..V/2-1, values V/2..V-1
    target  -  -  -  -  | -  -  v2 -  -  -  -  -  v1 -  -  -      "-" = IGNORE_INDEX
            2P context    the query region: T - 2P positions, P of its even ones hold a query

- the P keys of a row are distinct, and so are its P values (both drawn without replacement, from the
  lower and the upper half of the vocabulary); token 0 fills every position that is not a pair or a query;
- the pairs come first; then each key is queried once, at position 2P + 2g, where the gaps g of the P
  keys (in the pairs' order) are drawn without replacement from 0 .. S-1 (S = (T - 2P) / 2) with
  p(g) ∝ a (g + 1)^(a - 1): Zoology's power law, which with a = 0.01 puts most queries near the pairs;
- the target at a query is the value stored with its key, at the query's own position; every other
  target is ignored, so loss and accuracy are those of the queried values only. The value is not
  written after its query (Zoology's inputs hold 0 there): a model is never shown the answer.

How every family reads it causally: the data poses `lm` with sparse targets (`spec.extras
["sparse_targets"]`). Every family's `lm_logits` reads left to right by construction (the Transformer is
always causal on `lm`, a bidirectional recurrent net is refused there), so the logits at a query see the
pairs and the earlier queries and nothing after it, as in Zoology, where every model is a causal decoder.
The language-model task adds the next-token accuracy over the scored targets (`val/acc`) and counts
every position read as a token (FLOPs and throughput), not only the queries scored. Each batch is a set
of whole, independent sequences: a recurrent family starts every batch from a zero state (no `window`
reaches it), an attention family reads the whole row as one window (its `context` must be at least T).

The training set is fixed, `train_examples` rows drawn once from the seed, as Zoology's 100,000; it is
shuffled every epoch (Zoology keeps one order) from (seed, epoch), so a resumed run sees the batches it
would have, and a last batch short of `batch_size` is left out of that epoch. Validation and test are
two more fixed sets from their own seeds (Zoology scores and stops on one test set; here stopping and
checkpoint choice read validation, the reported score is test's). The sha256 of each split's tensors goes
to the run's record (`data/sha256_<split>`), so two runs can be shown to have read the same examples.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from seqbench.data.epoch_place import EpochPlace
from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.synthetic import SPLIT_IDS, FixedBatches, rank_rows, seeded
from seqbench.errors import ConfigError

CHUNK = 4096  # rows drawn at a time where a draw is (rows, width) floats: 67 MB at V/2 = 4,096


def power_law(space: int, power_a: float) -> torch.Tensor:
    """Zoology's query-gap law over 0 .. space-1: p(g) ∝ a (g + 1)^(a - 1), normalised (float64)."""
    g = torch.arange(1, space + 1, dtype=torch.float64)
    p = power_a * g ** (power_a - 1)
    return p / p.sum()


def check_setting(seq_len: int, num_kv_pairs: int, vocab_size: int, power_a: float) -> None:
    """Zoology's assertions, as sentences: an even length with room for the pairs and as many query slots."""
    if seq_len % 2:
        raise ConfigError(f"data.seq_len={seq_len} must be even: queries stand at every other position.")
    if num_kv_pairs < 1 or 4 * num_kv_pairs > seq_len:
        raise ConfigError(f"data.num_kv_pairs={num_kv_pairs} needs 1 <= 4 x pairs <= seq_len={seq_len}: the pairs "
                          "take 2 positions each and the query region as many slots again.")
    if num_kv_pairs > vocab_size // 2 - 1:
        raise ConfigError(f"data.vocab_size={vocab_size} holds {vocab_size // 2 - 1} keys, fewer than "
                          f"data.num_kv_pairs={num_kv_pairs} distinct ones.")
    if not power_a > 0:
        raise ConfigError(f"data.power_a={power_a} must be positive (1 is uniform, Zoology's 0.01 favours short gaps).")


def _distinct(n: int, low: int, high: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """(n, k): k distinct integers per row, uniform among low .. high-1, in a uniformly random order.

    Rows drawn with replacement and drawn again while they repeat a number (exact: a row kept is uniform
    among the distinct ones); with k (k - 1) <= 2 (high - low) about e^-1 or more of the rows pass each
    round (the birthday bound). Otherwise (a small vocabulary, many pairs) the indices of the k largest of
    high - low uniform floats, a uniform k-subset in random order: (rows, high - low) floats, 10 x slower
    at Zoology's 4,095 keys."""
    if k * (k - 1) > 2 * (high - low):
        out = [torch.rand(min(CHUNK, n - start), high - low, generator=generator).topk(k, dim=1).indices
               for start in range(0, n, CHUNK)]
        return torch.cat(out) + low
    rows = torch.randint(low, high, (n, k), generator=generator)
    while True:
        ordered = rows.sort(dim=1).values
        again = (ordered[:, 1:] == ordered[:, :-1]).any(dim=1).nonzero().flatten()  # rows with a repeat
        if again.numel() == 0:
            return rows
        rows[again] = torch.randint(low, high, (again.numel(), k), generator=generator)


def mqar(n: int, seq_len: int, num_kv_pairs: int, vocab_size: int = 8192, power_a: float = 0.01,
         generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """n MQAR examples: `input` (n, T) token ids and `target` (n, T), the value at each query and
    IGNORE_INDEX elsewhere (the module docstring draws one)."""
    check_setting(seq_len, num_kv_pairs, vocab_size, power_a)
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    T, P, half = seq_len, num_kv_pairs, vocab_size // 2
    context, space = 2 * P, (seq_len - 2 * P) // 2
    keys = _distinct(n, 1, half, P, generator)  # (n, P); 0 is the filler, never a key
    values = _distinct(n, half, vocab_size, P, generator)  # (n, P)
    # torch.multinomial without replacement returns the draws in the order drawn (an exponential race, as
    # numpy's choice(replace=False, p=p) draws them one by one): gap i belongs to pair i, as in Zoology
    law = power_law(space, power_a).expand(min(CHUNK, n), space)
    gaps = torch.cat([torch.multinomial(law[: min(CHUNK, n - s)], P, replacement=False, generator=generator)
                      for s in range(0, n, CHUNK)])  # (n, P)
    where = context + 2 * gaps  # (n, P): the queries' positions
    x = torch.zeros(n, T, dtype=torch.long)
    x[:, 0:context:2], x[:, 1:context:2] = keys, values
    x.scatter_(1, where, keys)
    target = torch.full((n, T), IGNORE_INDEX, dtype=torch.long)
    target.scatter_(1, where, values)
    return {"input": x, "target": target}


def mqar_baseline(vocab_size: int, num_kv_pairs: int) -> dict[str, float]:
    """A guess among all V - V/2 values; and the plateau of a model that knows which values the row's pairs
    hold but not which key holds which (each of the P distinct values with probability 1/P)."""
    values = vocab_size - vocab_size // 2
    return {"loss": math.log(values), "acc": 1.0 / values,
            "frequency_loss": math.log(num_kv_pairs), "frequency_acc": 1.0 / num_kv_pairs}


def sha256(batch: dict[str, torch.Tensor]) -> str:
    """The sha256 of a split's tensors (each as int64, in key order): one value per generated set."""
    digest = hashlib.sha256()
    for key in sorted(batch):
        digest.update(key.encode())
        digest.update(np.ascontiguousarray(batch[key].to(torch.int64).numpy()).tobytes())
    return digest.hexdigest()


class ShuffledEpochs(IterableDataset):
    """A fixed set in `batch_size` batches, reshuffled every epoch from (seed, epoch); each rank its rows."""

    def __init__(self, data: dict, batch_size: int, seed: int, epoch: Callable[[], int], rank: int = 0,
                 world_size: int = 1) -> None:
        super().__init__()
        self.data, self.batch_size, self.seed, self.epoch_fn = data, batch_size, seed, epoch
        self.rank, self.world_size = rank, world_size
        self.start = 0  # resume: first batch of the next pass

    def __len__(self) -> int:
        return self.data["input"].size(0) // self.batch_size  # a short last batch is left out

    def __iter__(self):
        epoch = self.epoch_fn()
        order = torch.randperm(self.data["input"].size(0), generator=seeded(self.seed, SPLIT_IDS["train"], epoch))
        start, self.start = self.start, 0
        for b in range(start, len(self)):
            rows = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield {**rank_rows({k: v[rows] for k, v in self.data.items()}, self.rank, self.world_size), "window": b}


class MQARDataModule(EpochPlace, L.LightningDataModule):
    """MQAR at one (seq_len, num_kv_pairs): fixed train, validation and test sets from the seed."""

    task = "lm"
    recipe_task = "mqar"  # conf/recipe/mqar/: Zoology's recipe, one for every family
    model_reads_window = False  # rows are independent: a recurrent family starts every batch from a zero state
    solved = {"monitor": "val/acc", "threshold": 0.99, "mode": "max"}  # Zoology's early stop: accuracy > 0.99

    def __init__(self, vocab_size: int = 8192, seq_len: int = 64, num_kv_pairs: int = 4, power_a: float = 0.01,
                 train_examples: int = 100_000, val_examples: int = 3000, test_examples: int = 3000,
                 batch_size: int = 512, eval_batch_size: int = 500, seed: int = 0) -> None:
        super().__init__()
        check_setting(seq_len, num_kv_pairs, vocab_size, power_a)
        if train_examples < batch_size:
            raise ConfigError(f"data.train_examples={train_examples} is less than one batch (data.batch_size={batch_size}).")
        for name, value in (("val_examples", val_examples), ("test_examples", test_examples)):
            if value < eval_batch_size or value % eval_batch_size:
                raise ConfigError(f"data.{name}={value} must be a positive multiple of data.eval_batch_size "
                                  f"({eval_batch_size}): every example is scored once.")
        self.vocab_size, self.seq_len, self.num_kv_pairs, self.power_a = vocab_size, seq_len, num_kv_pairs, power_a
        self.sizes = {"train": train_examples, "val": val_examples, "test": test_examples}
        self.batch_size, self.eval_batch_size, self.seed = batch_size, eval_batch_size, seed
        self.data: dict[str, dict[str, torch.Tensor]] = {}

    def make(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        return mqar(n, self.seq_len, self.num_kv_pairs, self.vocab_size, self.power_a, generator)

    def split(self, name: str) -> dict[str, torch.Tensor]:
        """One split's examples, drawn from (seed, split) the first time they are asked for."""
        if name not in self.data:
            self.data[name] = self.make(self.sizes[name], seeded(self.seed, SPLIT_IDS[name]))
        return self.data[name]

    def baseline(self) -> dict[str, float]:
        return mqar_baseline(self.vocab_size, self.num_kv_pairs)

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec(task="lm", vocab_size=self.vocab_size, max_len=self.seq_len,
                        extras={"sparse_targets": True, "baseline": self.baseline(), "probe": "mqar",
                                "T": self.seq_len, "num_kv_pairs": self.num_kv_pairs, "solved": self.solved})

    def setup(self, stage: str | None = None) -> None:
        for name in ("val", "test"):  # small; the training set waits for its loader (eval.py never needs it)
            self.split(name)

    # -- what a run reads from the data besides batches ---------------------------------------------
    def check_model(self, model) -> None:
        """A windowed family reads a row as one window: its position table must hold the whole row."""
        context = getattr(model, "context", None)
        if getattr(model, "lm_batching", None) == "windows" and isinstance(context, int) and context < self.seq_len:
            raise ConfigError(f"model.context={context} is shorter than data.seq_len={self.seq_len}: an MQAR row is "
                              f"read as one window; set model.context={self.seq_len} (conf/preset/mqar/ does).")

    def eval_context(self, model) -> dict[str, str]:
        """For the run's record (`seqbench.training.run`): every scored query is read with the whole row
        before it, by every family; what is recorded is which examples: the sha256 of each split
        (`data/sha256_<split>`)."""
        self.check_model(model)
        return {f"data/sha256_{name}": sha256(self.split(name)) for name in ("train", "val", "test")}

    def train_batch_shape(self, model) -> tuple[int, int]:
        """(rows, length) of a training step, all processes together (`seqbench.training.budget`)."""
        return self.batch_size, self.seq_len

    # -- loaders ---------------------------------------------------------------------------------
    def _place(self) -> tuple[int, int]:
        """(rank, world) of this process, once the batch sizes divide among the processes and the model
        reads whole rows (`check_model`)."""
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        for size in (self.batch_size, self.eval_batch_size):
            if size % world:
                raise ConfigError(f"batch size {size} is not divisible by the {world} DDP processes.")
        if trainer is not None and trainer.lightning_module is not None:
            self.check_model(trainer.lightning_module)
        return rank, world

    def train_dataloader(self) -> DataLoader:
        rank, world = self._place()
        epoch = (lambda: self.trainer.current_epoch) if self.trainer is not None else (lambda: 0)
        dataset = ShuffledEpochs(self.split("train"), self.batch_size, self.seed, epoch, rank, world)
        start = self.resume_start()
        dataset.start = start if start < len(dataset) else 0
        # batch_size=None: whole batches; a private generator keeps the global RNG (dropout) untouched
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def _eval_loader(self, name: str) -> DataLoader:
        rank, world = self._place()
        dataset = FixedBatches(self.split(name), self.eval_batch_size, rank, world)
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")
