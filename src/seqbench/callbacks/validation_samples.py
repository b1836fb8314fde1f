"""A W&B table of what the model does on fixed validation examples, at every validation.

Numbers say how much a model improved; samples say how. The task decides what a sample is
(`samples(model, batch, n)` in `seqbench/tasks/`): greedy continuations of fixed prompts for a
language model, source / reference / hypothesis for translation, gold against predicted spans for
tagging, the misclassified examples of a fixed pool for classification (images shown as pictures),
target against prediction for regression, masked pieces against guesses for MLM pre-training.
This callback gives every task the same examples each time — the first validation batch, which
evaluation loaders never shuffle — computed inside validation (after the batch's own step, so with
the weights being validated, e.g. Lightning's EMA average), and logs them as `val/samples` with
the epoch in the first column, at the trainer's global step.

Only runs with a W&B logger compute anything; the samples draw no random numbers (greedy decoding,
eval mode), so a resumed run replays exactly as without them.
"""

from __future__ import annotations

import lightning as L
import torch

KEY = "val/samples"


def wandb_loggers(trainer) -> list:
    """The trainer's W&B loggers, by class name (wandb itself is imported only where a run logs to it)."""
    return [lg for lg in trainer.loggers if type(lg).__name__ == "WandbLogger"]


class ValidationSamples(L.Callback):
    def __init__(self, rows: int = 8) -> None:
        self.rows = rows
        self._pending: tuple[list[str], list[list]] | None = None

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        if batch_idx or dataloader_idx or trainer.sanity_checking or not trainer.is_global_zero:
            return
        make = getattr(getattr(pl_module, "task", None), "samples", None)
        if make is None or not wandb_loggers(trainer):
            return
        with torch.no_grad():
            self._pending = make(pl_module, batch, self.rows)

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if self._pending is None:
            return
        columns, rows = self._pending
        self._pending = None
        data = [[trainer.current_epoch, *(_cell(v) for v in row)] for row in rows]
        for logger in wandb_loggers(trainer):
            logger.log_table(KEY, columns=["epoch", *columns], data=data, step=trainer.global_step)


def _cell(value):
    """A picture for an image tensor (C, H, W) or (H, W); everything else as it is."""
    if isinstance(value, torch.Tensor) and value.dim() in (2, 3):
        import wandb

        return wandb.Image(value)
    return value
