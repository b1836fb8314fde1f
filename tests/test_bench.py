"""The throughput benchmark: runs on two tiny sizes, writes its CSV and plot, and skips what it must."""

from __future__ import annotations

import csv
import itertools
import json
import time
from types import SimpleNamespace

import pytest
import torch

from seqbench.analysis import bench


# training FLOPs per token of the presets at vocabulary 50, written out from their sizes (3 x forward):
# ptb/lstm: 2 LSTM layers of 191 on a 191-wide embedding, 2·4·191·(191 + 191) each, and the 191 x 50 output;
# ptb/gpt: 3 layers of d = 128 (QKV + output 8d², FFN 2·2·d·4d, attention 4·T·d) and the 128 x 50 output
LSTM_FLOPS = 3 * (2 * (2 * 4 * 191 * (191 + 191)) + 2 * 191 * 50)  # 3,559,476
GPT_FLOPS = {T: 3 * (3 * (8 * 128**2 + 4 * 128 * 512 + 4 * T * 128) + 2 * 128 * 50) for T in (8, 16)}


def test_benchmark_runs_two_sizes_and_writes_csv_and_png(tmp_path, monkeypatch):
    """On a clock that moves 0.25 s per reading, each timed step takes 0.25 s: the rates follow by hand."""
    clock = itertools.count(0.0, 0.25)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    rows = bench.run(["ptb/lstm", "ptb/gpt"], lengths=[8, 16], batch_sizes=[2], vocab=50, repeats=1,
                     isolate=False, out=tmp_path, peak_tflops=2.0, command="python -m seqbench.analysis.bench x")
    with open(tmp_path / "bench.csv") as f:
        saved = list(csv.DictReader(f))
    assert [(r["family"], r["length"], r["status"]) for r in saved] == [
        ("ptb/lstm", "8", "ok"), ("ptb/lstm", "16", "ok"), ("ptb/gpt", "8", "ok"), ("ptb/gpt", "16", "ok")]
    assert [row["step_ms"] for row in rows] == [250.0] * 4
    assert [row["tokens_per_s"] for row in rows] == [64.0, 128.0, 64.0, 128.0]  # B·T tokens in 0.25 s
    flops = [LSTM_FLOPS, LSTM_FLOPS, GPT_FLOPS[8], GPT_FLOPS[16]]
    assert [row["flops_per_token"] for row in rows] == flops
    for row, per_token in zip(rows, flops):
        assert row["mfu"] == pytest.approx(per_token * row["tokens_per_s"] / 1e12 / 2.0)  # of a 2 TFLOP/s peak
    # matched presets: the same parameter budget, ~0.6M without embeddings
    assert rows[0]["params_non_embedding"] == pytest.approx(rows[2]["params_non_embedding"], rel=0.05)
    # attention adds 12 L d T FLOPs per token: twice T adds 12 * 3 layers * 128 * 8 for the GPT preset
    assert rows[3]["flops_per_token"] - rows[2]["flops_per_token"] == 12 * 3 * 128 * 8
    assert rows[1]["flops_per_token"] == rows[0]["flops_per_token"]  # an RNN's cost per token does not grow
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    record = json.loads((tmp_path / "bench.json").read_text())  # what a page renders its table from
    assert record["results"] == json.loads(json.dumps(rows)) and record["command"] == "python -m seqbench.analysis.bench x"
    assert record["device"] == "cpu" and record["torch"] == torch.__version__ and record["clock"] == "wall"


def test_the_cpu_clock_times_a_step_by_the_processs_cpu_time(monkeypatch):
    """Wall time runs 0.25 s a reading and CPU time 0.5 s: with --clock cpu a step takes the CPU's."""
    wall, cpu = itertools.count(0.0, 0.25), itertools.count(0.0, 0.5)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: next(wall), process_time=lambda: next(cpu)))
    (row,) = bench.run(["ptb/lstm"], lengths=[8], batch_sizes=[2], vocab=50, repeats=1, isolate=False,
                       peak_tflops=2.0, clock="cpu")
    assert row["step_ms"] == 500.0 and row["tokens_per_s"] == 32.0


def test_peak_memory_and_step_time_are_within_what_the_step_must_cost():
    """Bounds a broken measurement misses, on a case big enough for them to bite (~10 s). Memory: a
    step's logits, (B, T, V) float32, live through its backward pass, so the peak is at least their
    size; at 40 MB and more the allocator maps them fresh, so memory this process freed before cannot
    hide them (a peak not reset, or the resident size read instead of its high-water mark, reports
    less). Time: each case runs two steps (one untimed, one timed) inside the call, so the steps fit
    in its wall time; and no CPU thread computes 1 TFLOP/s in float32, so a step takes at least its
    FLOPs at that rate (a time in the wrong unit, or of part of the step, breaks one bound)."""
    B, V = 4, 10_000
    started = time.perf_counter()
    rows = bench.run(["ptb/lstm"], lengths=[256, 512], batch_sizes=[B], vocab=V, repeats=1, isolate=False,
                     peak_tflops=1.0)
    wall_ms = 1000 * (time.perf_counter() - started)
    assert sum(2 * row["step_ms"] for row in rows) < wall_ms
    for row in rows:
        assert row["status"] == "ok"
        assert row["peak_mem_mb"] >= B * row["length"] * V * 4 / 2**20, row
        step_flops = row["flops_per_token"] * B * row["length"]
        assert row["step_ms"] / 1000 > step_flops / (1e12 * torch.get_num_threads()), row


def test_a_slow_shorter_length_skips_the_longer_ones(tmp_path):
    rows = bench.run(["ptb/gru"], lengths=[4, 8], batch_sizes=[1], vocab=20, repeats=1, isolate=False,
                     max_step_s=0.0, peak_tflops=1.0)
    assert rows[0]["status"] == "ok" and rows[1]["status"].startswith("skipped: T=4 already took")


def test_memory_is_extrapolated_at_each_familys_measured_growth():
    # the CPU run's B = 8 rows at T = 1024 and 2048: recurrent memory doubles with T, attention's grows faster
    rnn = [{"status": "ok", "step_ms": 1, "length": 1024, "peak_mem_mb": 1422.0},
           {"status": "ok", "step_ms": 1, "length": 2048, "peak_mem_mb": 2797.5}]
    gpt = [{"status": "ok", "step_ms": 1, "length": 512, "peak_mem_mb": 1073.0},
           {"status": "ok", "step_ms": 1, "length": 1024, "peak_mem_mb": 2684.0}]
    assert bench.predicted_mem_gb(rnn, 4096) == pytest.approx(2 * 2797.5 / 1024)  # linear (5.5 GB): measured
    assert bench._skip_reason(rnn, 4096, max_step_s=20, max_mem_gb=8) is None
    assert bench.predicted_mem_gb(gpt, 4096) > 16  # T^1.32 from 512 to 1024, applied twice
    assert "2048" not in (bench._skip_reason(gpt, 4096, 20, 8) or "") and bench._skip_reason(gpt, 4096, 20, 8)
    # one measured length: nothing to fit, so the quadratic bound
    assert bench.predicted_mem_gb(rnn[:1], 2048) == pytest.approx(4 * 1422 / 1024)


def test_rows_record_the_attention_kernel_that_ran():
    rows = bench.run(["ptb/lstm", "ptb/gpt", "ptb/gpt:dropout=0", "ptb/gpt:reference"], lengths=[16],
                     batch_sizes=[2], vocab=50, repeats=1, isolate=False, peak_tflops=1.0)
    kernels = {r["family"]: r["attention_kernel"] for r in rows}
    # PyTorch's CPU flash kernel refuses attention dropout: the preset (0.1) runs the unfused math path
    assert kernels == {"ptb/lstm": "", "ptb/gpt": "math", "ptb/gpt:dropout=0": "flash",
                       "ptb/gpt:reference": "written-out"}
    assert bench.build_model("ptb/gpt:dropout=0", vocab=50, length=8).hparams.dropout == 0


@pytest.mark.parametrize("card", ["NVIDIA A100-SXM4-80GB", "NVIDIA L4", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"])
def test_mfu_peak_is_the_stated_bf16_peak_of_any_card_lightning_knows(card, monkeypatch):
    """MFU is measured against the card's own stated peak: a hard-coded H100 number would measure a
    matmul on an A100 or an L4 instead (here, with no GPU, it would fail trying), and give a PCIe H100
    the SXM card's peak."""
    from lightning.fabric.utilities.throughput import _CUDA_FLOPS

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: card)
    peak, source = bench.device_peak_tflops(torch.device("cuda", 0))
    chip = {"NVIDIA A100-SXM4-80GB": "a100", "NVIDIA L4": "l4", "NVIDIA H100 80GB HBM3": "h100 sxm",
            "NVIDIA H100 PCIe": "h100 pcie"}[card]
    assert peak == pytest.approx(_CUDA_FLOPS[chip][torch.bfloat16] / 1e12)
    assert source == f"stated bf16 dense peak of the {card}"


def test_a_variant_may_add_a_model_key_the_preset_lacks():
    """SSD runs on the SSM's PTB preset with the keys only it has (`headdim`), matched in parameters."""
    ssm = bench.build_model("ptb/ssm", vocab=10000, length=8)
    ssd = bench.build_model("ptb/ssm:layer=ssd:d_state=64:headdim=56", vocab=10000, length=8)
    assert (ssd.hparams.layer, ssd.hparams.headdim, ssd.hparams.d_model) == ("ssd", 56, ssm.hparams.d_model)
    assert abs(ssd.num_params(non_embedding=True) / ssm.num_params(non_embedding=True) - 1) < 0.01
