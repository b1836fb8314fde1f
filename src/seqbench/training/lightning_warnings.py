"""Lightning's warnings that are false for a seqbench run, silenced only where they are false.

A run's log is read by people deciding whether to trust it; a warning that says "unreliable results" or
"log files will be deleted" when neither is true sends them after a problem that is not there, and hides
the warnings that matter among repeats. Each entry below names why it is false and when; outside that
case the warning stays.

- **"your dataloader is not resumable ... unreliable results"** on a resume from a mid-epoch checkpoint:
  Lightning asks the *loader*; the language-model, probe and translation data modules save and restore
  their place in the epoch themselves (`state_dict` / `load_state_dict`), and the tests prove the resumed
  weights identical to the uninterrupted run's (tests/test_resume.py: the recurrent families' streams, a
  probe, a translation model; tests/test_attention_lm.py: the attention models' windows). Silenced for a
  data module that keeps its place.
- **"Your `IterableDataset` has `__len__` defined ... (when num_workers > 1)"**: printed for every
  iterable dataset whatever its workers; the warning is about several worker processes each yielding the
  whole stream. Silenced for a data module whose loaders run in this process (`num_workers` 0 or absent).
- **"Checkpoint directory <dir> exists and is not empty"** on a resume from a checkpoint in that folder:
  the checkpoints are what the run resumes from. Silenced for that folder only.
- **"Experiment logs directory <dir> exists and is not empty. Previous log files ... will be deleted"**
  on a resume in the run's own folder: `seqbench.training.run._keep_history` has `seqbench.training.csv_logger` keep the
  history up to the checkpoint's step. Silenced for the log folders it keeps, and no other (Lightning's
  stock CSVLogger, or one writing elsewhere, does delete them: there the warning is true).
- **"`isinstance(treespec, LeafSpec)` is deprecated"**: Lightning's own use of a torch API that torch
  2.13 deprecates; nothing a user of seqbench can change. Silenced where Lightning's code raises it.

The filters hold inside the run (`seqbench.training.run.train`, `seqbench.training.evaluate`) and are undone when it ends,
also when it fails. Processes that `trainer.strategy=ddp_spawn` starts do not inherit them: there the
warnings come back, one per worker.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lightning as L

NOT_RESUMABLE = "You're resuming from a checkpoint that ended before the epoch ended"
ITERABLE_LEN = "Your `IterableDataset` has `__len__` defined"
CHECKPOINT_DIR = "Checkpoint directory {} exists and is not empty"
LOGS_DIR = "Experiment logs directory {} exists and is not empty"
LEAF_SPEC = "`isinstance(treespec, LeafSpec)` is deprecated"


def keeps_its_place(datamodule) -> bool:
    """Whether the data module saves and restores its place in the epoch itself (its own `state_dict` /
    `load_state_dict`), so that a run resumed mid-epoch sees the batches the uninterrupted run would have."""
    return type(datamodule).load_state_dict is not L.LightningDataModule.load_state_dict


def loads_in_process(datamodule) -> bool:
    """Whether the data module's loaders run in this process (no worker processes to duplicate a stream)."""
    return not getattr(datamodule, "num_workers", 0)


def false_here(datamodule, kept_logs=(), resumed_from: str | None = None) -> list[tuple[str, str]]:
    """(message, module) pairs, regular expressions as `warnings.filterwarnings` reads them, of the warnings
    that are false for this run: `kept_logs`, the log folders whose history the run keeps; `resumed_from`,
    the checkpoint it resumes from."""
    found = [(re.escape(LEAF_SPEC), r"lightning\.")]
    if keeps_its_place(datamodule):
        found.append((re.escape(NOT_RESUMABLE), ""))
    if loads_in_process(datamodule):
        found.append((re.escape(ITERABLE_LEN), ""))
    if resumed_from:
        found.append((re.escape(CHECKPOINT_DIR.format(Path(resumed_from).parent)), ""))
    found += [(re.escape(LOGS_DIR.format(folder)), "") for folder in kept_logs]
    return found


@contextmanager
def false_warnings_silenced(datamodule, kept_logs=(), resumed_from: str | None = None) -> Iterator[None]:
    """Run the block with the warnings `false_here` names silenced; every other warning as before."""
    with warnings.catch_warnings():
        for message, module in false_here(datamodule, kept_logs, resumed_from):
            warnings.filterwarnings("ignore", message=message, module=module)
        yield
