"""What a run prints when it ends: its test scores and where its files are, in one line."""

from __future__ import annotations

import logging
import math

from conftest import TINY, TINY_RNN, compose_cfg
from seqbench.training.run import closing_line, train


def test_the_closing_line_gives_the_test_scores_and_the_files_there_are(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    for name in ("last.ckpt", "best-epoch003.ckpt"):
        (tmp_path / "checkpoints" / name).write_bytes(b"")
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "metrics.csv").write_text("step\n")
    (tmp_path / "train.log").write_text("")
    (tmp_path / "config_tree.log").write_text("")
    metrics = {"test/loss": 4.03187, "test/ppl": 56.3666, "test/acc": float("nan"), "test/solved": True,
               "val/loss": 3.9, "params": 10}
    line = closing_line(metrics, tmp_path, 3725.4)
    assert line.startswith("done in 1:02:05 · test/loss 4.032, test/ppl 56.37 · in ")
    assert "val/loss" not in line and "nan" not in line and "solved" not in line  # only finite test numbers
    assert line.endswith(": metrics.json, train.log, checkpoints/ (best-epoch003.ckpt, last.ckpt), csv/metrics.csv")
    evaluated = closing_line({"val/loss": 1.5, "test/loss": 9.0}, tmp_path / "empty", 1, scores="val/",
                             record="eval_metrics.json")
    assert evaluated == f"done in 0:00:01 · val/loss 1.5 · in {tmp_path / 'empty'}: eval_metrics.json"
    assert closing_line({}, tmp_path / "empty", 0).endswith("done in 0:00:00 · in " + str(tmp_path / "empty")
                                                             + ": metrics.json")


def test_a_run_ends_with_that_line(tmp_path, caplog):
    cfg = compose_cfg(TINY + TINY_RNN + ["model=lstm", "data=ptb"], tmp_path)
    with caplog.at_level(logging.INFO, logger="seqbench.training.run"):
        metrics = train(cfg, tmp_path)
    last = [r.getMessage() for r in caplog.records if r.name == "seqbench.training.run"][-1]
    assert last.startswith("done in ") and f"test/ppl {metrics['test/ppl']:.4g}" in last and "last.ckpt" in last
    assert math.isfinite(metrics["test/ppl"])
