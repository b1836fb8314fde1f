"""StopWhenSolved stops at the first validation that meets the threshold and records its step."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

from seqbench.callbacks import StopWhenSolved
from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError

EVERY = 5  # training steps between validations


class FakeMetric(BoringModel):
    """Logs `name` = the next value of a fixed sequence at each validation."""

    def __init__(self, values, name="val/acc", solved=None):
        super().__init__()
        self.values, self.name, self.validations = list(values), name, 0
        self.spec = TaskSpec(task="regression", extras={"solved": solved} if solved else None)

    def validation_step(self, batch, batch_idx):
        return None

    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        self.log(self.name, self.values[self.validations])
        self.validations += 1


def fit(model, callback, max_steps=40):
    trainer = L.Trainer(max_steps=max_steps, val_check_interval=EVERY, limit_val_batches=1, callbacks=[callback],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu")
    trainer.fit(model)
    return trainer


def test_stops_at_the_first_validation_at_or_above_the_threshold():
    model = FakeMetric([0.5, 0.98, 0.99, 1.0, 0.2, 0.2, 0.2, 0.2])  # 0.99 itself counts: the threshold is inclusive
    callback = StopWhenSolved(monitor="val/acc", threshold=0.99, mode="max")
    trainer = fit(model, callback)
    assert model.validations == 3 and trainer.global_step == 3 * EVERY
    assert callback.summary() == {"solved": True, "steps_to_solve": 15, "solve_criterion": "val/acc >= 0.99"}


def test_the_criterion_comes_from_the_data_and_min_mode_stops_at_or_below():
    solved = {"monitor": "val/mse", "threshold": 0.01, "mode": "min"}
    model = FakeMetric([0.17, 0.1, 0.02, 0.0101, 0.01, 0.001, 0.5, 0.5], name="val/mse", solved=solved)
    callback = StopWhenSolved()
    trainer = fit(model, callback)
    assert trainer.global_step == 5 * EVERY
    assert callback.summary()["steps_to_solve"] == 25 and callback.summary()["solve_criterion"] == "val/mse <= 0.01"


def test_an_unsolved_run_trains_to_the_cap_without_patience():
    model = FakeMetric([0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])  # never improving after the first: no patience stop
    callback = StopWhenSolved(monitor="val/acc", threshold=0.99, mode="max")
    trainer = fit(model, callback)
    assert trainer.global_step == 40 and model.validations == 8
    assert callback.summary() == {"solved": False, "steps_to_solve": None, "solve_criterion": "val/acc >= 0.99"}


def test_data_without_a_criterion_is_never_stopped_and_a_partial_one_fails_in_one_sentence():
    callback = StopWhenSolved()
    trainer = fit(FakeMetric([1.0] * 8), callback)
    assert trainer.global_step == 40 and callback.summary() == {}
    with pytest.raises(ConfigError, match="needs monitor, threshold and mode"):
        fit(FakeMetric([1.0] * 8), StopWhenSolved(threshold=0.5))
