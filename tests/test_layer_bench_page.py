"""The parallel-recurrences page's speed tables are the records' numbers (seqbench.reports.layer_bench_page)."""

from __future__ import annotations

from pathlib import Path

from seqbench.reports.layer_bench_page import (TRAIN_TARGETS, main, render, render_generation, render_targets,
                                              render_train, render_train_targets)

PAGE = Path(__file__).resolve().parents[1] / "experiments" / "parallel-recurrences.md"


def record(rows, device="cpu"):
    return {"device": device, "gpu_name": None, "cpu_model": "Test CPU", "threads": 1, "torch": "2.13.0",
            "bf16": False, "batch": 16, "width": 256, "repeats": 5, "warmup": 2, "date": "2026-11-26",
            "command": "python -m seqbench.analysis.layer_bench --device cpu", "results": rows}


def ok(method, T, tps, ratio=None):
    return {"method": method, "T": T, "status": "ok", "tokens_per_s": tps, "ratio_vs_lstm_fused": ratio}


def test_the_committed_page_is_what_its_records_make():
    assert main([str(PAGE), "--check"]) == 0, "run: python -m seqbench.reports.layer_bench_page " + str(PAGE)


def test_a_table_cell_is_the_methods_rate_and_its_ratio_at_that_length():
    text = render(record([ok("lstm_fused", 512, 30_000, 1.0), ok("mingru_loop", 512, 90_000, 3.0),
                          ok("lstm_fused", 2048, 20_000, 1.0),
                          {"method": "mingru_loop", "T": 2048, "status": "skipped: predicted 30 s"}]))
    assert "| mingru_loop | 90.0k (3.00x) | skipped |" in text
    assert "| T = 512 | T = 2,048 |" in text and "Test CPU, 1 thread(s)" in text


def test_a_target_is_judged_on_the_ratio_at_its_own_length_and_reference():
    rows = [ok("lstm_fused", 512, 30_000), ok("lstm_fused", 2048, 10_000), ok("attention_flash", 512, 60_000),
            ok("attention_flash", 2048, 10_000), ok("mingru_loop", 512, 40_000), ok("mingru_loop", 2048, 40_000)]
    text = render_targets(record(rows))
    # 40k / 30k = 1.33 misses 1.5 at T = 512; 40k / 10k = 4 meets 1.3 at 2,048: a ratio from another T or
    # against the other reference would turn these around
    assert "| mingru_loop | lstm_fused | 512 | ≥ 1.5x | 1.33x | **no** |" in text
    assert "| mingru_loop | lstm_fused | 2,048 | ≥ 1.3x | 4.00x | yes |" in text
    assert "| mingru_loop | attention_flash | 512 | ≥ 1.7x | 0.67x | **no** |" in text
    assert "| minlstm_loop | lstm_fused | 512 | ≥ 1.5x | not measured | – |" in text
    assert "cuda" not in text and "mingru_doubling" not in text  # the GPU's targets are not the CPU's


def test_a_generation_cell_is_the_familys_rate_its_ratio_to_the_baseline_and_its_memory():
    rows = [{"method": "p/lstm", "T": 128, "status": "ok", "tokens_per_s": 2000.0, "ratio_vs_p/lstm": 1.0,
             "peak_memory_bytes": 3 * 2**20, "context": None},
            {"method": "p/gpt", "T": 128, "status": "ok", "tokens_per_s": 500.0, "ratio_vs_p/lstm": 0.25,
             "peak_memory_bytes": 12 * 2**20, "context": 64},
            {"method": "p/gpt", "T": 2048, "status": "skipped: predicted 30 s"}]
    text = render_generation({**record(rows), "batch": 8, "new_tokens": 128, "vocab": 65, "baseline": "p/lstm",
                              "clock": "cpu"})
    assert "| p/lstm | none | 2,000 (1.00x), 3 MiB | – |" in text
    assert "| p/gpt | 64 | 500 (0.25x), 12 MiB | skipped |" in text
    assert "B = 8, 128 tokens generated" in text and "cpu clock" in text


def bench_row(family, length, tps):
    return {"family": family, "batch": 32, "length": length, "status": "ok", "tokens_per_s": tps,
            "peak_mem_mb": 10.0, "params_non_embedding": 1000}


def test_the_training_target_is_the_mingru_over_the_lstm_at_the_training_window():
    """At T = 64 the minGRU runs 1.1x the LSTM (the target, 1.2x, missed); at 256 it runs 2x: a ratio
    read at another length, or against the minGRU's own row, would pass it."""
    mingru = TRAIN_TARGETS[0][0]
    rows = [bench_row("shakespeare/lstm", 64, 10_000), bench_row("shakespeare/lstm", 256, 10_000),
            bench_row(mingru, 64, 11_000), bench_row(mingru, 256, 20_000)]
    rec = {**record(rows), "vocab": 65, "clock": "cpu"}
    assert f"| {mingru} | shakespeare/lstm | 64 | ≥ 1.2x | 1.10x | **no** |" in render_train_targets(rec)
    table = render_train(rec)
    assert f"| {mingru} | 1,000 | 11.0k (1.10x), 10 MB | 20.0k (2.00x), 10 MB |" in table
    assert "ratios to shakespeare/lstm" in table


def test_issue_69s_targets_judge_the_ssd_and_the_mamba_block_against_the_lstm_and_the_peers():
    from seqbench.reports.layer_bench_page import render_targets_69

    rows = [ok("lstm_fused", 512, 20_000), ok("lstm_fused", 2048, 20_000), ok("ssd_chunked", 512, 32_000),
            ok("ssd_chunked", 2048, 30_000), ok("ssm_loop", 512, 12_000), ok("ssm_loop", 2048, 9_000),
            ok("mambapy_pscan", 512, 2_000), ok("mambapy_pscan", 2048, 2_000), ok("ssd_minimal", 512, 8_000)]
    text = render_targets_69({**record(rows), "peers": {"mambapy": "1.2.0"}})
    assert "| ssd_chunked | lstm_fused | 512 | ≥ 1.5x | 1.60x | yes |" in text
    assert "| ssd_chunked | lstm_fused | 2,048 | ≥ 2x | 1.50x | **no** |" in text
    assert "| ssm_loop | mambapy_pscan | 512 | ≥ 5x | 6.00x | yes |" in text
    assert "| ssm_loop | mambapy_pscan | 2,048 | ≥ 5x | 4.50x | **no** |" in text
    assert "| ssd_chunked | ssd_minimal | 512 | none | 4.00x | – |" in text  # a ratio shown, not judged
    assert "| ssd_chunked | ssd_minimal | 2,048 | none | not measured | – |" in text
    assert "peers: mambapy 1.2.0" in render({**record(rows), "peers": {"mambapy": "1.2.0", "mamba_ssm": None}})
