"""The throughput benchmark: runs on two tiny sizes, writes its CSV and plot, and skips what it must."""

from __future__ import annotations

import csv

import pytest

from seqbench.analysis import bench


def test_benchmark_runs_two_sizes_and_writes_csv_and_png(tmp_path):
    rows = bench.run(["ptb/lstm", "ptb/gpt"], lengths=[8, 16], batch_sizes=[2], vocab=50, repeats=1,
                     isolate=False, out=tmp_path, peak_tflops=1.0)
    with open(tmp_path / "bench.csv") as f:
        saved = list(csv.DictReader(f))
    assert [(r["family"], r["length"], r["status"]) for r in saved] == [
        ("ptb/lstm", "8", "ok"), ("ptb/lstm", "16", "ok"), ("ptb/gpt", "8", "ok"), ("ptb/gpt", "16", "ok")]
    for row in rows:
        assert row["tokens_per_s"] == pytest.approx(2 * row["length"] / (row["step_ms"] / 1000))
        assert row["mfu"] == pytest.approx(row["tflops"] / 1.0) and row["peak_mem_mb"] >= 0
    # matched presets: the same parameter budget, ~0.6M without embeddings
    assert rows[0]["params_non_embedding"] == pytest.approx(rows[2]["params_non_embedding"], rel=0.05)
    # attention adds 12 L d T FLOPs per token: twice T adds 12 * 3 layers * 128 * 8 for the GPT preset
    assert rows[3]["flops_per_token"] - rows[2]["flops_per_token"] == 12 * 3 * 128 * 8
    assert rows[1]["flops_per_token"] == rows[0]["flops_per_token"]  # an RNN's cost per token does not grow
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"


def test_a_slow_shorter_length_skips_the_longer_ones(tmp_path):
    rows = bench.run(["ptb/gru"], lengths=[4, 8], batch_sizes=[1], vocab=20, repeats=1, isolate=False,
                     max_step_s=0.0, peak_tflops=1.0)
    assert rows[0]["status"] == "ok" and rows[1]["status"].startswith("skipped: T=4 already took")
