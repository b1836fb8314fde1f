"""The attention families end to end: configs, a few CPU batches on real corpora, generation."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import TINY, compose_cfg
from seqbench.data.shakespeare import ShakespeareCharDataModule
from seqbench.training.run import build, train

TINY_GPT = ["model.n_layer=1", "model.n_head=2", "model.d_model=16", "model.context=16",
            "data.batch_size=4", "data.eval_batch_size=4"]


@pytest.mark.parametrize("model,data", [("gpt", "ptb"), ("transformer", "shakespeare_char")])
def test_attention_family_trains_and_tests_on_windows(model, data, tmp_path):
    cfg = compose_cfg(TINY + TINY_GPT + [f"model={model}", f"data={data}"], tmp_path)
    metrics = train(cfg, tmp_path)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["status"] == "completed" and math.isfinite(saved["test/ppl"])
    assert 0 < saved["params_non_embedding"] < saved["params"]
    assert metrics["val/ppl"] == pytest.approx(saved["val/ppl"])
    history = (tmp_path / "csv" / "metrics.csv").read_text().splitlines()
    header = history[0].split(",")
    assert {"val/ppl", "curve/tokens", "curve/train_time_s", "curve/train_cpu_s"} <= set(header)
    row = next(dict(zip(header, line.split(","))) for line in history[1:] if line.split(",")[header.index("val/ppl")])
    assert float(row["curve/tokens"]) == 4 * 4 * 16  # limit_train_batches=4 batches of 4 windows of 16 tokens


def test_model_yaml_picks_adamw_with_warmup_cosine_and_the_command_line_wins(tmp_path):
    cfg = compose_cfg(["model=gpt_nano"], tmp_path)
    assert cfg.model.optimizer._target_ == "torch.optim.AdamW"
    assert cfg.model.scheduler._target_ == "seqbench.optim.warmup_cosine" and cfg.model.scheduler_interval == "step"
    assert (cfg.model.n_layer, cfg.model.n_head, cfg.model.d_model) == (3, 3, 48)
    cfg = compose_cfg(["model=transformer", "model/optimizer=sgd", "model/scheduler=none"], tmp_path)
    assert cfg.model.optimizer._target_ == "torch.optim.SGD" and cfg.model.scheduler is None


def test_generation_keeps_the_prompt_and_slides_past_the_context(tmp_path):
    cfg = compose_cfg(TINY + TINY_GPT + ["model=gpt", "data=shakespeare_char"], tmp_path)
    datamodule, model = build(cfg)
    tokenizer = datamodule.spec.tokenizer
    prompt = tokenizer.encode("ROMEO:").unsqueeze(0).repeat(2, 1)
    torch.manual_seed(0)
    out = model.generate(prompt, max_new_tokens=30, temperature=1.0, top_k=5)  # 36 > context 16
    assert out.shape == (2, 36) and torch.equal(out[:, :6], prompt)
    assert tokenizer.decode(out[0].tolist()).startswith("ROMEO:")
    greedy = [model.generate(prompt[:1], 5, temperature=0) for _ in range(2)]
    assert torch.equal(greedy[0], greedy[1])


def test_window_loaders_follow_the_model_context_and_eval_stride():
    class Trainer:  # what the DataModule reads from a Lightning trainer
        global_rank, world_size, current_epoch, training = 0, 1, 0, False

        class lightning_module:
            lm_batching, context = "windows", 32

    from conftest import DATA_DIR

    dm = ShakespeareCharDataModule(str(DATA_DIR), batch_size=5, eval_batch_size=7, eval_stride=8)
    dm.setup()
    dm.trainer = Trainer()
    train_batch = next(iter(dm.train_dataloader()))
    assert train_batch["input"].shape == (5, 32)
    valid = dm.val_dataloader()
    scored = sum(int((b["target"] != -100).sum()) for b in valid)
    assert scored == dm.num_tokens("valid") - 1  # the whole split, every target once
    assert len(valid) == math.ceil((math.ceil((dm.num_tokens("valid") - 1 - 32) / 8) + 1) / 7)


RESUME = TINY + TINY_GPT + [
    "model=gpt", "data=shakespeare_char", "trainer.limit_train_batches=null", "model.dropout=0.3", "test=false",
    "callbacks.step_checkpoint.every_n_train_steps=4", "model.scheduler.warmup_steps=3",
    "+model.scheduler.total_steps=20",
]


def _state(ckpt):
    return torch.load(ckpt, map_location="cpu", weights_only=True)


@pytest.mark.slow
def test_windows_resume_mid_epoch_reproduces_the_uninterrupted_run_exactly(tmp_path):
    train(compose_cfg(RESUME + ["trainer.max_steps=8"], tmp_path / "a"), tmp_path / "a")
    train(compose_cfg(RESUME + ["trainer.max_steps=4", "~callbacks.best_checkpoint"], tmp_path / "b"), tmp_path / "b")
    ckpt = tmp_path / "b" / "checkpoints" / "last.ckpt"
    assert next(v for k, v in _state(ckpt).items() if k.endswith("DataModule"))["train_next_window"] == 4
    train(compose_cfg(RESUME + ["trainer.max_steps=8", f"ckpt_path={ckpt}"], tmp_path / "c"), tmp_path / "c")
    a, c = _state(tmp_path / "a" / "checkpoints" / "last.ckpt"), _state(tmp_path / "c" / "checkpoints" / "last.ckpt")
    assert a["global_step"] == c["global_step"] == 8
    for name in a["state_dict"]:  # same windows, same dropout masks, same LR: identical weights
        torch.testing.assert_close(c["state_dict"][name], a["state_dict"][name], rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_two_process_ddp_evaluates_windows_exactly_like_one_process(tmp_path):
    from conftest import run_cli

    # the whole validation split (about 13,900 overlapping windows), 64 a batch: each rank's last batch is
    # partial, and 4 a batch made this the suite's slowest test (3,500 evaluation steps per run, three runs)
    args = [a for a in TINY if "limit_val" not in a] + [a for a in TINY_GPT if "eval_batch_size" not in a] + [
        "model=gpt", "data=shakespeare_char", "data.eval_stride=8", "data.eval_batch_size=64",
        "trainer.max_steps=2", "test=false"]
    out = run_cli(args + [f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    results = {}
    for name, extra in [("one", []), ("two", ["trainer=ddp_cpu"])]:
        out = run_cli([f"ckpt_path={ckpt}", "split=valid", *extra,
                       f"hydra.run.dir={tmp_path / name}"], tmp_path, script="eval.py")
        assert out.returncode == 0, out.stderr[-3000:]
        results[name] = json.loads((tmp_path / name / "eval_metrics.json").read_text())
    assert results["two"]["world_size"] == 2
    assert results["two"]["val/ppl"] == pytest.approx(results["one"]["val/ppl"], rel=1e-6)
