"""The generation benchmark's arithmetic (a fake model on a fake clock) and one real run's record."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from seqbench.analysis import generation_bench
from seqbench.analysis.layer_bench import Meter

PROMPT_S, STEP_S = 0.5, 0.01  # the fake model's cost: reading a prompt, then each new token


class FakeModel:
    """generate() moves the fake clock by a prompt read and one step per new token, as the real ones cost."""

    def __init__(self, clock: list[float], context: int | None):
        self.clock, self.context = clock, context

    def to(self, device):
        return self

    def generate(self, prompt, new_tokens, temperature):
        self.clock[0] += PROMPT_S + STEP_S * new_tokens
        return torch.zeros(prompt.size(0), prompt.size(1) + new_tokens, dtype=torch.long)


def fake_case(monkeypatch, T: int, context: int | None, *extra: str) -> dict:
    clock = [0.0]
    monkeypatch.setattr(generation_bench, "time", SimpleNamespace(perf_counter=lambda: clock[0],
                                                                  process_time=lambda: clock[0]))
    monkeypatch.setattr(generation_bench, "build_model", lambda family, vocab: FakeModel(clock, context))
    args = generation_bench.parse_args(["--batch", "4", "--new-tokens", "11", "--families", "any", *extra])
    return generation_bench.timer("any")(torch.device("cpu"), T, args, Meter(torch.device("cpu")))


def test_rates_count_the_new_tokens_and_the_steps_rate_leaves_the_prompt_read_out(monkeypatch):
    row = fake_case(monkeypatch, 32, None)
    assert row["seconds"] == pytest.approx(PROMPT_S + 11 * STEP_S)
    assert row["prompt_seconds"] == pytest.approx(PROMPT_S + STEP_S)
    assert row["tokens_per_s"] == pytest.approx(4 * 11 / (PROMPT_S + 11 * STEP_S))  # B x N over the call
    assert row["decode_tokens_per_s"] == pytest.approx(4 / STEP_S)  # B tokens per step of 0.01 s


def test_the_window_slides_once_prompt_and_new_tokens_pass_the_context(monkeypatch):
    assert fake_case(monkeypatch, 53, 64)["window_slides"] is False  # 53 + 11 = 64 fits
    assert fake_case(monkeypatch, 54, 64)["window_slides"] is True  # 65 tokens: the window moves
    assert fake_case(monkeypatch, 4096, None)["window_slides"] is False  # a recurrent state has no window


def test_the_baseline_must_be_one_of_the_families():
    with pytest.raises(SystemExit):
        generation_bench.parse_args(["--families", "a", "b", "--baseline", "c"])
    assert generation_bench.parse_args(["--families", "a", "b"]).baseline == "a"


def test_a_run_records_each_family_from_its_own_process_with_ratios_to_the_baseline(tmp_path):
    """Two real presets, each generating 3 tokens after prompts of 8 and 24 in a child process."""
    out = tmp_path / "gen.json"
    families = ["shakespeare/lstm", "shakespeare/gpt"]
    generation_bench.main(["--T", "8", "24", "--batch", "2", "--new-tokens", "3", "--warmup", "0",
                           "--repeats", "1", "--families", *families, "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["command"].startswith("python -m seqbench.analysis.generation_bench --T 8 24")
    assert record["cpu_model"] and record["torch"] == torch.__version__ and record["baseline"] == families[0]
    rows = record["results"]
    assert [(r["method"], r["T"], r["status"]) for r in rows] == [(f, T, "ok") for f in families for T in (8, 24)]
    assert [r["ratio_vs_shakespeare/lstm"] for r in rows[:2]] == [1.0, 1.0]
    assert rows[2]["ratio_vs_shakespeare/lstm"] == pytest.approx(rows[2]["tokens_per_s"] / rows[0]["tokens_per_s"])
    # the GPT preset's context is 64: 24 + 3 tokens fit it, and a recurrent state has no context
    assert [(r["context"], r["window_slides"]) for r in rows] == [(None, False)] * 2 + [(64, False)] * 2
