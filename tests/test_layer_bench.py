"""The layer benchmark's bookkeeping: skips it predicts, ratios within one T, the JSON it writes."""

from __future__ import annotations

import json
import time

import torch

from seqbench.analysis import layer_bench
from seqbench.nn.ssd import SSD
from seqbench.reports.ledger import RECORD, read_record


def tiny_args(*extra: str):
    return layer_bench.parse_args(["--T", "32", "64", "--batch", "2", "--width", "16", "--warmup", "0",
                                   "--repeats", "1", *extra])


def test_a_case_predicted_past_the_time_limit_is_skipped_with_its_reason():
    rows = layer_bench.run_method("attention_math", tiny_args("--max-case-s", "1e-9"))
    assert [r["status"].split(":")[0] for r in rows] == ["skipped", "skipped"]
    assert "predicted" in rows[0]["status"] and "shorter T" in rows[1]["status"]


def test_a_case_predicted_past_free_memory_is_skipped(monkeypatch):
    """The calibration at T = 128 "takes" 1 GiB, so T = 256 would need 2 of the free 1 GiB."""
    monkeypatch.setattr(layer_bench, "_free_memory", lambda device: 2**30)
    monkeypatch.setattr(layer_bench.Meter, "peak", lambda self: 2**30)
    args = layer_bench.parse_args(["--T", "256", "--batch", "1", "--width", "8", "--warmup", "0",
                                   "--repeats", "1"])
    (row,) = layer_bench.run_method("mingru_loop", args)
    assert row["status"].startswith("skipped: predicted 2.0 GiB")


class _Sleeper(torch.nn.Module):
    """A layer whose fwd+bwd takes wall time but almost no CPU time: a busy CPU's other jobs."""

    def forward(self, x):
        time.sleep(0.3)
        return x * 2


def test_a_case_cut_after_its_warm_up_is_timed_on_the_clock_asked_for():
    """A warm-up past --max-case-s leaves no timed repeat; its row must still be on the CPU clock, not
    the wall clock the other rows of a --clock cpu table are not on (a loaded VM: 10x apart)."""
    args = tiny_args("--clock", "cpu", "--warmup", "1", "--max-case-s", "0.1")
    row = layer_bench.time_case(lambda D: _Sleeper(), lambda m, x: m(x), torch.device("cpu"), 8, args,
                                layer_bench.Meter(torch.device("cpu")))
    assert row["repeats"] == 0 and row["wall_seconds"] >= 0.3
    assert row["seconds"] == row["cpu_seconds"] < row["wall_seconds"] - 0.25  # the sleep is no CPU time


def test_ratios_compare_methods_at_the_same_length_only():
    rows = [{"method": "lstm_fused", "T": 512, "status": "ok", "tokens_per_s": 100.0},
            {"method": "lstm_fused", "T": 2048, "status": "ok", "tokens_per_s": 50.0},
            {"method": "mingru_loop", "T": 512, "status": "ok", "tokens_per_s": 150.0},
            {"method": "mingru_loop", "T": 2048, "status": "ok", "tokens_per_s": 75.0},
            {"method": "ssm_loop", "T": 4096, "status": "ok", "tokens_per_s": 10.0}]
    layer_bench.add_ratios(rows)
    assert [r.get("ratio_vs_lstm_fused") for r in rows] == [1.0, 1.0, 1.5, 1.5, None]


def test_a_run_writes_the_machine_the_command_and_every_case(tmp_path):
    out = tmp_path / "layer.json"
    layer_bench.main(["--T", "16", "--batch", "2", "--width", "16", "--warmup", "0", "--repeats", "1",
                      "--methods", "lstm_fused", "mingru_loop", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["torch"] and result["date"]
    assert result["command"].startswith("python -m seqbench.analysis.layer_bench --T 16")
    assert [(r["method"], r["T"], r["status"]) for r in result["results"]] == [("lstm_fused", 16, "ok"),
                                                                                ("mingru_loop", 16, "ok")]
    assert result["results"][0]["ratio_vs_lstm_fused"] == 1.0 and result["results"][1]["tokens_per_s"] > 0
    (record,) = read_record(tmp_path / RECORD, tmp_path.parent)  # the ledger: commit and wall time beside it
    assert record.files == ("layer.json",) and record.command == result["command"] and record.wall_time.endswith(" s")


def test_a_method_the_device_cannot_run_is_an_error_row_for_every_length(monkeypatch):
    """CUDA's flash SDPA kernel has no fp32 path; the method's rows say so instead of the child dying."""
    table = layer_bench.methods("cpu")

    def no_kernel(module, x):
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(layer_bench, "methods", lambda device, ssd_minimal=None: {**table, "attention_flash": (
        table["attention_flash"][0], no_kernel, 1)})
    rows = layer_bench.run_method("attention_flash", tiny_args())
    assert [r["status"] for r in rows] == ["error: RuntimeError: No available kernel. Aborting execution."] * 2


FAKE_SSD_MINIMAL = '''
import torch
from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined  # the real file's Triton import


def ssd_minimal_discrete(X, A, B, C, block_len, initial_states=None):
    """The recurrence step by step, in the reference's conventions: X (b, l, h, p), A (b, l, h) the log
    decays, B and C (b, l, g, n), whole blocks only, initial_states (b, 1, h, p, n)."""
    assert X.shape[1] % block_len == 0
    b, l, h, p = X.shape
    state = X.new_zeros(b, h, p, B.shape[-1]) if initial_states is None else initial_states[:, 0]
    ys = []
    for t in range(l):
        state = torch.exp(A[:, t])[..., None, None] * state + X[:, t, :, :, None] * B[:, t, :, None, :]
        ys.append((state * C[:, t, :, None, :]).sum(-1))
    return torch.stack(ys, 1), state
'''


def fake_mamba_ssm(tmp_path):
    """A stand-in for mamba-ssm's sdist: mamba_ssm/__init__.py with a version, modules/ssd_minimal.py."""
    (tmp_path / "mamba_ssm" / "modules").mkdir(parents=True)
    (tmp_path / "mamba_ssm" / "__init__.py").write_text('__version__ = "9.9.9"\n')
    path = tmp_path / "mamba_ssm" / "modules" / "ssd_minimal.py"
    path.write_text(FAKE_SSD_MINIMAL)
    return str(path)


def test_the_ssd_minimal_row_is_our_block_with_the_references_ssd(tmp_path):
    """The peer row swaps only the SSD: with a reference that computes the same map, the block's outputs
    and carried state are ours (the arguments' conventions: log decays, whole blocks, the initial state's
    chunk axis); the file's import of the uninstalled package is stubbed, and its version is recorded."""
    path = fake_mamba_ssm(tmp_path)
    torch.manual_seed(0)
    ours = SSD(32).double()
    peer = layer_bench._SSDMinimal(32, path).double()
    peer.load_state_dict(ours.state_dict())
    x = torch.randn(2, 200, 32, dtype=torch.float64)  # pieces of 256 on a CPU: 200 is one, not a whole chunk
    with torch.no_grad():
        y, state = ours(x[:, :128])
        y_peer, state_peer = peer(x[:, :128])
        assert (y_peer - y).abs().max() <= 1e-10
        y, _ = ours(x[:, 128:192], state)
        y_peer, _ = peer(x[:, 128:192], state_peer)
        assert (y_peer - y).abs().max() <= 1e-10
    assert layer_bench.peer_versions(path)["mamba_ssm"] == "9.9.9"


def test_a_peer_that_cannot_be_loaded_is_an_error_row():
    (row,) = layer_bench.run_method("ssd_minimal", layer_bench.parse_args(
        ["--T", "32", "--batch", "2", "--width", "64", "--warmup", "0", "--repeats", "1"]))
    assert row["status"].startswith("error: FileNotFoundError: no --ssd-minimal")
