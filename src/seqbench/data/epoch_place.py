"""Where a resumed run starts in its epoch: the one rule the data modules that keep their place share.

The language-model, probe and translation data modules save the next training batch of the epoch with
each checkpoint (`state_dict`), so that a run resumed from a step checkpoint continues where it stopped
instead of training the epoch's first batches again. A checkpoint taken once the epoch's batches are all
trained must start the next epoch at its first batch. "All" is what Lightning trains of the epoch
(`trainer.num_training_batches`, after `limit_train_batches`), not the loader's length: with a limit, the
next batch of the loader is not where the next epoch begins. Lightning asks for the loader of a resumed
run before it moves its epoch counter on, so the loader cannot tell the two cases apart; the checkpoint
has to.
"""

from __future__ import annotations


def next_batch(trainer, window: int) -> int:
    """The batch a run resumed from a checkpoint taken now trains first: `window`, the epoch's next batch,
    or 0 where the epoch has no batch left to train (the next epoch starts at its beginning)."""
    trained = getattr(trainer, "num_training_batches", float("inf")) if trainer is not None else float("inf")
    return 0 if window >= trained else window
