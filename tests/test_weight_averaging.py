"""experiment=sst2_bilstm validates, checkpoints and tests the moving average of the weights.

Lightning's EMAWeightAveraging swaps the average in for validation and writes it as the checkpoint's
`state_dict` (the raw weights go to `current_model_state`). What matters to us is that the three agree:
the validation score that picks the best epoch is the score of the weights that get tested. If the
swap did not happen, the checkpoint would hold one set of weights and the choice would be made on
another, and this test would see different validation losses.
"""

from __future__ import annotations

import json

import pytest
import torch

from seqbench.training.run import build, make_trainer, train

EMA_RUN = ["experiment=sst2_bilstm", "trainer.max_epochs=2", "model.char_features=8",
           "callbacks.best_checkpoint.monitor=val/loss", "callbacks.best_checkpoint.mode=min",
           "callbacks.weights_ema.decay=0.9"]


@pytest.mark.corpus("sst2")
def test_the_tested_checkpoint_holds_the_weights_that_were_validated(cfg_factory, tmp_path):
    cfg = cfg_factory(EMA_RUN)
    metrics = train(cfg, tmp_path, choices={"model": "lstm", "data": "sst2"})
    assert metrics["status"] == "completed"
    best = metrics["tested_checkpoint"]
    ckpt = torch.load(best, map_location="cpu", weights_only=True)
    average, raw = ckpt["state_dict"], ckpt["current_model_state"]
    assert any(not torch.equal(average[k], raw[k]) for k in average)  # an average, not a copy

    # validate the checkpoint's two weight sets in a fresh trainer with no averaging callback
    def val_loss(state: dict) -> float:
        plain = cfg_factory([*EMA_RUN, "~callbacks.weights_ema"])
        datamodule, model = build(plain)
        model.load_state_dict(state)
        return make_trainer(plain).validate(model, datamodule=datamodule, verbose=False)[0]["val/loss"]

    def test_loss(state: dict) -> float:
        plain = cfg_factory([*EMA_RUN, "~callbacks.weights_ema"])
        datamodule, model = build(plain)
        model.load_state_dict(state)
        return make_trainer(plain).test(model, datamodule=datamodule, verbose=False)[0]["test/loss"]

    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert val_loss(average) == pytest.approx(on_disk["val/loss_best"], rel=1e-5)
    assert val_loss(raw) != pytest.approx(on_disk["val/loss_best"], rel=1e-3)
    # and the test scores that same average (Lightning's own callback put the raw weights back first)
    assert test_loss(average) == pytest.approx(on_disk["test/loss"], rel=1e-5)
    assert test_loss(raw) != pytest.approx(on_disk["test/loss"], rel=1e-3)
