"""Two CPU processes with DDP (gloo) give the perplexity one process gives, on the same weights, and
both give the perplexity computed here by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from conftest import TINY, TINY_RNN, compose_cfg, run_cli

ARGS = [a for a in TINY if "limit_val" not in a] + TINY_RNN + [
    "data.batch_size=4", "data.eval_batch_size=4", "data.bptt=16", "trainer.max_steps=3", "test=false",
    "callbacks.step_checkpoint.every_n_train_steps=3",
]


@pytest.mark.slow
def test_two_process_ddp_trains_and_validates_like_one_process(tmp_path):
    out = run_cli(ARGS + ["trainer=ddp_cpu", f"hydra.run.dir={tmp_path / 'ddp'}"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    metrics = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["world_size"] == 2
    ckpt = tmp_path / "ddp" / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 3
    assert state["train_state"][0].shape[1] == 4  # both ranks' rows of the carried state were gathered

    results = {}
    for name, extra in [("one", []), ("two", ["trainer=ddp_cpu"])]:
        out = run_cli([f"ckpt_path={ckpt}", "split=valid", *extra, f"hydra.run.dir={tmp_path / name}"],
                      tmp_path, script="eval.py")
        assert out.returncode == 0, out.stderr[-3000:]
        results[name] = json.loads((tmp_path / name / "eval_metrics.json").read_text())
    assert results["two"]["world_size"] == 2
    assert results["two"]["val/ppl"] == pytest.approx(results["one"]["val/ppl"], rel=1e-5)
    # rel 1e-3: the entry points run float32 matmuls at precision "high" (oneDNN may use bf16 passes)
    assert results["one"]["val/ppl"] == pytest.approx(_perplexity_by_hand(ckpt, tmp_path), rel=1e-3)


def _perplexity_by_hand(ckpt, tmp_path) -> float:
    """exp(summed NLL / tokens) over the validation stream in this process, without the task's metric
    or Lightning: what the one- and two-process evaluations must both report."""
    from seqbench.training.run import build

    data, model = build(compose_cfg(ARGS, tmp_path))  # the trained run's data and model
    model.load_state_dict(torch.load(ckpt, weights_only=True)["state_dict"])
    model.eval()
    nll, tokens, state = 0.0, 0, None
    with torch.no_grad():
        for batch in data.val_dataloader():
            logits, state = model.net(batch["input"], state)  # the state carried along the whole stream
            nll += torch.nn.functional.cross_entropy(logits.flatten(0, 1).double(), batch["target"].flatten(),
                                                     reduction="sum").item()
            tokens += batch["target"].numel()
    return math.exp(nll / tokens)


@pytest.mark.slow
@pytest.mark.parametrize("data, keys", [("sst2", ["test/acc", "test/loss"]),
                                        ("conll2003", ["test/acc", "test/f1", "test/loss"])])
def test_two_process_accuracy_and_f1_count_every_example_once(tmp_path, data, keys):
    """Test splits of odd size (SST-2 1,821 sentences, CoNLL-2003 testb 3,453): a padding sampler
    would score one sentence twice on two processes. One process's numbers are the training run's own
    test of the whole split, two processes' are `src/eval.py trainer=ddp_cpu` on the checkpoint that
    test read (`tested_checkpoint`): the same weights by construction."""
    out = run_cli(TINY + TINY_RNN + [f"data={data}", "test=true", "trainer.limit_test_batches=1.0",
                                     f"hydra.run.dir={tmp_path / 'train'}"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    ckpt = json.loads((tmp_path / "train" / "metrics.json").read_text())["tested_checkpoint"]
    assert ckpt and Path(ckpt).is_file()
    out = run_cli([f"ckpt_path={ckpt}", "split=test", "trainer=ddp_cpu", f"hydra.run.dir={tmp_path / 'two'}"],
                  tmp_path, script="eval.py")
    assert out.returncode == 0, out.stderr[-3000:]
    results = {"one": json.loads((tmp_path / "train" / "metrics.json").read_text()),
               "two": json.loads((tmp_path / "two" / "eval_metrics.json").read_text())}
    assert results["one"]["world_size"] == 1 and results["two"]["world_size"] == 2
    for key in keys:
        assert results["two"][key] == pytest.approx(results["one"][key], rel=1e-6, abs=1e-9), key
    assert 0 < results["one"]["test/acc"] < 1  # neither all right nor all wrong: a repeat would move it
