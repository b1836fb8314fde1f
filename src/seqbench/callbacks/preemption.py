"""Save `last.ckpt` when the run is told to stop (SIGTERM: SLURM pre-empting or cancelling a job), so a
requeued job continues from the step it reached rather than from the last periodic checkpoint.

Lightning turns SIGTERM into a `SIGTERMException` at the end of the batch it arrives in (a clean
point: the optimizer step is done) and hands it to every callback's `on_exception`; this one writes
the checkpoint there. `seqbench.training.run.train` resumes from `checkpoints/last.ckpt` when a job starts in
a directory that holds one, which is what a requeued job does (hydra/launcher=slurm).
"""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

log = logging.getLogger(__name__)


class CheckpointOnSignal(L.Callback):
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        ckpt = trainer.checkpoint_callback
        if not isinstance(exception, SIGTERMException) or ckpt is None or ckpt.dirpath is None:
            return
        path = Path(ckpt.dirpath) / "last.ckpt"
        if path.is_symlink():  # save_last="link" points at another checkpoint: write a file of its own
            path.unlink()
        trainer.save_checkpoint(path)  # every rank takes part; rank zero writes
        log.info("stopped by SIGTERM at step %d: saved %s, which a requeued job resumes from",
                 trainer.global_step, path)


def requeued_checkpoint(trainer: L.Trainer) -> str | None:
    """`last.ckpt` of this run's checkpoint folder when it exists: the job ran here before and was stopped."""
    ckpt = trainer.checkpoint_callback
    path = Path(ckpt.dirpath) / "last.ckpt" if ckpt is not None and ckpt.dirpath else None
    return str(path) if path is not None and path.is_file() else None
