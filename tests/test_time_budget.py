"""`trainer.max_time` is a wall-clock budget: training stops when it is spent, mid-epoch if need be,
validates once more and tests the best checkpoint. The default trainer once set `min_epochs: 1`,
which made Lightning ignore the timer until the first epoch ended (a 60-second SST-2 budget ran
for 3 minutes; a Multi30k epoch is longer still)."""

from __future__ import annotations

import json
import math

from conftest import run_cli

PTB_TRAIN_TOKENS = 929_589 + 42_068  # words + one <eos> per line


def test_a_time_budget_stops_training_inside_the_first_epoch(tmp_path):
    r = run_cli(["model=lstm", "data=ptb", "model.hidden_size=16", "model.num_layers=1",
                 "trainer.max_time=00:00:00:02", "trainer.max_epochs=1", "trainer.limit_val_batches=5",
                 "trainer.limit_test_batches=5", "trainer.num_sanity_val_steps=0", "logger=csv"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads(next(tmp_path.glob("runs/*/metrics.json")).read_text())
    # an epoch of PTB is ~1,390 batches of 20 x 35 tokens; 2 s of a 16-unit LSTM trains a small part of it
    assert 0 < metrics["curve/tokens"] < PTB_TRAIN_TOKENS / 2, metrics["curve/tokens"]
    assert 0 < metrics["cpu_time_s"] and 0 < metrics["wall_time_s"]  # both clocks recorded
    assert metrics["tested_checkpoint"], "the stopped run validated and saved a best checkpoint"
    assert math.isfinite(metrics["test/ppl"]) and metrics["test/ppl"] < 10_000  # below uniform over 10k words
