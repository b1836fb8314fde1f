"""Lightning's warnings that are false for a seqbench run, silenced only where they are false.

A run's log is read by people deciding whether to trust it; a warning that says "unreliable results" or
"log files will be deleted" when neither is true sends them after a problem that is not there, and hides
the warnings that matter among repeats. Each entry below names why it is false and when; outside that
case the warning stays.

- **"your dataloader is not resumable ... unreliable results"** on a resume from a mid-epoch checkpoint:
  Lightning asks the *loader*; the language-model and probe data modules save and restore their place in
  the epoch themselves (`state_dict` / `load_state_dict`), and tests/test_resume.py proves the resumed
  weights identical to the uninterrupted run's. Silenced for a data module that keeps its place.
- **"Your `IterableDataset` has `__len__` defined ... (when num_workers > 1)"**: printed for every
  iterable dataset whatever its workers; the warning is about several worker processes each yielding the
  whole stream. Silenced for a data module whose loaders run in this process (`num_workers` 0 or absent).
- **"Checkpoint directory ... exists and is not empty"** and **"Experiment logs directory ... Previous log
  files in this directory will be deleted"** on a resume in the run's own directory: the checkpoints are
  what it resumes from, and `seqbench.csv_logger` keeps the history up to the checkpoint's step.
  Silenced only when the run resumes in its own directory.
- **"`isinstance(treespec, LeafSpec)` is deprecated"**: Lightning's own use of a torch API that torch
  2.13 deprecates; nothing a user of seqbench can change. Always silenced.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import lightning as L

NOT_RESUMABLE = "You're resuming from a checkpoint that ended before the epoch ended"
ITERABLE_LEN = "Your `IterableDataset` has `__len__` defined"
CHECKPOINT_DIR = "Checkpoint directory .* exists and is not empty"
LOGS_DIR = "Experiment logs directory .* exists and is not empty"
LEAF_SPEC = "`isinstance(treespec, LeafSpec)` is deprecated"


def keeps_its_place(datamodule) -> bool:
    """Whether the data module saves and restores its place in the epoch itself (its own `state_dict` /
    `load_state_dict`), so that a run resumed mid-epoch sees the batches the uninterrupted run would have."""
    return type(datamodule).load_state_dict is not L.LightningDataModule.load_state_dict


def loads_in_process(datamodule) -> bool:
    """Whether the data module's loaders run in this process (no worker processes to duplicate a stream)."""
    return not getattr(datamodule, "num_workers", 0)


def false_here(datamodule, resumes_own_run: bool) -> list[str]:
    """The messages (regular expressions, matched at the start) that are false for this run."""
    found = [re.escape(LEAF_SPEC)]
    if keeps_its_place(datamodule):
        found.append(re.escape(NOT_RESUMABLE))
    if loads_in_process(datamodule):
        found.append(re.escape(ITERABLE_LEN))
    if resumes_own_run:
        found += [CHECKPOINT_DIR, LOGS_DIR]
    return found


@contextmanager
def false_warnings_silenced(datamodule, resumes_own_run: bool = False) -> Iterator[None]:
    """Run the block with the warnings `false_here` names silenced; every other warning as before."""
    with warnings.catch_warnings():
        for message in false_here(datamodule, resumes_own_run):
            warnings.filterwarnings("ignore", message=message)
        yield
