"""Evaluation favours no family: every attention LM scores each token with at least half its context
by default — in every preset and on every corpus — and the run records the context a scored token had."""

from __future__ import annotations

import pytest
from hydra.utils import get_class

from conftest import CONF, compose_cfg
from seqbench.analysis.matrix import corpora
from seqbench.reports.report import scored_context
from seqbench.training.run import build

LM_PRESETS = [f"preset={p.parent.name}/{p.stem}" for p in sorted((CONF / "preset").glob("*/*.yaml"))
              if p.parent.name in ("ptb", "shakespeare")]
LM_CORPORA = [d for d, task in corpora().items() if task == "lm"]


@pytest.mark.parametrize("args", [[p] for p in LM_PRESETS]
                         + [[f"model={m}", f"data={d}"] for m in ("gpt", "transformer") for d in LM_CORPORA])
def test_an_attention_lm_sees_at_least_half_its_context_by_default(args, tmp_path):
    cfg = compose_cfg(args, tmp_path)
    if get_class(cfg.model._target_).lm_batching == "stream":
        pytest.skip("a recurrent preset: its state carries the whole column, there is no window to check")
    assert "context" in cfg.model, args  # a windowed model reads `context` tokens
    if "eval_stride" not in cfg.data:  # rows, not a stream (MQAR): each example is read whole, in one window
        assert cfg.model.context >= cfg.data.seq_len, (args, cfg.model.context, cfg.data.seq_len)
        return
    stride = cfg.data.eval_stride
    assert stride is None or stride <= cfg.model.context // 2, (args, stride, cfg.model.context)


@pytest.mark.parametrize("model", ["gpt", "lstm"])
def test_a_run_records_the_context_of_a_scored_token(model, cfg_factory):
    args = [f"model={model}", "data=ptb"] + (["model.context=16", "model.d_model=16", "model.n_head=2"]
                                              if model == "gpt" else [])
    dm, net = build(cfg_factory(args, tiny=False))
    context = dm.eval_context(net)
    if model == "gpt":
        assert context == {"eval/min_context": 8}  # stride 8 of a 16-token window
        assert scored_context(context) == "≥ 8 tokens (window)"
        assert build(cfg_factory([*args, "data.eval_stride=16"], tiny=False))[0].eval_context(net) == {"eval/min_context": 0}
    else:
        assert context == {"eval/column_tokens": 82430 // 10}  # PTB test, 10 columns
        assert scored_context(context).startswith("all before it")


def test_eval_rescores_a_checkpoint_with_another_stride_as_the_readme_says(tmp_path):
    """`src/eval.py ... data.eval_stride=64` (no `+`): the eval config names the data keys a user
    overrides, null keeping the run's value; the Shakespeare page re-scores with exactly this line."""
    from conftest import run_cli
    import json

    train = run_cli(["model=gpt", "data=shakespeare_char", "model.n_layer=1", "model.d_model=16", "model.n_head=2",
                     "model.context=16", "trainer.max_steps=2", "trainer.limit_val_batches=2", "test=false",
                     "logger=csv", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert train.returncode == 0, train.stderr[-2000:]
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    for stride in (16, 8):
        out = run_cli([f"ckpt_path={ckpt}", "split=valid", f"data.eval_stride={stride}", "data.eval_batch_size=64",
                       f"hydra.run.dir={tmp_path / str(stride)}"], tmp_path, script="eval.py")
        assert out.returncode == 0, out.stderr[-2000:]
    # its last line: the scores on the split it evaluated and where they are
    assert "done in " in out.stdout and " · val/loss " in out.stdout and ": eval_metrics.json, eval.log" in out.stdout
    loss = {s: json.loads((tmp_path / str(s) / "eval_metrics.json").read_text())["val/loss"] for s in (16, 8)}
    assert loss[8] != loss[16]  # the stride reached the data module: other windows, another loss
