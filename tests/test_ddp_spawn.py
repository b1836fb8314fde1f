"""The Scaling-out advice for one machine: a multirun whose jobs train with `trainer.strategy=ddp_spawn`.

Fit and test each run in freshly spawned processes; the test stage's CSV logger used to meet the
training history it had not written and fail ("dict contains fields not in fieldnames"). With the
default loggers (W&B offline + CSV) both stages finish, and the history keeps both.
"""

from __future__ import annotations

import csv
import json

import pytest

from conftest import run_cli


@pytest.mark.slow
def test_a_multirun_of_ddp_spawn_jobs_fits_and_tests_with_the_default_loggers(tmp_path):
    r = run_cli(["-m", "model=lstm", "data=ptb", "model.hidden_size=16", "trainer=ddp_cpu",
                 "trainer.strategy=ddp_spawn", "trainer.max_epochs=1", "trainer.limit_train_batches=4",
                 "trainer.limit_val_batches=2", "trainer.limit_test_batches=2", "trainer.num_sanity_val_steps=0",
                 "seed=1"], tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    jobs = sorted(tmp_path.glob("multiruns/*/[0-9]"))
    assert len(jobs) == 1
    for job in jobs:
        metrics = json.loads((job / "metrics.json").read_text())
        assert metrics["status"] == "completed" and metrics["world_size"] == 2
        assert metrics["test/ppl"] > 1 and metrics["val/ppl"] > 1
        with open(job / "csv" / "metrics.csv") as f:
            rows = list(csv.DictReader(f))
        assert any(row["train/loss_epoch"] for row in rows) and any(row["test/ppl"] for row in rows)
        assert any((job / "wandb").glob("offline-run-*"))
