"""The long-range report reads a sweep's job directories into a family x T table and a plot."""

from __future__ import annotations

import json

import yaml

from seqbench.analysis.long_range_report import main


def _job(root, num, family, T, acc, loss, status="completed"):
    job = root / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"data": {"T": T}}))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"runtime": {"choices": {"family": f"probe/{family}", "model": "lstm"}}}}))
    metrics = {"status": status, "test/acc": acc, "test/loss": loss, "val/baseline_acc": 0.125,
               "val/baseline_loss": 2.0794, "params": 1000, "overrides": f"+family=probe/{family} data.T={T}"}
    (job / "metrics.json").write_text(json.dumps(metrics))


def test_table_and_plot_from_a_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    _job(sweep, 0, "lstm", 50, 0.9, 0.3)
    _job(sweep, 1, "lstm", 500, 0.125, 2.08)
    _job(sweep, 2, "transformer", 50, 1.0, 0.01)
    _job(sweep, 3, "transformer", 500, None, None, status="failed")
    result = main([str(sweep), "--out", str(tmp_path / "out")])
    lines = result["table"].splitlines()
    assert "| family (params) | T = 50 | T = 500 |" in lines
    assert "| lstm (1,000) | 0.900 | 0.125 |" in lines
    assert "| transformer (1,000) | 1.000 | failed |" in lines
    assert "| trivial baseline | 0.125 | 0.125 |" in lines
    assert "| lstm (1,000) | 0.300 | 2.080 |" in lines  # the loss table
    assert result["png"].stat().st_size > 5000
    assert "Failed jobs" in result["report"].read_text()
