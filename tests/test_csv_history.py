"""A run resumed in its own directory keeps the CSV history it logged before the stop.

The bug: Lightning's CSV writer deletes an existing `metrics.csv` when it is created, so a job of the
resumable launcher resumed after a session stop kept only the validations of its last segment (the
archived PTB final cells: 5 of 51 with a cut curve, one with none), and the frontier, the learning
curves and the report's best validation perplexity read that remnant."""

from __future__ import annotations

import csv

from conftest import TINY, TINY_RNN, compose_cfg
from seqbench.training.record import read_curve
from seqbench.training.run import train

ARGS = [a for a in TINY if "max_epochs" not in a and "limit_train" not in a] + TINY_RNN + [
    "data.batch_size=4", "data.bptt=8", "test=false", "trainer.max_epochs=-1", "trainer.val_check_interval=2",
    "trainer.limit_train_batches=null", "callbacks.step_checkpoint.every_n_train_steps=4", "~callbacks.best_checkpoint",
]


def _val_steps(run_dir) -> list[int]:
    return [int(row["step"]) for row in read_curve(run_dir / "csv" / "metrics.csv")]


def test_a_run_resumed_in_its_own_directory_keeps_the_validations_before_the_stop(tmp_path):
    run = tmp_path / "run"
    train(compose_cfg(ARGS + ["trainer.max_steps=4"], run), run)  # stopped after step 4: last.ckpt at 4
    before = _val_steps(run)
    assert len(before) == 2
    with open(run / "csv" / "metrics.csv", "a", newline="") as f:  # a validation logged after the checkpoint,
        row = {"step": 5, "val/ppl": 1.0}                              # which the resumed run repeats
        writer = csv.DictWriter(f, fieldnames=next(csv.reader(open(run / "csv" / "metrics.csv"))))
        writer.writerow(row)
    train(compose_cfg(ARGS + ["trainer.max_steps=8"], run), run)  # the same directory: resumes from last.ckpt
    after = read_curve(run / "csv" / "metrics.csv")
    assert [int(r["step"]) for r in after][:2] == before and len(after) == 4
    assert all(r["val/ppl"] != 1.0 for r in after)  # the row past the checkpoint went


def test_a_fresh_run_in_a_directory_with_an_old_history_starts_a_new_one(tmp_path):
    run = tmp_path / "run"
    train(compose_cfg(ARGS + ["trainer.max_steps=4"], run), run)
    (run / "checkpoints" / "last.ckpt").unlink()  # nothing to resume: Lightning's own behaviour, a new file
    train(compose_cfg(ARGS + ["trainer.max_steps=2"], run), run)
    assert len(_val_steps(run)) == 1


def test_a_run_whose_history_was_lost_reports_its_best_checkpoint_s_perplexity():
    # bug caught: the report's validation perplexity "–" for a run resumed after its training had ended
    # (no validation in the last process, its history deleted): the PTB final cell minlstm 0.28M @ 1e12
    import math

    from seqbench.training.record import Run

    lost = Run("37", "minlstm", {"status": "completed", "val/ppl": None, "val/loss_best": 5.946, "test/ppl": 366.2})
    assert lost.best_val_ppl() == math.exp(5.946)
    kept = Run("36", "minlstm", {"val/loss_best": 5.0, "test/ppl": 150.0}, curve=[{"val/ppl": 160.0}, {"val/ppl": 155.0}])
    assert kept.best_val_ppl() == 155.0
    assert Run("c", "lstm", {"val/loss_best": 0.3, "test/acc": 0.9}).best_val_ppl() is None  # no perplexity task
