"""End to end on real PTB: a tiny LSTM learns, a run writes what it promises, state handling is right."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from datetime import datetime

import pytest
import torch

from seqbench.data.ptb import PTBDataModule
from seqbench.provenance import cpu_model
from seqbench.training.run import build, train
from conftest import DATA_DIR


def test_tiny_lstm_overfits_a_ptb_slice_far_below_unigram_entropy(cfg_factory, tmp_path, seed, record_property):
    # the first 4 x 16 tokens of four PTB columns, seen 300 times
    cfg = cfg_factory(["data.batch_size=4", "data.bptt=16", "trainer.overfit_batches=1", "trainer.max_epochs=300",
                       "trainer.limit_train_batches=null", "trainer.limit_val_batches=null", "model.hidden_size=64",
                       "model.embedding_size=64", "model.dropout=0", "model/optimizer=adam", "model.optimizer.lr=0.02",
                       "model/scheduler=none", "test=false", "trainer.check_val_every_n_epoch=300",
                       "trainer.log_every_n_steps=100", "~callbacks.best_checkpoint", "~callbacks.step_checkpoint",
                       f"seed={seed}"])
    metrics = train(cfg, tmp_path)
    dm = PTBDataModule(str(DATA_DIR), batch_size=4, bptt=16)
    dm.setup()
    targets = next(iter(dm._stream_loader("train", 4)))["target"].flatten()
    counts = Counter(targets.tolist())
    entropy = -sum(c / len(targets) * math.log(c / len(targets)) for c in counts.values())  # nats/token
    assert entropy > 3.5  # a real slice of text, not a degenerate one
    record_property("learned", float(metrics["train/loss_epoch"]) / entropy)
    assert metrics["train/loss_epoch"] < 0.25 * entropy


def test_run_writes_metrics_json_config_and_checkpoints(cfg_factory, tmp_path):
    cfg = cfg_factory(["trainer.max_epochs=2", "callbacks.step_checkpoint.every_n_train_steps=3"])
    torch.set_float32_matmul_precision("highest")  # torch's default; the run sets its own ("high")
    metrics = train(cfg, tmp_path, choices={"model": "lstm", "data": "ptb"}, overrides=["model=lstm"])
    assert torch.get_float32_matmul_precision() == "highest", "the run's matmul precision outlived it"
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("val/loss", "val/ppl", "test/loss", "test/ppl", "train/loss", "params", "wall_time_s",
                "tokens_per_s", "device", "git_commit", "overrides", "date", "hardware"):
        assert key in on_disk, key
    # the ledger's provenance: the CPU model (not just "x86_64") and a UTC date a page can cite
    assert cpu_model() in on_disk["hardware"] and datetime.fromisoformat(on_disk["date"]).utcoffset().total_seconds() == 0
    assert on_disk["status"] == "completed" and on_disk["overrides"] == "model=lstm"
    assert math.isclose(on_disk["test/ppl"], math.exp(on_disk["test/loss"]), rel_tol=1e-5)
    assert on_disk["params"] == metrics["params"] > 0
    ckpts = {p.name for p in (tmp_path / "checkpoints").iterdir()}
    assert "last.ckpt" in ckpts and any(n.startswith("best-epoch") for n in ckpts)
    assert (tmp_path / "csv" / "metrics.csv").is_file()
    # the tested checkpoint's validation score (what finetune_report --grid chooses by): the best epoch's
    with open(tmp_path / "csv" / "metrics.csv") as f:
        val_losses = [float(row["val/loss"]) for row in csv.DictReader(f) if row.get("val/loss")]
    assert len(val_losses) == 2 and math.isclose(on_disk["val/loss_best"], min(val_losses), rel_tol=1e-6)


def test_state_is_carried_within_a_stream_and_reset_at_its_start(cfg_factory, tmp_path):
    cfg = cfg_factory(["model.dropout=0"])
    dm, model = build(cfg)
    model.eval()
    loader = dm._stream_loader("valid", 4)
    first, second = [b for b, _ in zip(loader, range(2))]
    with torch.no_grad():
        model.lm_logits(first, "val")
        carried = model.lm_logits(second, "val")
        fresh = model.net(second["input"])[0]  # the same window from a zero state
        whole = model.net(torch.cat([first["input"], second["input"]], 1))[0][:, first["input"].size(1):]
        restarted = model.lm_logits(first, "val")
    torch.testing.assert_close(carried, whole, atol=1e-5, rtol=1e-5)  # carrying == one long sequence
    assert not torch.allclose(carried, fresh, atol=1e-3)
    torch.testing.assert_close(restarted, model.net(first["input"])[0], atol=1e-6, rtol=1e-6)


def test_tie_weights_with_unequal_sizes_fails_before_training(cfg_factory, tmp_path):
    from seqbench.errors import ConfigError

    cfg = cfg_factory(["model.tie_weights=true", "model.embedding_size=16", "model.hidden_size=32"])
    torch.set_float32_matmul_precision("highest")
    with pytest.raises(ConfigError, match="embedding_size == model.hidden_size"):
        train(cfg, tmp_path)
    assert torch.get_float32_matmul_precision() == "highest", "a failed run's matmul precision outlived it"
    assert not (tmp_path / "checkpoints").exists()
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "failed"


def test_generate_continues_the_prompt_and_greedy_is_deterministic(cfg_factory):
    from omegaconf import OmegaConf

    from seqbench.training.evaluate import sample

    cfg = cfg_factory([])
    dm, model = build(cfg)
    prompt = dm.tokenizer.encode("the company said").unsqueeze(0)
    out = model.generate(prompt, max_new_tokens=5, temperature=0)
    assert out.shape == (1, 8) and torch.equal(out[:, :3], prompt)
    assert torch.equal(out, model.generate(prompt, max_new_tokens=5, temperature=0))  # greedy: no randomness
    opts = OmegaConf.create({"prompt": "the company said", "num_samples": 2, "max_new_tokens": 4,
                             "temperature": 1.0, "top_k": 5})
    texts = sample(model, dm.tokenizer, opts)
    assert len(texts) == 2 and all(t.startswith("the company said") and len(t) > 20 for t in texts)


def test_top_k_sampling_only_draws_from_the_k_likeliest():
    from seqbench.nn.sampling import sample_next

    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 5.0, 4.0, -1.0, 3.0]]).repeat(200, 1)
    drawn = set(sample_next(logits, temperature=1.0, top_k=2).flatten().tolist())
    assert drawn == {1, 2}
