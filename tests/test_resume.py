"""A killed run resumes from its last checkpoint: same step, same LR, same place in the token stream."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import warnings

import pytest
import torch

from conftest import ROOT, TINY, TINY_RNN, compose_cfg, run_cli
from seqbench.families import FAMILIES
from seqbench.training.lightning_warnings import NOT_RESUMABLE
from seqbench.training.run import train

# the language-model families (those with a FLOPs formula, compared or not yet, as SSD) that carry a
# state across truncated-BPTT windows (the attention families' windows resume in tests/test_attention_lm.py)
STREAM_FAMILIES = [name for name, family in FAMILIES.items()
                   if family.flops is not None and family.cls.lm_batching == "stream"]
RESUME = TINY + TINY_RNN + [
    "trainer.limit_train_batches=null", "data.batch_size=4", "data.bptt=8", "model.dropout=0.3",
    "test=false", "callbacks.step_checkpoint.every_n_train_steps=4", "model/scheduler=warmup_cosine",
    "model.scheduler.warmup_steps=3", "+model.scheduler.total_steps=20",
]


def _weights(ckpt):
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    return state["state_dict"], state


@pytest.mark.slow
@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_resume_mid_epoch_reproduces_the_uninterrupted_run_exactly(family, tmp_path):
    args = [a for a in RESUME if a not in TINY_RNN] + [f"model={family}", *FAMILIES[family].tiny]
    straight = compose_cfg(args + ["trainer.max_steps=8"], tmp_path / "a")
    train(straight, tmp_path / "a")
    # stops after step 4, mid-epoch. Without the epoch-end checkpoint (which would mark the epoch as
    # finished), last.ckpt is exactly what a run killed after step 4 leaves behind
    interrupted = compose_cfg(args + ["trainer.max_steps=4", "~callbacks.best_checkpoint"], tmp_path / "b")
    train(interrupted, tmp_path / "b")
    ckpt = tmp_path / "b" / "checkpoints" / "last.ckpt"
    _, state = _weights(ckpt)
    assert state["global_step"] == 4
    assert next(iter(v for k, v in state.items() if k.endswith("DataModule")))["train_next_window"] == 4
    resumed = compose_cfg(args + ["trainer.max_steps=8", f"ckpt_path={ckpt}"], tmp_path / "c")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(resumed, tmp_path / "c")
    # the data module keeps its place, so Lightning's "not resumable ... unreliable results" is false here
    assert not [w for w in caught if str(w.message).startswith(NOT_RESUMABLE)]
    final_a, state_a = _weights(tmp_path / "a" / "checkpoints" / "last.ckpt")
    final_c, state_c = _weights(tmp_path / "c" / "checkpoints" / "last.ckpt")
    assert state_a["global_step"] == state_c["global_step"] == 8
    for name in final_a:  # same data order, hidden state, dropout masks and LR: identical weights
        torch.testing.assert_close(final_c[name], final_a[name], rtol=0, atol=0, msg=name)
    lr = lambda s: s["optimizer_states"][0]["param_groups"][0]["lr"]  # noqa: E731
    assert lr(state_a) == lr(state_c)
    torch.testing.assert_close(state_c["train_state"][0], state_a["train_state"][0], rtol=0, atol=0)


@pytest.mark.slow
def test_a_run_resumed_from_the_checkpoint_after_a_mid_epoch_validation_reproduces_the_uninterrupted_run(tmp_path):
    """A validation every 4 steps writes last.ckpt at its end (the best-checkpoint callback's save_last), mid-epoch:
    what a run killed before its next step checkpoint leaves. The run resumed from it trains the batches the
    uninterrupted one does. The validation stream's batches carry their window too: had they moved the saved
    place, the resumed run would start at the window after the last validation batch (3), not at the training's (4)."""
    # without the step checkpoint, whose save_last at the end of fit (it saved nothing before) would overwrite it
    args = [a for a in RESUME if "every_n_train_steps" not in a] + [
        "trainer.val_check_interval=4", "trainer.limit_val_batches=3", "~callbacks.step_checkpoint"]
    train(compose_cfg(args + ["trainer.max_steps=8"], tmp_path / "a"), tmp_path / "a")
    train(compose_cfg(args + ["trainer.max_steps=4"], tmp_path / "b"), tmp_path / "b")
    ckpt = tmp_path / "b" / "checkpoints" / "last.ckpt"
    _, state = _weights(ckpt)
    loops = state["loops"]["fit_loop"]
    assert state["global_step"] == 4 and loops["epoch_loop.val_loop.batch_progress"]["total"]["completed"] == 3
    assert loops["epoch_progress"]["total"]["completed"] == 0  # written after the validation, inside the epoch
    place = next(v for k, v in state.items() if k.endswith("DataModule"))["train_next_window"]
    assert place == 4, f"the checkpoint after validation saves training window {place}, not 4"
    train(compose_cfg(args + ["trainer.max_steps=8", f"ckpt_path={ckpt}"], tmp_path / "c"), tmp_path / "c")
    final_a, state_a = _weights(tmp_path / "a" / "checkpoints" / "last.ckpt")
    final_c, state_c = _weights(tmp_path / "c" / "checkpoints" / "last.ckpt")
    assert state_a["global_step"] == state_c["global_step"] == 8
    for name in final_a:  # same batches, hidden state, dropout masks and rate: identical weights
        torch.testing.assert_close(final_c[name], final_a[name], rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_a_killed_process_resumes_from_its_last_checkpoint(tmp_path):
    args = [a for a in RESUME if "scheduler" not in a] + [
        "callbacks.step_checkpoint.every_n_train_steps=3", "trainer.max_steps=100000"]
    cmd = [sys.executable, str(ROOT / "src" / "train.py"), *args, f"paths.log_dir={tmp_path}",
           "hydra.run.dir=" + str(tmp_path / "killed")]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)  # no chance to save anything more
    proc.wait()
    assert ckpt.exists(), "no checkpoint was written before the kill"
    saved_step = torch.load(ckpt, map_location="cpu", weights_only=True)["global_step"]
    out = run_cli([*args[:-1], f"trainer.max_steps={saved_step + 3}", f"ckpt_path={ckpt}",
                   "hydra.run.dir=" + str(tmp_path / "resumed")], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    metrics = json.loads((tmp_path / "resumed" / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    final = torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert final["global_step"] == saved_step + 3  # it continued, it did not start over



@pytest.mark.slow
def test_a_probe_resumed_mid_epoch_reproduces_the_uninterrupted_run_exactly(tmp_path):
    """The probes keep their place in the epoch too (seqbench.data.synthetic: the next batch of a fixed,
    seeded training set), so a resumed probe sees the batches the uninterrupted one would have."""
    args = [*TINY, "experiment=long_range", "data=copy", "preset=probe/gru", "model.hidden_size=16", "data.T=8",
            "data.train_size=256", "data.batch_size=16", "trainer.limit_train_batches=null", "test=false",
            "trainer.max_epochs=-1", "callbacks.step_checkpoint.every_n_train_steps=4"]
    train(compose_cfg(args + ["trainer.max_steps=8"], tmp_path / "a"), tmp_path / "a")
    train(compose_cfg(args + ["trainer.max_steps=4", "~callbacks.best_checkpoint"], tmp_path / "b"), tmp_path / "b")
    ckpt = tmp_path / "b" / "checkpoints" / "last.ckpt"
    _, state = _weights(ckpt)
    assert state["global_step"] == 4  # of 16 batches an epoch: mid-epoch
    assert next(v for k, v in state.items() if k.endswith("DataModule"))["train_next_window"] == 4
    train(compose_cfg(args + ["trainer.max_steps=8", f"ckpt_path={ckpt}"], tmp_path / "c"), tmp_path / "c")
    final_a, state_a = _weights(tmp_path / "a" / "checkpoints" / "last.ckpt")
    final_c, state_c = _weights(tmp_path / "c" / "checkpoints" / "last.ckpt")
    assert state_a["global_step"] == state_c["global_step"] == 8
    for name in final_a:
        torch.testing.assert_close(final_c[name], final_a[name], rtol=0, atol=0, msg=name)


def _translation_run(tmp_path, folder, ckpt=None, every=4, **trainer_args):
    """A tiny attention seq2seq fitted on the synthetic reversal pairs (10 batches an epoch), dropout on; a
    last.ckpt every `every` steps. Returns that checkpoint's path."""
    from functools import partial

    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from fakes import ReversalTranslationData
    from seqbench.training.lightning_warnings import keeps_its_place
    from seqbench.models.recurrent import RecurrentModel

    data = ReversalTranslationData(str(tmp_path / "tok"), sizes=(320, 20, 20), batch_size=32, seed=3)
    data.setup()
    assert keeps_its_place(data)
    torch.manual_seed(0)
    model = RecurrentModel(data.spec, partial(torch.optim.Adam, lr=3e-3), cell="gru", embedding_size=16,
                           hidden_size=16, num_layers=1, dropout=0.3, bidirectional=True, attention="bahdanau",
                           tie_weights=False)
    keep = ModelCheckpoint(dirpath=tmp_path / folder, every_n_train_steps=every, save_top_k=0, save_last=True)
    trainer = L.Trainer(limit_val_batches=0, num_sanity_val_steps=0, logger=False, callbacks=[keep],
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        default_root_dir=str(tmp_path / folder), **trainer_args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, datamodule=data, ckpt_path=ckpt)
    return tmp_path / folder / "last.ckpt"


def _same_weights(a, b, steps):
    final_a, state_a = _weights(a)
    final_b, state_b = _weights(b)
    assert state_a["global_step"] == state_b["global_step"] == steps
    for name in final_a:  # same batches, dropout masks and rate: identical weights
        torch.testing.assert_close(final_b[name], final_a[name], rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_a_translation_run_resumed_mid_epoch_reproduces_the_uninterrupted_run_exactly(tmp_path):
    """Translation keeps its place too (seqbench.data.translation: the saved batch of the (seed, epoch) order).
    Without it Lightning restarts the epoch's iterator, and the resumed run trains the epoch's first batches
    again in place of batches 4 to 7: the weights differ."""
    straight = _translation_run(tmp_path, "a", max_steps=8)
    interrupted = _translation_run(tmp_path, "b", max_steps=4)  # what a run killed after step 4 leaves
    _, state = _weights(interrupted)
    assert state["global_step"] == 4
    assert state["ReversalTranslationData"] == {"train_next_window": 4, "train_epoch": 0}  # the data module's place
    _same_weights(straight, _translation_run(tmp_path, "c", max_steps=8, ckpt=str(interrupted)), 8)


@pytest.mark.slow
def test_a_run_resumed_after_an_epoch_cut_short_starts_the_next_epoch_at_its_first_batch(tmp_path):
    """With `limit_train_batches` an epoch ends before the loader does: its checkpoint must send the resumed
    run to the next epoch's first batch (seqbench.data.epoch_place), not to the loader's next one. Lightning
    asks for the resumed run's loader before moving its epoch on, so a saved place of 5 of 10 batches read
    as "mid-epoch" made the next epoch train its batches 5 to 9 only."""
    cut = {"limit_train_batches": 5, "every": 5}  # a checkpoint after each epoch's last batch
    straight = _translation_run(tmp_path, "a", max_epochs=2, **cut)
    ended = _translation_run(tmp_path, "b", max_epochs=1, **cut)
    _, state = _weights(ended)
    assert state["global_step"] == 5 and state["ReversalTranslationData"]["train_next_window"] == 0
    _same_weights(straight, _translation_run(tmp_path, "c", max_epochs=2, ckpt=str(ended), **cut), 10)
