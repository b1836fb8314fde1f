"""Train until solved: stop at the first validation that meets the task's solve threshold.

A probe is "solved" at a fixed level of its validation metric (copy and recall: `val/acc` >= 0.99,
adding: `val/mse` <= 0.01; `seqbench.data.synthetic` puts the criterion in
`spec.extras["solved"]`), so a run can go on to a step cap large enough for the slow learners and
stop as soon as it gets there. This is Lightning's `EarlyStopping` with `stopping_threshold` and no
patience (an unsolved run trains to `trainer.max_steps`); it adds only the record of *when*:
`steps_to_solve`, the global step of the first validation that met the threshold (None if none
did), which `seqbench.training.run` writes into the run's record with `solved` and the criterion. Its
resolution is the validation interval. A metric that turns NaN or infinite also stops the run
(EarlyStopping's `check_finite`), unsolved.

The threshold is inclusive (acc >= 0.99); Lightning compares strictly, so it is handed a value one
`EPS` beyond it, far below the metrics' resolution (1/10,000 on 1,000 copy examples).
"""

from __future__ import annotations

import sys

from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason

from seqbench.errors import ConfigError

EPS = 1e-6


class StopWhenSolved(EarlyStopping):
    def __init__(self, monitor: str | None = None, threshold: float | None = None, mode: str | None = None) -> None:
        """Unset, `monitor`, `threshold` and `mode` come from the data's `spec.extras["solved"]`."""
        self.criterion = {"monitor": monitor, "threshold": threshold, "mode": mode}
        super().__init__(monitor=monitor or "", mode=mode or "max", patience=sys.maxsize,
                         check_on_train_epoch_end=False)
        self.steps_to_solve: int | None = None
        self.active = False

    def setup(self, trainer, pl_module, stage: str) -> None:
        given = {k: v for k, v in self.criterion.items() if v is not None}
        extras = getattr(getattr(pl_module, "spec", None), "extras", None) or {}
        criterion = {**(extras.get("solved") or {}), **given}
        self.active = len(criterion) == 3
        if not self.active:
            if given:  # asked for by hand, incompletely, on data with no criterion of its own
                raise ConfigError(f"callbacks.stop_when_solved needs monitor, threshold and mode on this data "
                                  f"(got {given}).")
            return  # data with no solve criterion (a corpus): never stops a run
        if criterion["mode"] not in self.mode_dict:
            raise ConfigError(f"callbacks.stop_when_solved.mode must be min or max, got {criterion['mode']!r}.")
        self.monitor, self.mode, self.threshold = criterion["monitor"], criterion["mode"], float(criterion["threshold"])
        self.stopping_threshold = self.threshold + (EPS if self.mode == "min" else -EPS)
        self.best_score = self.best_score.abs() * (1 if self.mode == "min" else -1)  # +inf for min, -inf for max
        super().setup(trainer, pl_module, stage)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not self.active:
            return
        super().on_validation_end(trainer, pl_module)
        if self.steps_to_solve is None and self.stopping_reason == EarlyStoppingReason.STOPPING_THRESHOLD:
            self.steps_to_solve = trainer.global_step

    def summary(self) -> dict:
        """For the run's record: whether and when the run met the threshold."""
        if not self.active:
            return {}
        sign = ">=" if self.mode == "max" else "<="
        return {"solved": self.steps_to_solve is not None, "steps_to_solve": self.steps_to_solve,
                "solve_criterion": f"{self.monitor} {sign} {self.threshold:g}"}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "steps_to_solve": self.steps_to_solve}

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.steps_to_solve = state_dict.get("steps_to_solve")
