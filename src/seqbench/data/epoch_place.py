"""Where a resumed run starts in its epoch: the one mechanism the data modules that keep their place share.

The language-model, probe and translation data modules save the next training batch of the epoch with
each checkpoint, so that a run resumed from a step checkpoint continues where it stopped instead of
training the epoch's first batches again (Lightning restarts a resumed epoch's loader from its start).
Their training batches carry `window`, the batch's number in the epoch; `EpochPlace` reads it as the
batch goes to the model, saves the next one (`state_dict`), and gives it back once, to the first loader
built for the epoch it was saved in (`resume_start`).

A checkpoint taken once the epoch's batches are all trained must start the next epoch at its first batch.
"All" is what Lightning trains of the epoch (`trainer.num_training_batches`, after
`limit_train_batches`), not the loader's length: with a limit, the next batch of the loader is not where
the next epoch begins. Lightning asks for the loader of a resumed run before it moves its epoch counter
on, so the loader cannot tell the two cases apart; the checkpoint has to (`next_batch`).
"""

from __future__ import annotations


def next_batch(trainer, window: int) -> int:
    """The batch a run resumed from a checkpoint taken now trains first: `window`, the epoch's next batch,
    or 0 where the epoch has no batch left to train (the next epoch starts at its beginning)."""
    trained = getattr(trainer, "num_training_batches", float("inf")) if trainer is not None else float("inf")
    return 0 if window >= trained else window


class EpochPlace:
    """Lightning data-module hooks that keep the place in the training epoch (mix in before
    `LightningDataModule`). `model_reads_window`: the model needs the batch's `window` (a recurrent stream
    resets its state at window 0); otherwise the key is removed before the model sees the batch."""

    model_reads_window = False
    _train_next_window = 0                                  # the next training batch of the epoch (saved)
    _train_epoch: int | None = None                         # the epoch it belongs to
    _resume_at: tuple[int | None, int] | None = None        # (epoch, batch) a loaded checkpoint restored

    def resume_start(self) -> int:
        """The first batch of the training loader being built: a restored checkpoint's place, once, and only
        in the epoch it was saved in; 0 for every other loader (an ordinary reload starts the epoch)."""
        (epoch, start), self._resume_at = self._resume_at or (None, 0), None
        trainer = getattr(self, "trainer", None)
        return 0 if epoch is not None and trainer is not None and epoch != trainer.current_epoch else start

    def on_before_batch_transfer(self, batch, dataloader_idx: int):
        if isinstance(batch, dict) and "window" in batch:
            if self.trainer is not None and self.trainer.training:
                self._train_next_window, self._train_epoch = batch["window"] + 1, self.trainer.current_epoch
            if not self.model_reads_window:
                batch = {k: v for k, v in batch.items() if k != "window"}
        return batch

    def state_dict(self) -> dict:
        return {"train_next_window": next_batch(self.trainer, self._train_next_window),
                "train_epoch": self._train_epoch}

    def load_state_dict(self, state_dict: dict) -> None:
        epoch = state_dict.get("train_epoch")  # absent in older checkpoints: the place alone, as before
        self._train_next_window = int(state_dict.get("train_next_window", 0))
        self._train_epoch = None if epoch is None else int(epoch)
        self._resume_at = (self._train_epoch, self._train_next_window)
