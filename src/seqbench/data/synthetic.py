"""DataModules for the synthetic long-range probes (`data=copy`, `data=selective_copy`, `data=adding`,
`data=recall`).

Nothing is downloaded: every example is generated from the seed (`seqbench.data.probes` has the
tasks and their baselines). Training batches are fresh every epoch, batch b of epoch e drawn from
(seed, e, b), so `data.train_size` sets only how many batches make an epoch (the validation
schedule), not how many distinct examples a model sees; validation and test are fixed sets drawn
once from (seed, split). Under DDP every rank draws the same global batch and keeps its own rows
(rank r: rows [r B/W, (r+1) B/W)), so W processes see exactly the examples one process would, and
a run resumed mid-epoch continues with the batches it would have seen.

The trivial baseline of the probe (loss, and accuracy where there is one) travels in
`spec.extras["baseline"]`; `seqbench.callbacks.ProbeBaseline` logs it as `val/baseline_loss`,
`val/baseline_acc` beside the model's own numbers. What counts as solving the probe (copy, selective
copying and recall: validation accuracy >= 0.99; adding: validation MSE <= 0.01, 6 % of the baseline's 1/6)
travels in `spec.extras["solved"]`, read by `seqbench.callbacks.StopWhenSolved`.
"""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from seqbench.data import probes
from seqbench.data.epoch_place import EpochPlace
from seqbench.data.spec import TaskSpec

SPLIT_IDS = {"train": 0, "val": 1, "test": 2}


def seeded(*key: int) -> torch.Generator:
    """A torch generator for one (seed, split, epoch, batch) key; distinct keys give independent streams."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence(list(key)).generate_state(1)[0]))


def rank_rows(batch: dict, rank: int, world: int) -> dict:
    """Rank r's rows [r B/W, (r+1) B/W) of a global batch of B: W processes see what one process would."""
    n = next(iter(batch.values())).size(0)
    rows = slice(rank * n // world, (rank + 1) * n // world)
    return {k: v[rows] for k, v in batch.items()}


class FreshBatches(IterableDataset):
    """`num_batches` batches per epoch, batch b of epoch e generated from (seed, e, b)."""

    def __init__(self, make: Callable[[int, torch.Generator], dict], batch_size: int, num_batches: int, seed: int,
                 rank: int = 0, world_size: int = 1, epoch: Callable[[], int] | None = None) -> None:
        super().__init__()
        self.make, self.batch_size, self.num_batches, self.seed = make, batch_size, num_batches, seed
        self.rank, self.world_size, self.epoch_fn, self._passes = rank, world_size, epoch, 0
        self.start = 0  # resume: first batch of the next pass

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self):
        epoch = self.epoch_fn() if self.epoch_fn is not None else self._passes
        self._passes += 1
        start, self.start = self.start, 0
        for b in range(start, self.num_batches):
            batch = self.make(self.batch_size, seeded(self.seed, SPLIT_IDS["train"], epoch, b))
            yield {**rank_rows(batch, self.rank, self.world_size), "window": b}


class FixedBatches(IterableDataset):
    """A fixed evaluation set cut into batches of `batch_size`; each rank yields its rows of each."""

    def __init__(self, data: dict, batch_size: int, rank: int = 0, world_size: int = 1) -> None:
        super().__init__()
        self.data, self.batch_size, self.rank, self.world_size = data, batch_size, rank, world_size

    def __len__(self) -> int:
        return next(iter(self.data.values())).size(0) // self.batch_size

    def __iter__(self):
        for b in range(len(self)):
            batch = {k: v[b * self.batch_size : (b + 1) * self.batch_size] for k, v in self.data.items()}
            yield rank_rows(batch, self.rank, self.world_size)


class ProbeDataModule(EpochPlace, L.LightningDataModule):
    """What the three probes share. A subclass defines `make(n, generator) -> batch dict`,
    `baseline() -> {"loss": .., "acc": ..}` and the `spec` property, and sets `task`."""

    task = ""
    solved = {"monitor": "val/acc", "threshold": 0.99, "mode": "max"}  # the level at which the probe counts as solved
    recipe_task = "probe"  # conf/recipe/probe/: fresh data, long gaps: not the recipe of a real corpus

    def __init__(self, T: int = 100, batch_size: int = 32, eval_batch_size: int = 250, train_size: int = 8000,
                 val_size: int = 1000, test_size: int = 1000, seed: int = 0) -> None:
        super().__init__()
        for name, value in (("train_size", train_size), ("val_size", val_size), ("test_size", test_size)):
            size = batch_size if name == "train_size" else eval_batch_size
            if value < size or value % size:
                raise ValueError(f"data.{name}={value} must be a positive multiple of the batch size ({size})")
        self.T, self.batch_size, self.eval_batch_size = T, batch_size, eval_batch_size
        self.sizes = {"train": train_size, "val": val_size, "test": test_size}
        self.seed = seed
        self.fixed: dict[str, dict] = {}

    def setup(self, stage: str | None = None) -> None:
        if not self.fixed:
            for split in ("val", "test"):
                self.fixed[split] = self.make(self.sizes[split], seeded(self.seed, SPLIT_IDS[split]))

    def _rank(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _check_world(self, world: int) -> None:
        for size in (self.batch_size, self.eval_batch_size):
            if size % world:
                raise ValueError(f"batch size {size} is not divisible by the {world} DDP processes")

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank()
        self._check_world(world)
        epoch = (lambda: self.trainer.current_epoch) if self.trainer is not None else None
        dataset = FreshBatches(self.make, self.batch_size, self.sizes["train"] // self.batch_size, self.seed,
                               rank, world, epoch)
        start = self.resume_start()
        dataset.start = start if start < len(dataset) else 0
        # batch_size=None: whole batches; a private generator keeps the global RNG (dropout) untouched
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def _eval_loader(self, split: str) -> DataLoader:
        self.setup()
        rank, world = self._rank()
        self._check_world(world)
        dataset = FixedBatches(self.fixed[split], self.eval_batch_size, rank, world)
        return DataLoader(dataset, batch_size=None, generator=torch.Generator().manual_seed(0))

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")


class CopyDataModule(ProbeDataModule):
    """Copy memory: recall `copy_length` symbols (of `num_symbols`) after a gap of T steps."""

    task = "tagging"

    def __init__(self, T: int = 100, num_symbols: int = 8, copy_length: int = 10, batch_size: int = 32,
                 eval_batch_size: int = 250, train_size: int = 8000, val_size: int = 1000, test_size: int = 1000,
                 seed: int = 0) -> None:
        super().__init__(T, batch_size, eval_batch_size, train_size, val_size, test_size, seed)
        self.num_symbols, self.copy_length = num_symbols, copy_length

    def make(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        return probes.copy_memory(n, self.T, self.num_symbols, self.copy_length, generator)

    def baseline(self) -> dict[str, float]:
        return probes.copy_memory_baseline(self.num_symbols)

    @property
    def spec(self) -> TaskSpec:
        vocab = self.num_symbols + 2  # blank 0, symbols 1..K, delimiter K+1; tags are the same ids
        return TaskSpec(task="tagging", vocab_size=vocab, num_classes=vocab, max_len=2 * self.copy_length + self.T,
                        extras={"baseline": self.baseline(), "probe": "copy", "T": self.T,
                                "solved": self.solved})


class SelectiveCopyDataModule(ProbeDataModule):
    """Selective copying: output, in order, the `num_data` symbols scattered among T blanks."""

    task = "tagging"

    def __init__(self, T: int = 64, num_symbols: int = 16, num_data: int = 16, batch_size: int = 32,
                 eval_batch_size: int = 250, train_size: int = 8000, val_size: int = 1000, test_size: int = 1000,
                 seed: int = 0) -> None:
        super().__init__(T, batch_size, eval_batch_size, train_size, val_size, test_size, seed)
        self.num_symbols, self.num_data = num_symbols, num_data

    def make(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        return probes.selective_copy(n, self.T, self.num_symbols, self.num_data, generator)

    def baseline(self) -> dict[str, float]:
        """The uniform guess and the symbol-frequency plateau (`val/baseline_frequency_acc`)."""
        return probes.selective_copy_baseline(self.num_symbols, self.num_data)

    @property
    def spec(self) -> TaskSpec:
        vocab = self.num_symbols + 2  # blank 0, symbols 1..K, marker K+1; tags are the same ids
        return TaskSpec(task="tagging", vocab_size=vocab, num_classes=vocab, max_len=self.T + 2 * self.num_data,
                        extras={"baseline": self.baseline(), "probe": "selective_copy", "T": self.T,
                                "solved": self.solved})


class AddingDataModule(ProbeDataModule):
    """The adding problem: regress the sum of the two marked values among T."""

    task = "regression"
    solved = {"monitor": "val/mse", "threshold": 0.01, "mode": "min"}

    def make(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        return probes.adding(n, self.T, generator)

    def baseline(self) -> dict[str, float]:
        return probes.adding_baseline()

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec(task="regression", input_dim=2, max_len=self.T,
                        extras={"baseline": self.baseline(), "probe": "adding", "T": self.T,
                                "solved": self.solved})


class RecallDataModule(ProbeDataModule):
    """Associative recall: `num_pairs` key-value pairs, T blanks, then a query key; name its value."""

    task = "classification"

    def __init__(self, T: int = 50, num_pairs: int = 8, num_keys: int = 16, num_values: int = 8,
                 batch_size: int = 32, eval_batch_size: int = 250, train_size: int = 8000, val_size: int = 1000,
                 test_size: int = 1000, seed: int = 0) -> None:
        super().__init__(T, batch_size, eval_batch_size, train_size, val_size, test_size, seed)
        self.num_pairs, self.num_keys, self.num_values = num_pairs, num_keys, num_values

    def make(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        return probes.recall(n, self.T, self.num_pairs, self.num_keys, self.num_values, generator)

    def baseline(self) -> dict[str, float]:
        """The trivial predictor's numbers and the value-frequency plateau's (`val/baseline_frequency_acc`)."""
        return {**probes.recall_baseline(self.num_values),
                **probes.recall_frequency_baseline(self.num_pairs, self.num_values)}

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec(task="classification", vocab_size=self.num_keys + self.num_values + 2,
                        num_classes=self.num_values, max_len=2 * self.num_pairs + self.T + 2,
                        extras={"baseline": self.baseline(), "probe": "recall", "T": self.T,
                                "solved": self.solved})
