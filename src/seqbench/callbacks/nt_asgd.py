"""Non-monotonically triggered averaged SGD (NT-ASGD; Merity et al. 2018, §3).

Train with plain SGD; at every validation, if the loss is worse than the best of all checks but the
last `nonmono`, switch to averaging: from then on, keep the uniform average of the weights after
every step (Polyak & Juditsky 1992) and validate, checkpoint and test that average. AWD-LSTM does
this by swapping its optimizer for `torch.optim.ASGD(t0=0, lambd=0)`, which is SGD with the same LR
plus the running average; here the optimizer keeps stepping unchanged and Lightning's
`WeightAveraging` keeps the average (an `AveragedModel`, equal weights: SWA's rule), which gives
the same two trajectories and reuses what Lightning already does: swap the average in for every
validation, write it as the checkpoint's `state_dict` (the raw weights as `current_model_state`),
restore both on resume, and leave it in the model when training ends.

A time-budgeted run rarely lives long enough for the criterion (AWD-LSTM's PTB model first
triggers after ~100 epochs; a 60-minute CPU run sees about a dozen), and SGD at a constant LR of 30
without the average is far from its best. `latest` (a fraction of the training budget: of
`max_time` when the trainer has one, else of `max_steps` / `max_epochs`) switches at the first
validation past that point if the criterion has not fired by then: the same average, started at a
known time. None keeps the paper's rule alone.

Before the trigger there is no average: validation, checkpoints and the final model are the raw
weights, exactly as without the callback. The validation history and the trigger are part of the
callback's checkpoint state, so a resumed run switches at the same check.
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Timer, WeightAveraging
from lightning.pytorch.trainer.states import TrainerFn

log = logging.getLogger(__name__)


def nonmonotone_trigger(history: list[float], loss: float, nonmono: int) -> bool:
    """AWD-LSTM's criterion: `loss` (the newest check) is worse than the best of all checks in
    `history` (the earlier ones) except the last `nonmono` of them."""
    return len(history) > nonmono and loss > min(history[:-nonmono])


def budget_fraction(trainer: L.Trainer) -> float:
    """How much of the training budget is spent: of `max_time` (Lightning's Timer, which a resumed
    run restores) when set, else of `max_steps`, else of `max_epochs`; 0 without any bound."""
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    if timer is not None and timer._duration:
        return timer.time_elapsed("train") / timer._duration
    if trainer.max_steps and trainer.max_steps > 0:
        return trainer.global_step / trainer.max_steps
    if trainer.max_epochs and trainer.max_epochs > 0:
        return trainer.current_epoch / trainer.max_epochs
    return 0.0


class NTASGD(WeightAveraging):
    def __init__(self, nonmono: int = 5, monitor: str = "val/loss", latest: float | None = None) -> None:
        super().__init__()  # no avg_fn: AveragedModel's equal-weight average of every step since the switch
        if nonmono < 1:
            raise ValueError(f"NTASGD needs nonmono >= 1, got {nonmono}")
        if latest is not None and not 0.0 < latest < 1.0:
            raise ValueError(f"NTASGD's latest is a fraction of the training budget in (0, 1), got {latest}")
        self.nonmono, self.monitor, self.latest = nonmono, monitor, latest
        self.history: list[float] = []
        self.averaging = False  # switched to ASGD
        self.switched_at: int | None = None  # the global step of the switch
        self._swapped = False

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        return step_idx is not None and self.averaging

    def _has_average(self) -> bool:
        return self._average_model is not None and int(self._average_model.n_averaged) > 0

    # -- the trigger: after each validation of the raw weights -------------------------------------
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        loss = float(trainer.callback_metrics[self.monitor])
        if not self.averaging and nonmonotone_trigger(self.history, loss, self.nonmono):
            self.averaging, self.switched_at = True, trainer.global_step
            log.info("NT-ASGD: %s %.4f is worse than the best %.4f before the last %d checks; averaging the "
                     "weights from step %d", self.monitor, loss, min(self.history[:-self.nonmono], default=float("nan")), self.nonmono,
                     trainer.global_step)
        elif not self.averaging and self.latest is not None and budget_fraction(trainer) >= self.latest:
            self.averaging, self.switched_at = True, trainer.global_step
            log.info("NT-ASGD: %.0f%% of the training budget spent without the non-monotone trigger; averaging "
                     "the weights from step %d", 100 * self.latest, trainer.global_step)
        self.history.append(loss)

    # -- no average yet: behave as if the callback were absent ------------------------------------
    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._swapped = self._has_average()
        if self._swapped:
            self._swap_models(pl_module)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._swapped:
            self._swap_models(pl_module)
            self._swapped = False

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._has_average():
            self._copy_average_to_current(pl_module)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        if self._has_average():
            super().on_save_checkpoint(trainer, pl_module, checkpoint)

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # Only a resumed fit takes the raw weights back. Lightning's WeightAveraging also does so in
        # `trainer.test(ckpt_path=...)` after a fit (its AveragedModel still exists then), which would
        # test the raw weights instead of the average the checkpoint's state_dict holds.
        if trainer.state.fn == TrainerFn.FITTING and "current_model_state" in checkpoint:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "history": list(self.history), "averaging": self.averaging,
                "switched_at": self.switched_at}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.history = [float(v) for v in state_dict.get("history", [])]
        self.averaging = bool(state_dict.get("averaging", False))
        self.switched_at = state_dict.get("switched_at")
