"""Training compute logged (`train/flops`) and a run's length set by it (`budget.flops`, seqbench.training.budget)."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import TINY, TINY_RNN, compose_cfg, require_corpus
from seqbench.training.budget import apply_compute_budget, budget_steps
from seqbench.errors import ConfigError
from seqbench.families import FAMILIES
from seqbench.training.run import build, train
from seqbench.tasks.lm import token_nll

TINY_GPT = ["model.n_layer=1", "model.n_head=2", "model.d_model=16", "model.context=16",
            "data.batch_size=4", "data.eval_batch_size=4"]


def history(run_dir) -> list[dict]:
    with open(run_dir / "csv" / "metrics.csv", newline="") as f:
        return [row for row in csv.DictReader(f) if row.get("val/loss")]


def test_a_tiny_run_logs_cumulative_flops_in_the_history_and_metrics_json(tmp_path):
    cfg = compose_cfg(TINY + TINY_RNN + ["model=lstm", "data=shakespeare_char", "data.batch_size=4", "data.bptt=8",
                                         "trainer.val_check_interval=2"], tmp_path)
    train(cfg, tmp_path)
    rows = history(tmp_path)
    flops = [float(r["train/flops"]) for r in rows]
    assert len(flops) == 2 and 0 < flops[0] < flops[1]
    saved = json.loads((tmp_path / "metrics.json").read_text())
    # 4 batches of 4 x 8 characters, each costing the LSTM's FLOPs per token (no window is short here)
    lstm_per_token = 3 * (2 * 4 * 16 * (16 + 16) * 2 + 2 * 16 * 65)  # 2 layers E = H = 16, 65 characters
    assert saved["train/flops"] == pytest.approx(4 * 4 * 8 * lstm_per_token) == flops[-1]


def test_a_flops_budget_sets_the_steps_and_validates_at_equal_flop_intervals(tmp_path):
    budget = 2e8
    cfg = compose_cfg(TINY + TINY_GPT + ["model=gpt", "data=shakespeare_char", "trainer.limit_train_batches=null",
                                         "trainer.max_epochs=1", f"budget.flops={budget}", "budget.evals=4"], tmp_path)
    train(cfg, tmp_path)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    step_flops = saved["budget/step_flops"]
    assert step_flops == saved["flops_per_token"] * 4 * 16  # 4 windows of 16 characters
    assert saved["train/flops"] == pytest.approx(budget, abs=2 * step_flops)  # rounded to whole intervals
    assert saved["train/flops"] == pytest.approx(saved["budget/max_steps"] * step_flops)  # it stopped there
    # an epoch of Shakespeare is far longer than the budget: max_epochs=1 did not end the run, the budget did
    flops = [float(r["train/flops"]) for r in history(tmp_path)]
    assert flops == pytest.approx([saved["train/flops"] * k / 4 for k in (1, 2, 3, 4)])


def test_budget_steps_round_to_whole_intervals_and_refuse_a_budget_below_one_step_per_validation():
    assert budget_steps(1e9, 1e6, 10) == (1000, 100)
    assert budget_steps(1.004e9, 1e6, 10) == (1000, 100)  # within half a step per interval of the budget
    with pytest.raises(ConfigError, match="fewer than budget.evals=10"):
        budget_steps(5e6, 1e6, 10)


def test_a_budget_on_a_task_without_a_flops_formula_fails_in_one_sentence(tmp_path):
    cfg = compose_cfg(TINY + TINY_RNN + ["model=lstm", "data=copy", "trainer.limit_train_batches=null",
                                         "budget.flops=1e9"], tmp_path)
    with pytest.raises(ConfigError, match="no FLOPs formula"):
        train(cfg, tmp_path)


def test_warmup_is_capped_at_a_fraction_of_a_short_run():
    import torch

    from seqbench.optim import warmup_cosine

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    capped = warmup_cosine(opt, total_steps=100, warmup_steps=200, max_warmup_fraction=0.1)
    assert capped.lr_lambdas[0].warmup_steps == 10  # not 200: the run would end inside its warmup
    assert warmup_cosine(opt, total_steps=10_000, warmup_steps=200, max_warmup_fraction=0.1).lr_lambdas[0].warmup_steps == 200


ATTENTION = [name for name, family in FAMILIES.items() if family.compared and family.cls.lm_batching == "windows"]
FRONTIERS = {"shakespeare": ("frontier", "tiny_shakespeare"), "ptb": ("frontier_ptb", "ptb")}  # preset folder: experiment, corpus


@pytest.mark.parametrize("folder", FRONTIERS)
@pytest.mark.parametrize("family", ATTENTION)
def test_one_override_gives_a_frontier_attention_preset_256_token_windows_and_the_budget_counts_them(family, folder,
                                                                                                      tmp_path):
    """Issue 36 item 6 trains the attention models on 256-token windows: `++model.context=256` on the
    frontier preset is the whole change. The data then cuts 256-token training windows, the budget
    buys steps of rows x 256 tokens at the FLOPs per token of a 256-token window, and that count is
    what torch's FlopCounterMode measures on a training step of the preset's model (the readable
    attention, which the counter sees into; tests/test_flops.py)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    experiment, corpus = FRONTIERS[folder]
    require_corpus(corpus)
    cfg = compose_cfg([f"experiment={experiment}", f"preset=frontier/{folder}/{family}", "size=s", "++model.context=256",
                       "model.attn_impl=reference", "budget.flops=1e13", "trainer=cpu", "logger=csv"], tmp_path)
    dm, model = build(cfg)
    assert model.context == 256 and dm.train_batch_shape(model) == (cfg.data.batch_size, 256)
    per_token = model.flops_per_token()
    assert per_token == model.flops_per_token(256) > model.flops_per_token(64)  # the attention term grows
    info = apply_compute_budget(cfg, model, dm)
    assert info["budget/step_flops"] == per_token * cfg.data.batch_size * 256
    assert cfg.trainer.max_steps == info["budget/max_steps"] == round(1e13 / 10 / info["budget/step_flops"]) * 10

    torch.manual_seed(0)
    x = torch.randint(model.spec.vocab_size, (1, 257))
    batch = {"input": x[:, :-1], "target": x[:, 1:], "window": 0}
    model.train()
    with FlopCounterMode(display=False) as counter:
        nll, n = token_nll(model.lm_logits(batch, "train"), batch["target"])
        (nll / n).backward()
    assert per_token == pytest.approx(counter.get_total_flops() / 256, rel=0.01)
